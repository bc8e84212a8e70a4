"""The map states: Trident's TransactionalMap, OpaqueMap, NonTransactionalMap and SnapshottableMap.

Each wraps a :class:`~kinesis_spout.state.base.BackingMap` and adds what it stores beside each value:

- :class:`TransactionalMap` stores ``TransactionalValue(txid, val)``: a key whose stored txid is the batch's own
  was already updated by this batch and is left alone (exactly-once with a transactional spout only);
- :class:`OpaqueMap` stores ``OpaqueValue(txid, curr, prev)``: a replay of the stored txid recomputes from
  ``prev`` (exactly-once with transactional and opaque spouts);
- :class:`NonTransactionalMap` stores the value alone: a replayed batch is applied again (at-least-once).

**Every update of the current batch counts.** Between ``begin_commit(txid)`` and ``commit(txid)`` a map state
accumulates: a key updated several times in one batch (by several ``multi_update`` calls, e.g. a StateUpdater
that updates row by row, or twice in one call) gets each update applied in order, as in Trident. The key's stored
value is read once, when the batch first touches it, and the updates are written at ``commit()``, one bulk write
for all the batch's keys: a state whose task dies before ``commit()`` has written nothing, and a key's write holds
all of this state's updates of it. A new map state for the same txid (a retried Spark task, a replayed batch)
that finds the batch's txid stored under a key it has not touched takes it for a replay of those updates: the
TransactionalMap keeps the key as it is (and ignores its updates of it in this batch), the OpaqueMap recomputes
them from ``prev``.

**Who wrote a txid.** A stored txid is taken for a replay only when it was written by the same run: the
operations pass the batch's run (a readStream query's id, a pipeline's ``run_id``) to ``begin_commit``, and it is
stored with each txid. A key holding a txid of another run is refused with
:class:`~kinesis_spout.state.base.StateRunError` (a query restarted without its checkpoint location, or a second
pipeline on the namespace, numbers its batches again). When the batch or the stored value has no run (values
written before runs were stored, maps used directly), the txid alone decides; a write with a run stores it, and a
write without one keeps the run the key holds (so that it goes on refusing other runs). Before a batch's Spark
job the operations also check the namespace's run on the driver (:meth:`MapFactory.claim_run`), so that a refused
batch writes none of its keys. A stored txid higher than the batch's is refused
(:class:`~kinesis_spout.state.base.StateOrderError`).

**Keys two partitions update.** The operations also pass the write (one operation call) and the partition number.
When another partition of the same write already wrote the batch's updates of a key, the OpaqueMap adds this
partition's on top, so a key's rows may sit in several partitions; a later write of the same txid is a replay and
recomputes from ``prev``. A retried task of a partition whose updates a key holds recomputes them from ``prev``
when the key holds that partition's updates alone, and otherwise skips the key (it cannot tell its own updates
from the other partitions'): see OpaqueMap for what that asks of the spout. The TransactionalMap cannot replay
such a key safely (a replay could not tell which partitions' updates it holds), so the second partition is refused
with :class:`~kinesis_spout.state.base.StatePartitionError`: partition by the key.

**Writes are ordered.** The operations make each write's id from the driver's clock
(:func:`new_call_id`), so a write started later has a higher id. A task of an earlier write of the txid (a task of
an attempt Spark aborted, still running when the batch's replay began) that finds a newer write of the same txid
and run under a key is refused with a retriable StateError instead of taking the newer write for one to replay:
it would recompute the key from ``prev`` and undo the newer write's updates. This assumes the clocks of the
drivers writing one namespace (a driver and the one that replaces it) do not run backwards by more than the time
between two attempts of a batch; ids not made by new_call_id (a user's own) are not ordered and never refused.

When the backing map offers compare-and-set (:class:`~kinesis_spout.state.base.ConditionalBackingMap`), the
commit's write is conditional; keys another writer changed since they were read are read again and their updates
recomputed (the updaters run again, so they must be pure functions of the stored value), so concurrent writers of
one key never lose each other's updates (writers that keep colliding pause a random moment, up to 50 ms, between
rounds). Without it, one bulk write (one writer per key, as Trident assumes: partition_persist without
partition_by, whose partitions may share keys, is refused over such a map). A map state belongs to one thread (one
Spark task); ``close()`` closes its backing map and drops updates not committed. Pure logic apart from that pause:
the I/O is the backing map's.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field, fields, replace
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
    StatePartitionError,
    StateRunError,
    ValueUpdater,
)
from kinesis_spout.state.values import OpaqueValue, TransactionalValue

__all__ = ["MapFactory", "NonTransactionalMap", "OpaqueMap", "SnapshottableMap", "TransactionalMap"]

_CONFLICT_ROUNDS = 50
_CONFLICT_BACKOFF_MAX_S = 0.05
_SKIP = object()  # "no write needed": the key already holds this batch's updates
_RUN_KEY: Key = ()  # where a namespace keeps the run that owns it (group keys are never empty)


@dataclass
class _Pending:
    """A key touched by the current batch: what was read, the batch's updates, and what to write at commit."""

    stored: Any
    token: Any
    chain: list[ValueUpdater] = field(default_factory=list)
    new: Any = _SKIP
    value: Any = None


