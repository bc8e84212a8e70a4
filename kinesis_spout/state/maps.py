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

**Reads and puts, as in Storm.** Outside a batch a map reads the latest value. During batch T the OpaqueMap reads
the value before T (``prev`` of a key holding txid T, ``curr`` of an older one; a newer txid is StateOrderError,
another run's StateRunError), so a replayed batch never reads its earlier attempt; the TransactionalMap and the
NonTransactionalMap read the stored value, the batch's own updates included (Storm writes them at once). A
``multi_put`` is written whatever the stored txid (on a replayed txid too, as Storm's multiPut). Keys given as lists
are taken as tuples.

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

The modules: :mod:`~kinesis_spout.state.batching` (the batch accumulation and the commit's write the kinds
share), :mod:`~kinesis_spout.state.kinds` (the three kinds and the MapFactory that makes them),
:mod:`~kinesis_spout.state.writes` (write ids and their order); this module adds the SnapshottableMap, and is where
callers import them all from.
"""

from __future__ import annotations

from typing import Any

from kinesis_spout.state.base import Key, ValueUpdater
from kinesis_spout.state.batching import BatchedMap
from kinesis_spout.state.kinds import MapFactory, NonTransactionalMap, OpaqueMap, TransactionalMap
from kinesis_spout.state.writes import new_call_id

__all__ = ["BatchedMap", "MapFactory", "NonTransactionalMap", "OpaqueMap", "SnapshottableMap", "TransactionalMap",
           "new_call_id"]


class SnapshottableMap:
    """One global value (Trident's Snapshottable) kept under a fixed key of a map state, e.g. a global count.
    Owned, as its map state, by the one thread that uses it."""

    def __init__(self, state: BatchedMap, key: Key = ("$global",)) -> None:
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
