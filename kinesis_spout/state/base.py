"""The contracts of Trident-style state: spout kinds, txids, states, map states and backing maps.

Trident gives every batch a transaction id (txid), replays a failed batch under the same txid, and applies state
updates strictly in txid order. What a state may assume about a replayed batch depends on the spout:

- a **transactional** spout replays a txid with exactly the same records (no overlap between txids, none
  skipped): a :class:`~kinesis_spout.state.maps.TransactionalMap` can skip a key whose stored txid is the
  batch's own, because that batch was already applied to it;
- an **opaque** spout guarantees only that each record is processed successfully in exactly one batch; a
  replayed txid may hold other records, so an :class:`~kinesis_spout.state.maps.OpaqueMap` keeps the value
  before the txid as well and recomputes from it;
- a **non-transactional** spout promises neither: no state is exactly-once with it.

This module is pure (standard library only). The protocols are what a user implements for a database of their
own: a :class:`BackingMap` (``multi_get``/``multi_put``, Trident's IBackingMap) is all a key/value store needs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol, Sequence, TypeVar, runtime_checkable

from kinesis_spout.errors import ConfigError, SpoutError

__all__ = [
    "BackingMap", "BackingMapFactory", "ConditionalBackingMap", "Key", "MapKind", "MapState", "Snapshottable",
    "SpoutKind", "State", "StateDecodeError", "StateError", "StateFactory", "StateNoRunError", "StateOrderError",
    "StatePairError", "StatePartitionError", "StateRunError", "StateSecondWriteError", "TxBatch", "ValueUpdater",
    "Versioned", "as_keys", "check_pair", "tx_batch",
]

#: A map key: the tuple of the group-by values (JSON-encodable scalars).
Key = tuple[Hashable, ...]
V = TypeVar("V")
#: Trident's ValueUpdater: the stored value (None when there is none) -> the new value.
ValueUpdater = Callable[[Any], Any]


class StateError(SpoutError):
    """A state could not be read or written (the message names the key, the store, and what to do)."""


class StateDecodeError(StateError):
    """A stored value could not be decoded: it was written by another program, another serializer or a newer
    format version. The message names the key."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class StateOrderError(StateError):
    """A batch's txid is lower than the txid already stored for a key: updates would be applied out of order."""


class StateRunError(StateError):
    """A key holds a txid written by another run (another readStream query, or a query restarted without its
    checkpoint location; another pipeline): equal txids of two runs are not a replay, so it is refused."""


class StateNoRunError(StateRunError, ConfigError):
    """A batch of a transactional or opaque map of this package with no run identity (a bare txid outside a
    streaming query, a TxBatch without ``run``): its txids could not be told from another run's, so the
    operations refuse it before anything is read or written. The message says how to name the run."""


class StatePartitionError(StateError):
    """Two partitions of one write updated the same key of a TransactionalMap, which cannot replay that safely
    (see :class:`~kinesis_spout.state.maps.TransactionalMap`)."""


class StateSecondWriteError(StateError, ConfigError):
    """A second operation call of one batch attempt on one state namespace: the maps would take it for a replay of
    the first call's write (and skip or recompute keys both update), so it is refused before it writes anything."""


class StatePairError(StateError, ConfigError):
    """A map type that cannot be exactly-once with the batch's spout kind (e.g. a TransactionalMap fed by an
    opaque spout): refused instead of silently counting some records twice."""


class SpoutKind(str, enum.Enum):
    """What a spout promises about a replayed txid (see the module docstring)."""

    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"
    NON_TRANSACTIONAL = "non-transactional"


class MapKind(str, enum.Enum):
    """The kind of a map state, which decides the spouts it is exactly-once with."""

    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"
    NON_TRANSACTIONAL = "non-transactional"


#: Trident's table: the spout kinds with which each map kind is exactly-once.
EXACTLY_ONCE: dict[MapKind, frozenset[SpoutKind]] = {
    MapKind.TRANSACTIONAL: frozenset({SpoutKind.TRANSACTIONAL}),
    MapKind.OPAQUE: frozenset({SpoutKind.TRANSACTIONAL, SpoutKind.OPAQUE}),
    MapKind.NON_TRANSACTIONAL: frozenset(),
}


@dataclass(frozen=True)
class TxBatch:
    """A batch as the state operations see it: its txid, its spout's kind, and the run it belongs to.

    ``run`` identifies the sequence of txids the batch belongs to (a readStream query's id, a pipeline's run id):
    a stored txid equal to the batch's is a replay only when it was written by the same run. None: no run is
    known, and the txid alone decides (as for values stored without a run); the Spark operations refuse such a
    batch over a transactional or opaque map (StateNoRunError): name the run of your own loop here.
    """

    txid: int
    kind: SpoutKind
    run: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.txid, bool) or not isinstance(self.txid, int) or self.txid < 0:
            raise ConfigError(f"a txid must be a whole number >= 0, got {self.txid!r}")
        if not isinstance(self.kind, SpoutKind):
            raise ConfigError(f"kind must be a SpoutKind, got {self.kind!r}")
        if self.run is not None and (not isinstance(self.run, str) or not self.run):
            raise ConfigError(f"run must be a non-empty string or None, got {self.run!r}")


