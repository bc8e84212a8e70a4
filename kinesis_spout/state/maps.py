"""The map states: Trident's TransactionalMap, OpaqueMap, NonTransactionalMap and SnapshottableMap.

Each wraps a :class:`~kinesis_spout.state.base.BackingMap` and adds what it stores beside each value:

- :class:`TransactionalMap` stores ``TransactionalValue(txid, val)``: a key whose stored txid is the batch's own
  was already updated by this batch and is left alone (exactly-once with a transactional spout only);
- :class:`OpaqueMap` stores ``OpaqueValue(txid, curr, prev)``: a replay of the stored txid recomputes from
  ``prev`` (exactly-once with transactional and opaque spouts);
- :class:`NonTransactionalMap` stores the value alone: a replayed batch is applied again (at-least-once).

A stored txid higher than the batch's is refused (:class:`~kinesis_spout.state.base.StateOrderError`): updates
must come in txid order. When the backing map offers compare-and-set
(:class:`~kinesis_spout.state.base.ConditionalBackingMap`), an update is one bulk read and one bulk conditional
write; keys another writer changed in between are read and recomputed again, so concurrent writers of one key
never lose each other's updates (writers that keep colliding pause a random moment, up to 50 ms, between
rounds). Without it, one bulk read and one bulk write (one writer per key, as Trident assumes). A map state
belongs to one thread (one Spark task); ``close()`` closes its backing map. Pure logic apart from that pause:
the I/O is the backing map's.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from kinesis_spout.errors import SpoutStateError
from kinesis_spout.state.base import (
    BackingMap,
    BackingMapFactory,
    ConditionalBackingMap,
    Key,
    MapKind,
    StateError,
    StateOrderError,
    ValueUpdater,
)
from kinesis_spout.state.values import OpaqueValue, TransactionalValue

__all__ = ["MapFactory", "NonTransactionalMap", "OpaqueMap", "SnapshottableMap", "TransactionalMap"]

_CONFLICT_ROUNDS = 50
_CONFLICT_BACKOFF_MAX_S = 0.05
_SKIP = object()  # "no write needed": the key already holds this batch's update


class _TxMap:
    """The part the three map kinds share: txid bookkeeping and the bulk read-compute-write loop."""

    kind: ClassVar[MapKind]

    def __init__(self, backing: BackingMap) -> None:
        if not isinstance(backing, BackingMap):
            raise TypeError(f"backing must be a BackingMap (multi_get, multi_put, close), got {backing!r}")
        self.backing = backing
        self._txid: int | None = None

    @classmethod
    def factory(cls, backing: BackingMapFactory, *, cache_size: int | None = None) -> "MapFactory":
        """A picklable state factory for the Spark operations: this map kind over ``backing``'s maps, with an
        LRU cache of ``cache_size`` entries in front when given (see CachedMap for when that is safe)."""
        return MapFactory(cls.kind, backing, cache_size)

    # -- State ------------------------------------------------------------------------------------------------
    def begin_commit(self, txid: int) -> None:
        """Start the updates of batch ``txid``. Called once per batch, before multi_update/multi_put."""
        if isinstance(txid, bool) or not isinstance(txid, int) or txid < 0:
            raise ValueError(f"txid must be a whole number >= 0, got {txid!r}")
        self._txid = txid

    def commit(self, txid: int) -> None:
        """End batch ``txid``'s updates (they were written as they were made)."""
        if txid != self._txid:
            raise SpoutStateError(f"commit({txid}) does not match begin_commit({self._txid})")
        self._txid = None

    def close(self) -> None:
        self.backing.close()

    def _current(self) -> int:
        if self._txid is None:
            raise SpoutStateError(f"{type(self).__name__}: call begin_commit(txid) before updating")
        return self._txid

    # -- MapState ---------------------------------------------------------------------------------------------
    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """The current values of ``keys`` (None where there is none), one bulk read."""
        return [self._value_of(k, s) for k, s in zip(keys, self.backing.multi_get(keys))]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        """Apply ``updaters[i]`` to the value of ``keys[i]`` for the current txid; return the new values."""
        if len(keys) != len(updaters):
            raise ValueError(f"{len(keys)} keys but {len(updaters)} updaters")
        if len(set(keys)) != len(keys):
            raise ValueError("multi_update got a key twice; combine its updates first")
        txid = self._current()
        results: list[Any] = [None] * len(keys)
        backing = self.backing
        if not isinstance(backing, ConditionalBackingMap):
            writes: list[tuple[Key, Any]] = []
            for i, stored in enumerate(backing.multi_get(keys)):
                new, results[i] = self._next(keys[i], stored, updaters[i], txid)
                if new is not _SKIP:
                    writes.append((keys[i], new))
            if writes:
                backing.multi_put([k for k, _ in writes], [v for _, v in writes])
            return results
        pending = list(range(len(keys)))
        rounds = 0
        for _ in range(_CONFLICT_ROUNDS):
            got = backing.multi_get_versioned([keys[i] for i in pending])
            todo: list[tuple[int, Any, Any]] = []
            for i, stored in zip(pending, got):
                new, results[i] = self._next(keys[i], stored.value, updaters[i], txid)
                if new is not _SKIP:
                    todo.append((i, new, stored.token))
            if not todo:
                return results
            written = backing.multi_put_if([keys[i] for i, _, _ in todo], [n for _, n, _ in todo],
                                           [t for _, _, t in todo])
            pending = [i for (i, _, _), ok in zip(todo, written) if not ok]
            if not pending:
                return results
            rounds += 1
            # writers that keep colliding on the same keys take turns: a random pause, doubling up to 50 ms
            time.sleep(random.uniform(0, min(_CONFLICT_BACKOFF_MAX_S, 0.001 * 2 ** rounds)))
        raise StateError(f"{len(pending)} keys (e.g. {keys[pending[0]]!r}) kept changing under concurrent writers "
                         f"for {_CONFLICT_ROUNDS} rounds; the batch is failed and will be replayed", retriable=True)

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """Set ``keys`` to ``values`` for the current txid (Trident's multiPut)."""
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        self.multi_update(keys, [_Const(v) for v in values])

    # -- per kind ---------------------------------------------------------------------------------------------
    def _next(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        """(what to store or _SKIP, the key's new value)."""
        raise NotImplementedError

    def _value_of(self, key: Key, stored: Any) -> Any:
        raise NotImplementedError

    def _wrong(self, key: Key, stored: Any) -> StateError:
        what = {TransactionalValue: "a TransactionalMap", OpaqueValue: "an OpaqueMap"}.get(type(stored),
                                                                                          "a NonTransactionalMap")
        return StateError(f"key {key!r} holds a value written by {what} ({stored!r}), not by a "
                          f"{type(self).__name__}; give each map its own namespace")

    def _order(self, key: Key, stored_txid: int, txid: int) -> StateOrderError:
        return StateOrderError(
            f"key {key!r} was last updated by batch {stored_txid}, after this batch ({txid}): updates must come in "
            f"txid order. Another pipeline may share this namespace, or a query was restarted without its "
            f"checkpoint location (its batch ids started again); use a new namespace for a new query")


class _Const:
    """An updater that sets a value (multi_put through the update path)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _stored: Any) -> Any:
        return self.value


class TransactionalMap(_TxMap):
    """Stores ``(txid, value)``; a key already updated by the current txid is skipped (Trident's
    TransactionalMap). Exactly-once only with a transactional spout."""

    kind = MapKind.TRANSACTIONAL

    def _next(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        if stored is None:
            val = updater(None)
            return TransactionalValue(txid, val), val
        if not isinstance(stored, TransactionalValue):
            raise self._wrong(key, stored)
        if stored.txid == txid:
            return _SKIP, stored.val
        if stored.txid > txid:
            raise self._order(key, stored.txid, txid)
        val = updater(stored.val)
        return TransactionalValue(txid, val), val

    def _value_of(self, key: Key, stored: Any) -> Any:
        if stored is None:
            return None
        if not isinstance(stored, TransactionalValue):
            raise self._wrong(key, stored)
        return stored.val


class OpaqueMap(_TxMap):
    """Stores ``(txid, curr, prev)``; a replay of the stored txid recomputes from ``prev`` (Trident's OpaqueMap).
    Exactly-once with transactional and opaque spouts.

    What the opaque spout must promise when a state write can be cut short (a crash after some keys of a batch
    were written): a replay of a txid holds every record of its earlier attempts, and may hold more (Trident's
    opaque Kafka spout re-reads a txid from where the txid before it ended). A replay that left a record out
    would leave keys only that record touched at the earlier attempt's value, and the later txid that processes
    the record would count it again.
    """

    kind = MapKind.OPAQUE

    def _next(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        if stored is None:
            new = OpaqueValue(txid, updater(None), None)
            return new, new.curr
        if not isinstance(stored, OpaqueValue):
            raise self._wrong(key, stored)
        if stored.txid > txid:
            raise self._order(key, stored.txid, txid)
        new = stored.update(txid, updater)
        if new == stored:
            return _SKIP, new.curr
        return new, new.curr

    def _value_of(self, key: Key, stored: Any) -> Any:
        if stored is None:
            return None
        if not isinstance(stored, OpaqueValue):
            raise self._wrong(key, stored)
        return stored.curr


class NonTransactionalMap(_TxMap):
    """Stores the value alone: a replayed batch is applied again. At-least-once, with any spout."""

    kind = MapKind.NON_TRANSACTIONAL

    def _next(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        if isinstance(stored, (TransactionalValue, OpaqueValue)):
            raise self._wrong(key, stored)
        val = updater(stored)
        return val, val

    def _value_of(self, key: Key, stored: Any) -> Any:
        if isinstance(stored, (TransactionalValue, OpaqueValue)):
            raise self._wrong(key, stored)
        return stored


class SnapshottableMap:
    """One global value (Trident's Snapshottable) kept under a fixed key of a map state, e.g. a global count."""

    def __init__(self, state: _TxMap, key: Key = ("$global",)) -> None:
        self.state = state
        self.key = key

    def begin_commit(self, txid: int) -> None:
        self.state.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.state.commit(txid)

    def get(self) -> Any:
        return self.state.multi_get([self.key])[0]

    def update(self, updater: ValueUpdater) -> Any:
        return self.state.multi_update([self.key], [updater])[0]

    def set(self, value: Any) -> None:
        self.state.multi_put([self.key], [value])

    def close(self) -> None:
        self.state.close()


_KINDS: dict[MapKind, type[_TxMap]] = {
    MapKind.TRANSACTIONAL: TransactionalMap,
    MapKind.OPAQUE: OpaqueMap,
    MapKind.NON_TRANSACTIONAL: NonTransactionalMap,
}


@dataclass(frozen=True)
class MapFactory:
    """A picklable StateFactory: makes a map of ``kind`` over a backing map made where it is used (executors)."""

    kind: MapKind
    backing: BackingMapFactory
    cache_size: int | None = None

    def __post_init__(self) -> None:
        if not callable(getattr(self.backing, "make_backing_map", None)):
            raise TypeError(f"backing must be a backing map factory (e.g. RedisBackingMap.factory(url, "
                            f"namespace=...)), got {self.backing!r}")
        if self.cache_size is not None and (isinstance(self.cache_size, bool) or not isinstance(self.cache_size, int)
                                            or self.cache_size < 1):
            raise ValueError(f"cache_size must be a whole number >= 1 or None, got {self.cache_size!r}")

    def make_state(self, partition_index: int = 0, num_partitions: int = 1) -> _TxMap:
        """A new map state with its own backing map (closed by the state's close())."""
        from kinesis_spout.state.cached import CachedMap

        backing = self.backing.make_backing_map()
        if self.cache_size is not None:
            backing = CachedMap(backing, self.cache_size)
        return _KINDS[self.kind](backing)
