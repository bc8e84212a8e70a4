"""The batch accumulation the three map kinds share (see :mod:`kinesis_spout.state.maps` for the contract):
between ``begin_commit(txid)`` and ``commit(txid)`` a map state reads each key the batch touches once, applies every
update of it in order, and writes them all at ``commit()`` in one bulk write (conditional, with rounds against
concurrent writers, when the backing map offers compare-and-set). Nothing is written before ``commit()``.

A map state belongs to one thread (one Spark task); ``close()`` closes its backing map and drops updates not
committed. Pure logic apart from the pause between conflict rounds: the I/O is the backing map's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Sequence

from kinesis_spout.errors import SpoutStateError
from kinesis_spout.retry import Backoff, RetryPolicy
from kinesis_spout.state.base import (
    BackingMap,
    ConditionalBackingMap,
    Key,
    MapKind,
    StateError,
    StateOrderError,
    StateRunError,
    ValueUpdater,
    as_keys,
)
from kinesis_spout.state.values import OpaqueValue, TransactionalValue
from kinesis_spout.state.writes import newer_call

__all__ = ["CONFLICT_BACKOFF_MAX_S", "CONFLICT_RETRY", "CONFLICT_ROUNDS", "SKIP", "BatchedMap", "PendingKey",
           "SetValue", "identical"]

#: Rounds of a conditional commit against writers that keep changing the same keys, before the batch is failed.
CONFLICT_ROUNDS = 50
#: The longest random pause between two such rounds.
CONFLICT_BACKOFF_MAX_S = 0.05
#: The pause between two such rounds: writers that keep colliding on the same keys take turns, each after a random
#: pause from 0 up to 2 ms, doubling, at most 50 ms; no pause after the last round.
CONFLICT_RETRY = RetryPolicy(initial_s=0.002, multiplier=2.0, max_s=CONFLICT_BACKOFF_MAX_S, jitter=1.0, min_s=0.0,
                             max_attempts=CONFLICT_ROUNDS)
#: "No write needed": the key already holds this batch's updates (what a kind's ``_first`` returns then).
SKIP: Any = object()


@dataclass
class PendingKey:
    """A key touched by the current batch: what was read, the batch's updates, and what to write at commit. Owned
    by the map state that holds it (one thread)."""

    stored: Any
    token: Any
    chain: list[ValueUpdater] = field(default_factory=list)
    new: Any = SKIP
    value: Any = None


class BatchedMap:
    """The part the three map kinds share: the batch's pending updates, the bulk read and the commit's write.

    State (owned by the one thread that uses the map, one Spark task): the current txid, run and writer, and
    ``_pending``, the keys the batch touched (cleared by begin_commit, written and cleared by commit). Nothing is
    written before commit(). The kinds (:mod:`kinesis_spout.state.kinds`) say what is stored: they override
    ``_check``, ``_first``, ``_more`` and ``_value_of``, and may read ``_run``, ``_call`` and ``_part`` and use the
    helpers ``_parts``, ``_run_for``, ``_same_write``, ``_check_tx``, ``_check_stored`` and ``_wrong`` (this class's
    protected interface to its subclasses); the rest is not theirs to change."""

    kind: ClassVar[MapKind]

    def __init__(self, backing: BackingMap) -> None:
        if not isinstance(backing, BackingMap):
            raise TypeError(f"backing must be a BackingMap (multi_get, multi_put, close), got {backing!r}")
        self.backing = backing
        self._txid: int | None = None
        self._run: str | None = None
        self._call: str | None = None
        self._part = 0
        self._pending: dict[Key, PendingKey] = {}

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
        """The values of ``keys`` (None where there is none; lists are taken as tuples) as the map kind reads them
        (see ``_read``): one bulk read of the keys it reads from the store."""
        return self._read(as_keys(keys))

    def _read(self, keys: list[Key]) -> list[Any]:
        """The stored values of ``keys``, the batch's own where it updated them (what a store written at once, as
        Trident's are, would hold): the TransactionalMap's and NonTransactionalMap's reads, as in Storm."""
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
        keys = as_keys(keys)
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
                self._pending[key] = PendingKey(stored, token)
        results: list[Any] = []
        for key, updater in zip(keys, updaters):
            pending = self._pending[key]
            pending.chain.append(updater)
            self._step(key, pending, updater, len(pending.chain) == 1, txid)
            results.append(pending.value)
        return results

    def _step(self, key: Key, pending: PendingKey, updater: ValueUpdater, first: bool, txid: int) -> None:
        """Apply one update of the batch to ``pending``: the batch's first through the kind's ``_first``, the
        others on top of it; a put (SetValue) on a key the batch leaves as it is (SKIP) is written all the same,
        since its value does not depend on what the key held (Storm's multiPut)."""
        if first or (pending.new is SKIP and isinstance(updater, SetValue)):
            pending.new, pending.value = self._first(key, pending.stored, updater, txid)
        elif pending.new is not SKIP:
            pending.new, pending.value = self._more(pending.new, updater)

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        """Set ``keys`` to ``values`` for the current txid (Trident's multiPut): an update like any other, except
        that it is written on a replayed txid too (a TransactionalMap's replayed key takes the new value, as in
        Storm); later updates of the batch count on top of it."""
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        self.multi_update(keys, [SetValue(v) for v in values])

    # -- the commit's write -----------------------------------------------------------------------------------
    def _write(self, txid: int) -> None:
        todo = [k for k in self._pending if self._writes(k)]
        if not todo:
            return
        backing = self.backing
        if not isinstance(backing, ConditionalBackingMap):
            backing.multi_put(todo, [self._pending[k].new for k in todo])
            return
        rounds = Backoff(CONFLICT_RETRY)
        while True:
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
                for i, updater in enumerate(pending.chain):
                    self._step(key, pending, updater, i == 0, txid)
            todo = [k for k in lost if self._writes(k)]
            if not todo:
                return
            failure = rounds.failed()
            if failure.stop is not None:
                raise StateError(f"{len(todo)} keys (e.g. {todo[0]!r}) kept changing under concurrent writers for "
                                 f"{failure.attempt} rounds; the batch is failed and will be replayed", retriable=True)
            rounds.wait(failure.pause_s)

    def _writes(self, key: Key) -> bool:
        """Whether the commit must write ``key`` (not when the key already holds what the batch would store)."""
        pending = self._pending[key]
        return pending.new is not SKIP and not identical(pending.new, pending.stored)

    # -- per kind ---------------------------------------------------------------------------------------------
    def _check(self, key: Key, stored: Any, txid: int) -> None:
        """Refuse a stored value this batch must not update: another map kind's, another run's, a later txid's."""

    def _first(self, key: Key, stored: Any, updater: ValueUpdater, txid: int) -> tuple[Any, Any]:
        """The batch's first update of ``key``: (what to store or SKIP, the key's new value)."""
        raise NotImplementedError

    def _more(self, new: Any, updater: ValueUpdater) -> tuple[Any, Any]:
        """A further update of a key in the same batch, on top of what its earlier ones will store."""
        raise NotImplementedError

    def _value_of(self, key: Key, stored: Any) -> Any:
        """The value a reader sees in what is stored under ``key`` (refusing another map kind's)."""
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

    def _check_stored(self, key: Key, stored: Any, txid: int,
                      cls: type[TransactionalValue] | type[OpaqueValue]) -> None:
        """What batch ``txid`` may read of a key: a value of this map's kind (``cls``), of this run, of no newer
        batch. Raises the error that says which rule ``stored`` breaks. Who calls: :meth:`_check_tx` and the opaque
        map's reads during a batch."""
        if not isinstance(stored, cls):
            raise self._wrong(key, stored)
        self._check_run(key, stored, txid)
        if stored.txid > txid:
            raise self._order(key, stored.txid, txid)

    def _check_tx(self, key: Key, stored: Any, txid: int, cls: type[TransactionalValue] | type[OpaqueValue]
                  ) -> None:
        if stored is None:
            return
        self._check_stored(key, stored, txid, cls)
        if stored.txid == txid and newer_call(stored.call, self._call):
            raise StateError(
                f"key {key!r} holds a newer write of batch {txid} (write {stored.call}) than this task's (write "
                f"{self._call}): this task belongs to an earlier attempt of the batch, replaced by the one that wrote "
                f"the key; its updates are refused so as not to undo the newer write. Spark retries or drops the "
                f"task; if this keeps happening, the drivers writing the namespace disagree on the time",
                retriable=True)

    def _check_run(self, key: Key, stored: Any, txid: int) -> None:
        """Refuse a stored txid of another run than the batch's (StateRunError): it is no replay of this batch."""
        if self._run is not None and stored.run is not None and stored.run != self._run:
            raise StateRunError(
                f"key {key!r} holds batch {stored.txid} of run {stored.run!r}, and this is batch {txid} of run "
                f"{self._run!r}: two runs number their batches independently, so equal txids of two runs are no "
                f"replay and the call is refused (this state writes nothing of the batch). A readStream query "
                f"restarted without its checkpointLocation gets a new query id and starts its batch ids at 0 again: "
                f"restart it with its original checkpointLocation. To count afresh in a new run, give it a new "
                f"state namespace (namespace= of the backing map factory). Two queries or pipelines must not share "
                f"one namespace.")

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


def identical(new: Any, stored: Any) -> bool:
    """Whether ``new`` is what is stored, bookkeeping (run, write, partitions) included: value equality leaves
    the bookkeeping out, and a write that changes only it must still be made. Called at commit, for each key."""
    if type(new) is not type(stored):
        return False
    if isinstance(new, (TransactionalValue, OpaqueValue)):
        return all(getattr(new, f.name) == getattr(stored, f.name) for f in fields(new))
    return bool(new == stored)


class SetValue:
    """An updater that sets a value (multi_put through the update path)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _stored: Any) -> Any:
        return self.value
