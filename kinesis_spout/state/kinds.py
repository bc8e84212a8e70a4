"""The three Trident map kinds: what each stores beside a value, and what it makes of a stored txid that is the
batch's own (see :mod:`kinesis_spout.state.maps` for the contract); and the :class:`MapFactory` that makes a map of
a kind where it is used. The batch accumulation the kinds share is
:class:`~kinesis_spout.state.batching.BatchedMap`'s; a map state belongs to one thread (one Spark task), a
MapFactory is immutable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kinesis_spout.state.base import (
    BackingMapFactory,
    ConditionalBackingMap,
    Key,
    MapKind,
    StateError,
    StatePartitionError,
    StateRunError,
    ValueUpdater,
)
from kinesis_spout.state.batching import SKIP, BatchedMap, SetValue
from kinesis_spout.state.values import OpaqueValue, TransactionalValue

__all__ = ["MapFactory", "NonTransactionalMap", "OpaqueMap", "TransactionalMap"]

_RUN_KEY: Key = ()  # where a namespace keeps the run that owns it (group keys are never empty)


class _KindMap(BatchedMap):
    """What the three kinds add to the batch accumulation: a factory of maps of their kind."""

    @classmethod
    def factory(cls, backing: BackingMapFactory, *, cache_size: int | None = None) -> "MapFactory":
        """A picklable state factory for the Spark operations: this map kind over ``backing``'s maps, with an
        LRU cache of ``cache_size`` entries in front when given (see CachedMap for when that is safe)."""
        return MapFactory(cls.kind, backing, cache_size)


class TransactionalMap(_KindMap):
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
            if isinstance(updater, SetValue):  # a put: written on a replay too (Storm's multiPut)
                val = updater(None)
                return TransactionalValue(txid, val, self._run_for(stored), self._call, self._parts(stored)), val
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
            return SKIP, stored.val
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


class OpaqueMap(_KindMap):
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
                    if isinstance(updater, SetValue):  # a put does not depend on them: written
                        new = OpaqueValue(txid, updater(None), stored.prev, run, self._call, stored.parts)
                        return new, new.curr
                    return SKIP, stored.curr
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

    def _read(self, keys: list[Key]) -> list[Any]:
        """Storm's OpaqueMap reads: outside a batch, the latest value; during batch ``txid`` (between begin_commit
        and commit), the value before that batch: ``prev`` of a key holding the batch's own txid (an earlier
        attempt's, another partition's, or this state's own updates once written), ``curr`` of an older txid. A
        stored txid newer than the batch's is refused (StateOrderError), as is another run's (StateRunError).
        The batch's updates not committed yet are not read. One bulk read."""
        txid = self._txid
        if txid is None:
            return super()._read(keys)
        out: list[Any] = []
        for key, stored in zip(keys, self.backing.multi_get(keys)):
            if stored is None:
                out.append(None)
                continue
            self._check_stored(key, stored, txid, OpaqueValue)
            out.append(stored.prev if stored.txid == txid else stored.curr)
        return out

    def _value_of(self, key: Key, stored: Any) -> Any:
        if stored is None:
            return None
        if not isinstance(stored, OpaqueValue):
            raise self._wrong(key, stored)
        return stored.curr


class NonTransactionalMap(_KindMap):
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


_KINDS: dict[MapKind, type[BatchedMap]] = {
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

    def make_state(self, partition_index: int = 0, num_partitions: int = 1) -> BatchedMap:
        """A new map state with its own backing map (closed by the state's close())."""
        from kinesis_spout.state.cached import CachedMap

        backing = self.backing.make_backing_map()
        if self.cache_size is not None:
            backing = CachedMap(backing, self.cache_size)
        return _KINDS[self.kind](backing)