def tx_batch(batch: Any) -> TxBatch:
    """The txid and spout kind of what a pipeline hands to its batch function.

    - an ``int`` is the ``batch_id`` of ``foreachBatch`` on the ``readStream`` source: Spark replays a batch
      with the same id and the source reads exactly the same records again, so it is *transactional*;
    - an object with ``id`` and ``kind`` (the :class:`~kinesis_spout.spark.SpoutPipeline` batch in
      exactly-once mode, or a :class:`TxBatch`) is what its ``kind`` says;
    - an object with an ``id`` but no ``kind`` (a ``SpoutPipeline`` batch in its default at-least-once mode:
      records of a failed batch come back under a new id) is *non-transactional*.

    The run is a batch object's ``run_id`` (a non-empty string; optional, None when it has none). For an ``int``
    the operations find the run themselves: the id of the streaming query that called ``foreachBatch``.
    """
    if isinstance(batch, TxBatch):
        return batch
    if isinstance(batch, bool):
        raise ConfigError(f"batch must be a foreachBatch batch_id or a pipeline batch, got {batch!r}")
    if isinstance(batch, int):
        return TxBatch(batch, SpoutKind.TRANSACTIONAL)
    txid = getattr(batch, "txid", getattr(batch, "id", None))
    if not isinstance(txid, int):
        raise ConfigError(f"batch must be a foreachBatch batch_id (int) or a pipeline batch with an int id, "
                          f"got {type(batch).__name__}")
    kind = getattr(batch, "kind", None)
    run = getattr(batch, "run_id", None)
    if kind is None:
        return TxBatch(txid, SpoutKind.NON_TRANSACTIONAL, run)
    return TxBatch(txid, SpoutKind(kind), run)


def as_keys(keys: Sequence[Any]) -> list[Key]:
    """``keys`` as group keys: tuples as they are, lists (Storm's ``List<Object>`` keys) as the tuples of their
    values. Called by the map states and the LRU cache at each multi_get/multi_update/multi_put; anything else (a
    bare string or number, a key holding a list) raises TypeError naming the key and saying to pass tuples."""
    out: list[Key] = []
    for key in keys:
        if isinstance(key, list):
            key = tuple(key)
        if isinstance(key, tuple):
            try:
                hash(key)
            except TypeError:
                pass
            else:
                out.append(key)
                continue
        raise TypeError(f"a state key must be a tuple of the group-by values (scalars), e.g. ('a',) or ('a', 1); a "
                        f"list such as ['a', 1] is taken as that tuple. Got {key!r}: pass a tuple of scalars")
    return out


def check_pair(map_kind: MapKind, spout_kind: SpoutKind) -> None:
    """Refuse a map that would not be exactly-once with the spout (StatePairError); non-transactional maps are
    at-least-once by design and accepted with any spout. Called on the driver before any state is touched."""
    if map_kind is MapKind.NON_TRANSACTIONAL or spout_kind in EXACTLY_ONCE[map_kind]:
        return
    if map_kind is MapKind.TRANSACTIONAL and spout_kind is SpoutKind.OPAQUE:
        fix = ("an opaque spout may replay a txid with other records, which a TransactionalMap would skip or "
               "count twice; use an OpaqueMap")
    else:
        fix = (f"a {spout_kind.value} spout gives replayed records new txids, so no state can be exactly-once with "
               f"it; run SpoutPipeline with exactly_once=True, use the readStream source, or use a "
               f"NonTransactionalMap (at-least-once)")
    raise StatePairError(f"a {map_kind.value} map is not exactly-once with a {spout_kind.value} spout: {fix}")


@runtime_checkable
class State(Protocol):
    """Trident's State: told when a batch's updates begin and when they are committed."""

    def begin_commit(self, txid: int) -> None: ...

    def commit(self, txid: int) -> None: ...


class StateFactory(Protocol):
    """Makes the state of one partition. Must be picklable: it travels to Spark's executors, so it holds
    configuration (URLs, names), never an open client."""

    @property
    def kind(self) -> MapKind: ...

    def make_state(self, partition_index: int, num_partitions: int) -> "MapState": ...


class MapState(State, Protocol):
    """Trident's MapState: a map from group keys to values, updated per txid."""

    def multi_get(self, keys: Sequence[Key]) -> list[Any]: ...

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]: ...

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None: ...


class Snapshottable(State, Protocol):
    """A single global value (Trident's Snapshottable), e.g. a global count."""

    def get(self) -> Any: ...

    def update(self, updater: ValueUpdater) -> Any: ...

    def set(self, value: Any) -> None: ...


@runtime_checkable
class BackingMap(Protocol):
    """Trident's IBackingMap: bulk reads and writes of stored values (None for a key without one). All a
    key/value database needs to implement; the map states add the txid logic on top. ``close()`` is idempotent."""

    def multi_get(self, keys: Sequence[Key]) -> list[Any]: ...

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Versioned:
    """A stored value with the token a conditional write compares against (None: no value stored)."""

    value: Any
    token: Any


@runtime_checkable
class ConditionalBackingMap(BackingMap, Protocol):
    """A backing map that can write a key only if it was not changed since it was read (compare-and-set), so
    that concurrent writers of one key never lose each other's updates. The map states use it when offered."""

    def multi_get_versioned(self, keys: Sequence[Key]) -> list[Versioned]: ...

    def multi_put_if(self, keys: Sequence[Key], values: Sequence[Any], tokens: Sequence[Any]) -> list[bool]: ...


class BackingMapFactory(Protocol):
    """Makes a backing map in the process that uses it (picklable: configuration only)."""

    def make_backing_map(self) -> BackingMap: ...