class _TxMap:
    """The part the three map kinds share: the batch's pending updates, the bulk read and the commit's write.

    State (owned by the one thread that uses the map): the current txid, run and writer, and ``_pending``, the
    keys the batch touched (cleared by begin_commit, written and cleared by commit)."""

    kind: ClassVar[MapKind]

    def __init__(self, backing: BackingMap) -> None:
        if not isinstance(backing, BackingMap):
            raise TypeError(f"backing must be a BackingMap (multi_get, multi_put, close), got {backing!r}")
        self.backing = backing
        self._txid: int | None = None
        self._run: str | None = None
        self._call: str | None = None
        self._part = 0
        self._pending: dict[Key, _Pending] = {}

    @classmethod
    def factory(cls, backing: BackingMapFactory, *, cache_size: int | None = None) -> "MapFactory":
        """A picklable state factory for the Spark operations: this map kind over ``backing``'s maps, with an
        LRU cache of ``cache_size`` entries in front when given (see CachedMap for when that is safe)."""
        return MapFactory(cls.kind, backing, cache_size)

    # -- State ------------------------------------------------------------------------------------------------
    def begin_commit(self, txid: int, *, run: str | None = None, writer: tuple[str, int] | None = None) -> None:
        """Start the updates of batch ``txid`` of ``run`` (None: no run known), dropping any not committed.

        Called once per batch, before multi_update/multi_put: by the operations (with ``run`` and ``writer``, the
        id of the operation call and this state's partition number) or by a user's own code."""
        if isinstance(txid, bool) or not isinstance(txid, int) or txid < 0:
            raise ValueError(f"txid must be a whole number >= 0, got {txid!r}")
        if run is not None and (not isinstance(run, str) or not run):
            raise ValueError(f"run must be a non-empty string or None, got {run!r}")
        if writer is not None and (not isinstance(writer, tuple) or len(writer) != 2
                                   or not isinstance(writer[0], str) or not isinstance(writer[1], int)):
            raise ValueError(f"writer must be a (call id, partition number) pair or None, got {writer!r}")
        self._txid, self._run = txid, run
        self._call, self._part = writer if writer is not None else (None, 0)
        self._pending = {}

    def commit(self, txid: int) -> None:
        """Write the batch's updates (one bulk write; see the module docstring) and end batch ``txid``."""
        if txid != self._txid:
            raise SpoutStateError(f"commit({txid}) does not match begin_commit({self._txid})")
        self._write(txid)
        self._pending = {}
        self._txid = None

    def close(self) -> None:
        """Close the backing map; updates not committed are dropped. Idempotent."""
        self._pending = {}
        self.backing.close()

    def _current(self) -> int:
        if self._txid is None:
            raise SpoutStateError(f"{type(self).__name__}: call begin_commit(txid) before updating")
        return self._txid

    # -- MapState ---------------------------------------------------------------------------------------------
    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        """The current values of ``keys`` (None where there is none; the batch's own where it updated them),
        one bulk read of the others."""
        out: list[Any] = [None] * len(keys)
        missing = [i for i, k in enumerate(keys) if k not in self._pending]
        for i, k in enumerate(keys):
            if k in self._pending:
                out[i] = self._pending[k].value
        if missing:
            got = self.backing.multi_get([keys[i] for i in missing])
            for i, stored in zip(missing, got):
                out[i] = self._value_of(keys[i], stored)
        return out

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater]) -> list[Any]:
        """Apply ``updaters[i]`` to the value of ``keys[i]`` for the current txid, in order (a key given twice
        gets both); return the new values. Keys the batch has not touched yet are read in one bulk read; nothing
        is written before commit()."""
        if len(keys) != len(updaters):
            raise ValueError(f"{len(keys)} keys but {len(updaters)} updaters")
        txid = self._current()
        fresh = list(dict.fromkeys(k for k in keys if k not in self._pending))
        if fresh:
            backing = self.backing
            if isinstance(backing, ConditionalBackingMap):
                read = [(v.value, v.token) for v in backing.multi_get_versioned(fresh)]
            else:
                read = [(v, None) for v in backing.multi_get(fresh)]
            for key, (stored, _token) in zip(fresh, read):
                self._check(key, stored, txid)
            for key, (stored, token) in zip(fresh, read):
                self._pending[key] = _Pending(stored, token)
        results: list[Any] = []
        for key, updater in zip(keys, updaters):
            pending = self._pending[key]
            pending.chain.append(updater)
            if len(pending.chain) == 1:
                pending.new, pending.value = self._first(key, pending.stored, updater, txid)
            elif pending.new is not _SKIP:
                pending.new, pending.value = self._more(pending.new, updater)
            results.append(pending.value)
        return results

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """Set ``keys`` to ``values`` for the current txid (Trident's multiPut): an update like any other."""
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        self.multi_update(keys, [_Const(v) for v in values])

    # -- the commit's write -----------------------------------------------------------------------------------
    def _write(self, txid: int) -> None:
        todo = [k for k in self._pending if self._writes(k)]
        if not todo:
            return
        backing = self.backing
        if not isinstance(backing, ConditionalBackingMap):
            backing.multi_put(todo, [self._pending[k].new for k in todo])
            return
        for rounds in range(1, _CONFLICT_ROUNDS + 1):
            written = backing.multi_put_if(todo, [self._pending[k].new for k in todo],
                                           [self._pending[k].token for k in todo])
            lost = [k for k, ok in zip(todo, written) if not ok]
            if not lost:
                return
            # another writer changed these keys since they were read: read them again, recompute the batch's updates
            for key, got in zip(lost, backing.multi_get_versioned(lost)):
                self._check(key, got.value, txid)
                pending = self._pending[key]
                pending.stored, pending.token = got.value, got.token
                pending.new, pending.value = self._first(key, got.value, pending.chain[0], txid)
                for updater in pending.chain[1:]:
                    if pending.new is _SKIP:
                        break
                    pending.new, pending.value = self._more(pending.new, updater)
            todo = [k for k in lost if self._writes(k)]
            if not todo:
                return
            # writers that keep colliding on the same keys take turns: a random pause, doubling up to 50 ms
            time.sleep(random.uniform(0, min(_CONFLICT_BACKOFF_MAX_S, 0.001 * 2 ** rounds)))
        raise StateError(f"{len(todo)} keys (e.g. {todo[0]!r}) kept changing under concurrent writers for "
                         f"{_CONFLICT_ROUNDS} rounds; the batch is failed and will be replayed", retriable=True)

    def _writes(self, key: Key) -> bool:
        """Whether the commit must write ``key`` (not when the key already holds what the batch would store)."""
        pending = self._pending[key]
        return pending.new is not _SKIP and not _identical(pending.new, pending.stored)

    # -- per kind ---------------------------------------------------------------------------------------------
    def _check(self, key: Key, stored: Any, txid: int) -> None:
        """Refuse a stored value this batch must not update: another map kind's, another run's, a later txid's."""

    def _first(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        """The batch's first update of ``key``: (what to store or _SKIP, the key's new value)."""
        raise NotImplementedError

    def _more(self, new: Any, updater: ValueUpdater) -> tuple[Any, Any]:
        """A further update of a key in the same batch, on top of what its earlier ones will store."""
        raise NotImplementedError

    def _value_of(self, key: Key, stored: Any) -> Any:
        raise NotImplementedError

    def _parts(self, stored: Any) -> tuple[int, ...]:
        """The partitions of this write whose updates ``stored`` holds once this state's are added."""
        if self._call is None:
            return ()
        before = stored.parts if stored is not None and stored.call == self._call else ()
        return tuple(sorted({*before, self._part}))

    def _run_for(self, stored: Any) -> str | None:
        """The run to store with the batch's write: the batch's, or the one the key holds when the batch has none."""
        if self._run is not None or stored is None:
            return self._run
        kept: str | None = stored.run
        return kept

    def _same_write(self, stored: Any) -> bool:
        return self._call is not None and stored.call == self._call

    def _check_tx(self, key: Key, stored: Any, txid: int, cls: type[TransactionalValue] | type[OpaqueValue]
                  ) -> None:
        if stored is None:
            return
        if not isinstance(stored, cls):
            raise self._wrong(key, stored)
        if self._run is not None and stored.run is not None and stored.run != self._run:
            raise StateRunError(
                f"key {key!r} holds batch {stored.txid} of run {stored.run!r}, and this is batch {txid} of run "
                f"{self._run!r}: two runs number their batches independently, so equal txids of two runs are no "
                f"replay and the update is refused (this state writes nothing of the batch). A readStream query "
                f"restarted without its checkpointLocation gets a new query id and starts its batch ids at 0 again: "
                f"restart it with its original checkpointLocation. To count afresh in a new run, give it a new "
                f"state namespace (namespace= of the backing map factory). Two queries or pipelines must not share "
                f"one namespace.")
        if stored.txid > txid:
            raise self._order(key, stored.txid, txid)
        if stored.txid == txid and _newer(stored.call, self._call):
            raise StateError(
                f"key {key!r} holds a newer write of batch {txid} (write {stored.call}) than this task's (write "
                f"{self._call}): this task belongs to an earlier attempt of the batch, replaced by the one that wrote "
                f"the key; its updates are refused so as not to undo the newer write. Spark retries or drops the "
                f"task; if this keeps happening, the drivers writing the namespace disagree on the time",
                retriable=True)

    def _wrong(self, key: Key, stored: Any) -> StateError:
        what = {TransactionalValue: "a TransactionalMap", OpaqueValue: "an OpaqueMap"}.get(type(stored),
                                                                                          "a NonTransactionalMap")
        return StateError(f"key {key!r} holds a value written by {what} ({stored!r}), not by a "
                          f"{type(self).__name__}; give each map its own namespace")

    def _order(self, key: Key, stored_txid: int, txid: int) -> StateOrderError:
        return StateOrderError(
            f"key {key!r} was last updated by batch {stored_txid}, after this batch ({txid}): updates must come in "
            f"txid order. Another pipeline may share this namespace, or a query was restarted without its "
            f"checkpoint location (its batch ids started again): restart it with its checkpointLocation, or use a "
            f"new namespace for a new query")


_CALL_LOCK = threading.Lock()
_last_call_ns = 0  # the clock part of the last write id made in this process (guarded by _CALL_LOCK)


def new_call_id() -> str:
    """A new write id: the driver's clock in nanoseconds (16 hex digits, strictly increasing in this process, so
    that later writes' ids sort after earlier ones) and a random part. Called on the driver, once per operation
    call; any thread (the counter is guarded by a lock)."""
    global _last_call_ns
    with _CALL_LOCK:
        _last_call_ns = max(time.time_ns(), _last_call_ns + 1)
        ns = _last_call_ns
    return f"{ns:016x}.{uuid.uuid4().hex[:8]}"


def _call_time(call: str | None) -> int | None:
    """The clock part of a write id made by new_call_id (None for other ids: those of a user, or older ones)."""
    if call is None or len(call) != 25 or call[16] != ".":
        return None
    try:
        return int(call[:16], 16)
    except ValueError:
        return None


def _newer(stored_call: str | None, call: str | None) -> bool:
    """Whether the write ``stored_call`` was started after the write ``call`` (both ids of new_call_id)."""
    stored_ns, ns = _call_time(stored_call), _call_time(call)
    return stored_ns is not None and ns is not None and stored_ns > ns


def _identical(new: Any, stored: Any) -> bool:
    """Whether ``new`` is what is stored, bookkeeping (run, write, partitions) included: value equality leaves
    the bookkeeping out, and a write that changes only it must still be made."""
    if type(new) is not type(stored):
        return False
    if isinstance(new, (TransactionalValue, OpaqueValue)):
        return all(getattr(new, f.name) == getattr(stored, f.name) for f in fields(new))
    return bool(new == stored)


class _Const:
    """An updater that sets a value (multi_put through the update path)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _stored: Any) -> Any:
        return self.value


class TransactionalMap(_TxMap):
    """Stores ``(txid, value)`` (Trident's TransactionalMap); every update of the current txid counts, and a key
    already holding the current txid, written by this run but not by this state, is a replay and left as it is.
    Exactly-once only with a transactional spout, when each key's updates of a batch come from one partition
    (refused otherwise: StatePartitionError)."""

    kind = MapKind.TRANSACTIONAL

    def _check(self, key: Key, stored: Any, txid: int) -> None:
        self._check_tx(key, stored, txid, TransactionalValue)

    def _first(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        if stored is None:
            val = updater(None)
            return TransactionalValue(txid, val, self._run, self._call, self._parts(None)), val
        if stored.txid == txid:
            if self._same_write(stored) and self._part not in stored.parts:
                parts = ", ".join(str(p) for p in stored.parts)
                raise StatePartitionError(
                    f"key {key!r} was updated by partitions {parts} and {self._part} of one write of batch {txid}: a "
                    f"TransactionalMap cannot replay a batch whose updates of a key are spread over partitions (a "
                    f"replay could not tell which partitions' updates the key holds). Partition the rows by the key "
                    f"(partition_persist(..., partition_by=[the key columns]) with an updater that updates only "
                    f"keys of those columns), or use an OpaqueMap, which recomputes such keys. The batch is failed; "
                    f"the other partitions' updates of the key are written: use a new namespace, or an OpaqueMap "
                    f"to replay it")
            return _SKIP, stored.val
        val = updater(stored.val)
        return TransactionalValue(txid, val, self._run_for(stored), self._call, self._parts(None)), val

    def _more(self, new: Any, updater: ValueUpdater) -> tuple[Any, Any]:
        val = updater(new.val)
        return replace(new, val=val), val

    def _value_of(self, key: Key, stored: Any) -> Any:
        if stored is None:
            return None
        if not isinstance(stored, TransactionalValue):
            raise self._wrong(key, stored)
        return stored.val


class OpaqueMap(_TxMap):
    """Stores ``(txid, curr, prev)`` (Trident's OpaqueMap); every update of the current txid counts, and a key
    already holding the current txid, written by this run but not by this write, is a replay: its updates are
    recomputed from ``prev``. Exactly-once with transactional and opaque spouts, a key's rows in one partition or
    several.

    What the opaque spout must promise when a state write can be cut short (a crash after some keys of a batch
    were written): a replay of a txid holds every record of its earlier attempts, and may hold more (Trident's
    opaque Kafka spout re-reads a txid from where the txid before it ended). A replay that left a record out
    would leave keys only that record touched at the earlier attempt's value, and the later txid that processes
    the record would count it again.

    What a retried Spark task of the same write must see: when a key's rows of the batch sit in several partitions
    and one partition's task is retried after its first attempt wrote the key, the retry skips the key (it cannot
    tell its first attempt's updates from the other partitions'), so the retry must see the same rows for that
    key: it does when the batch's DataFrame is deterministic (Spark recomputes a retried task's partition from the
    same input; a non-deterministic repartition or sample is not). A key whose rows are in one partition (as in
    persistent_aggregate, or partition_persist with partition_by) is recomputed from ``prev`` with whatever rows the
    retry sees.
    """

    kind = MapKind.OPAQUE

    def _check(self, key: Key, stored: Any, txid: int) -> None:
        self._check_tx(key, stored, txid, OpaqueValue)

    def _first(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        run = self._run_for(stored)
        if stored is None:
            new = OpaqueValue(txid, updater(None), None, run, self._call, self._parts(None))
        elif stored.txid != txid:
            new = OpaqueValue(txid, updater(stored.curr), stored.curr, run, self._call, self._parts(None))
        elif self._same_write(stored):
            if self._part in stored.parts:  # a retried task of a partition whose updates the key holds
                if stored.parts != (self._part,):  # with other partitions' updates: cannot tell its own apart
                    return _SKIP, stored.curr
                # this partition's updates alone: recompute them from prev (the retry may see more rows)
                new = OpaqueValue(txid, updater(stored.prev), stored.prev, run, self._call, self._parts(None))
            else:
                new = OpaqueValue(txid, updater(stored.curr), stored.prev, run, self._call, self._parts(stored))
        else:  # a replay of the txid: its earlier attempt may have held other records
            new = OpaqueValue(txid, updater(stored.prev), stored.prev, run, self._call, self._parts(None))
        return new, new.curr

    def _more(self, new: Any, updater: ValueUpdater) -> tuple[Any, Any]:
        curr = updater(new.curr)
        return replace(new, curr=curr), curr

    def _value_of(self, key: Key, stored: Any) -> Any:
        if stored is None:
            return None
        if not isinstance(stored, OpaqueValue):
            raise self._wrong(key, stored)
        return stored.curr


class NonTransactionalMap(_TxMap):
    """Stores the value alone: every update counts, and a replayed batch is applied again. At-least-once, with
    any spout."""

    kind = MapKind.NON_TRANSACTIONAL

    def _check(self, key: Key, stored: Any, txid: int) -> None:
        if isinstance(stored, (TransactionalValue, OpaqueValue)):
            raise self._wrong(key, stored)

    def _first(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        val = updater(stored)
        return val, val

    def _more(self, new: Any, updater: ValueUpdater) -> tuple[Any, Any]:
        val = updater(new)
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

    def begin_commit(self, txid: int, *, run: str | None = None, writer: tuple[str, int] | None = None) -> None:
        """Start batch ``txid`` (see the map's begin_commit)."""
        self.state.begin_commit(txid, run=run, writer=writer)

    def commit(self, txid: int) -> None:
        """Write the batch's update of the value and end the batch."""
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

    def claim_run(self, run: str) -> None:
        """Refuse a batch of ``run`` before anything of it is written when the namespace belongs to another run.

        Called by the operations on the driver, before a batch's Spark job, for transactional and opaque maps
        (NonTransactionalMaps have no txids to confuse). The namespace's run is kept under the key ``()`` (no
        group key is empty): the first run with a run identity that writes the namespace claims it (with
        compare-and-set where the backend offers it: of two runs claiming at once, one wins); a batch of any other
        run raises StateRunError, one read per batch. Key by key, the maps refuse other runs' txids as well (for
        namespaces written before the claim was kept)."""
        backing = self.backing.make_backing_map()
        inner: Any = backing
        while not hasattr(inner, "namespace") and hasattr(inner, "backing"):  # a CachedMap's
            inner = inner.backing
        where = getattr(inner, "namespace", getattr(inner, "name", "?"))
        try:
            for _ in range(3):
                if isinstance(backing, ConditionalBackingMap):
                    [got] = backing.multi_get_versioned([_RUN_KEY])
                    current, token = got.value, got.token
                else:
                    current, token = backing.multi_get([_RUN_KEY])[0], None
                if current is not None:
                    owner = current.get("run") if isinstance(current, dict) else None
                    if owner == run:
                        return
                    raise StateRunError(
                        f"state namespace {where!r} belongs to run {owner!r} (the query or pipeline that first wrote "
                        f"it), and this batch is of run {run!r}: the batch is refused before anything of it is "
                        f"written, since two runs number their batches independently and equal txids of two runs "
                        f"are no replay. A readStream query restarted without its checkpointLocation gets a new "
                        f"query id and starts its batch ids at 0 again: restart it with its original "
                        f"checkpointLocation. To count afresh in a new run, give it a new state namespace "
                        f"(namespace= of the backing map factory). Two queries or pipelines must not share one "
                        f"namespace.")
                if not isinstance(backing, ConditionalBackingMap):
                    backing.multi_put([_RUN_KEY], [{"run": run}])
                    return
                if backing.multi_put_if([_RUN_KEY], [{"run": run}], [token])[0]:
                    return
            raise StateError(f"state namespace {where!r}: its run marker kept changing; the batch is failed and "
                             f"will be replayed", retriable=True)
        finally:
            backing.close()

    def compare_and_set(self) -> bool:
        """Whether the maps this factory makes write with compare-and-set (their backing map offers it; the LRU
        cache passes it through). Called on the driver by partition_persist; makes and closes one backing map."""
        backing = self.backing.make_backing_map()
        try:
            return isinstance(backing, ConditionalBackingMap)
        finally:
            backing.close()

    def make_state(self, partition_index: int = 0, num_partitions: int = 1) -> _TxMap:
        """A new map state with its own backing map (closed by the state's close())."""
        from kinesis_spout.state.cached import CachedMap

        backing = self.backing.make_backing_map()
        if self.cache_size is not None:
            backing = CachedMap(backing, self.cache_size)
        return _KINDS[self.kind](backing)
