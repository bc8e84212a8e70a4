"""Planning of ``readMode=executors`` on the driver: batches are planned from the ends the last tasks recorded.

``plan`` for batch ``N + 1`` reads the ends batch ``N``'s tasks recorded (one listing and pipelined reads), starts
each shard there, adds shards new to the query by the lineage rule once their parents are read to their end, and
plans a batch only when there is something to read: a shard whose last task stopped at a limit is read on at once;
a shard whose task reached the tip is probed with one ``GetRecords(Limit=1)`` (the driver reads no data), on
threads of the driver's own and on the shard's idle schedule (:mod:`kinesis_spout.spark.source.probes`): planning
waits only for the first probe of the shards the last batch moved, so an idle shard costs it nothing.
``commit`` copies the ends of the completed batch to the shards' ZooKeeper checkpoints and deletes recorded ends a
few batches behind. The planner beats a heartbeat on its query's ``batches/<query>`` node and, when the query
starts and at each heartbeat, deletes the recorded ends of other queries of the app whose heartbeat is older than
``abandoned_after_s`` (queries whose checkpoint location was deleted; see
:func:`kinesis_spout.spark.source.executor_batches.abandoned`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Mapping, Sequence

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import CheckpointError, KinesisError
from kinesis_spout.kinesis.retrieval.polling import LATEST_MARGIN, ShardGetter, idle_backoff
from kinesis_spout.positions import Position, at_timestamp
from kinesis_spout.spark.bookkeeping.batch_store import ZooKeeperBatchStore
from kinesis_spout.spark.source.executor_batches import PlannedBatch, ShardEnd, abandoned, recorded_ends, split_limit
from kinesis_spout.spark.source.offsets import waiting_for_parents
from kinesis_spout.spark.source.planning import QueryPlanning
from kinesis_spout.spark.source.probes import (
    PROBE_ERROR,
    PROBE_FOUND,
    PROBE_IDLE,
    PROBE_PASSED,
    ProbeSchedule,
    ReadStreaks,
    ShardProber,
)
from kinesis_spout.spark.source.shard_reads import shard_getter, skip_consumed

__all__ = ["CLEANUP_QUERIES", "KEEP_BATCHES", "PROBE_ROUND_S", "SWEEP_BATCHES", "ExecutorPlanner"]

log = logging.getLogger(__name__)

#: Recorded ends are kept for this many completed batches behind the last one (replays need only the last).
KEEP_BATCHES = 3
#: Ends of old batches are deleted by listing (not by the names read) at least this many batches apart.
SWEEP_BATCHES = 100
#: Abandoned queries deleted at most per clean-up (the rest at the next heartbeat), to bound a driver's pause.
CLEANUP_QUERIES = 20

#: Planning waits this long at most for the first probe of each shard new to the probes (then it gets a task).
PROBE_ROUND_S = 10.0


class ExecutorPlanner:
    """The driver's planning for ``readMode=executors`` (see the module docstring).

    Owned by Spark's planning thread: every method is called from it, so no lock. It reads no records: tasks do
    (:mod:`kinesis_spout.spark.source.executor_read`).
    """

    def __init__(self, planning: QueryPlanning) -> None:
        self.planning = planning
        self.config = planning.config
        self._ends: dict[tuple[str, int], dict[str, ShardEnd]] = {}
        self._recorded: dict[tuple[str, int], list[str]] = {}  # (query, batch) -> the shards whose ends were read
        self._swept_at: int | None = None  # the batch below which ends were last deleted by listing
        self._streaks = ReadStreaks()  # the batches in a row in which each shard's task read records
        self._renewed_after: int | None = None  # the completed batch whose shards' probes were last started afresh
        # the probes of shards at their tip, on threads of their own, each shard on its idle schedule
        reading = self.config.reading
        self._prober: ShardProber[ShardGetter] = ShardProber(
            ProbeSchedule(lambda: idle_backoff(reading.empty_record_backoff_s, reading.max_empty_record_backoff_s),
                          MIN_POLL_INTERVAL_S), self._probe)
        self._beat_at: float | None = None  # time.monotonic() of the last heartbeat written
        # the shards the last planned batch found at their tip: retrieval="fanout" reads them with GetRecords
        self._at_tip: tuple[int, frozenset[str]] = (-1, frozenset())

    def plan(self, start: PlannedBatch, max_rows: int | None, max_bytes: int | None, idle_wait_s: float,
             shards_per_task: int = 1) -> PlannedBatch | None:
        """The next batch after ``start`` (completed by Spark), or None when there is nothing to read (or, under
        AvailableNow, the run is complete). Idle shards are probed for up to ``idle_wait_s``. The batch's tasks
        read up to ``shards_per_task`` shards each (kept in its offset)."""
        planning = self.planning
        ends = self.completed(start)
        self._streaks.batch_read(start.batch, {s for s, e in ends.items() if e.records > 0})
        positions = dict(start.starts)
        for shard_id, end in ends.items():
            positions[shard_id] = end.end
        planning.save(positions, force=False)
        shards = planning.list_shards(force=any(e.end.ended for e in ends.values()))
        joined = planning.new_shard_positions([s for s in shards if s not in positions], positions)
        positions.update(joined)
        pinned = [s for s, pos in positions.items() if pos.unresolved]
        for shard_id in pinned:  # LATEST: pinned to a time now, kept in the offset so every replay reads the same
            positions[shard_id] = at_timestamp(datetime.now(timezone.utc) - LATEST_MARGIN)
        blocked = waiting_for_parents({s: shard.parents for s, shard in shards.items()},
                                      {s: p for s, p in positions.items() if s in shards}, shards)
        for shard_id in blocked:  # a child stays out of the offset (and gets no task) until its parents ended
            positions.pop(shard_id, None)
        joined = {s: p for s, p in joined.items() if s not in blocked}
        active = [s for s, p in positions.items() if s in shards and not p.ended]
        # a closed shard read to its tip but not seen to end yet is read again: its next read finds the end; a shard
        # idle in the last batch (no task) is still at its tip
        caught_up = {s for s in active if s in start.idle or s in ends
                     and (ends[s].past_cutoff or ends[s].at_tip and not shards[s].closed)}
        # the ends say nothing about now in a new query, or in a new AvailableNow run (they were recorded under
        # another cutoff, maybe days ago): probe every shard before planning
        cutoff = planning.cutoff
        fresh = start.batch < 0 or start.cutoff != cutoff
        if fresh:
            caught_up = set(active)
        if cutoff is not None and not fresh and not blocked and caught_up == set(active):
            planning.save(positions, force=True)
            return None  # AvailableNow: every shard read to its tip, its end or the cutoff
        # known busy: a shard whose tasks read records in the last two batches, the last up to its tip, is read again
        # without a probe (records are likely there by now, and a probe would cost the batch a round trip); once a
        # task finds nothing in it it is probed again. Under AvailableNow a shard at its tip is done.
        busy = set() if cutoff is not None or fresh else {
            s for s in caught_up if s in ends and ends[s].at_tip and not shards[s].closed
            and self._streaks.known_busy(s, start.batch)}
        # the shards the completed batch read are probed afresh once (a task may have found nothing where a probe
        # found something: a shard never stays "found" at the same start)
        renew = set(ends) if self._renewed_after != start.batch else set()
        self._renewed_after = start.batch
        seen, quiet = self._seen_new(active, caught_up - busy, positions, fresh, idle_wait_s, renew)
        idle = frozenset(s for s in quiet if s not in seen and not positions[s].unresolved)
        if len(idle) == len(active) and not joined and not pinned:
            return None
        if cutoff is not None and fresh:
            # the first batch of an AvailableNow run reads every shard: one probe that found nothing (a retriable
            # error) must not leave out, for the whole run, records that were there when it started
            idle = frozenset()
        # else a batch reads the shards with something new (maybe none: it puts the new shards and pins into
        # Spark's offset log); an idle shard gets no task and no recorded end
        self._at_tip = (start.batch + 1, frozenset(caught_up))
        planned = PlannedBatch(start.query, start.batch + 1, positions, cutoff=cutoff, idle=idle,
                               shards_per_task=shards_per_task)
        tasks = len(planned.tasks())  # the batch's limits are shared by the shards it reads
        return replace(planned, max_records=split_limit(max_rows, tasks), max_bytes=split_limit(max_bytes, tasks))

    def at_tip(self, batch: int) -> frozenset[str]:
        """The shards that were at their tip when ``batch`` was planned by this planner (their last task said so,
        or, in a new query or run, all of them): empty for a batch planned elsewhere (a restart's replay)."""
        planned, shards = self._at_tip
        return shards if planned == batch else frozenset()

    def open_batch(self, planned: PlannedBatch) -> None:
        """Create the node of ``planned``'s recorded ends before its tasks run. Who calls: ``partitions``."""
        self._batches().open_batch(planned.query, planned.batch)

    def commit(self, planned: PlannedBatch) -> None:
        """Spark completed batch ``planned``: its recorded ends become the shards' ZooKeeper checkpoints, and ends
        of batches ``KEEP_BATCHES`` behind are deleted."""
        ends = self.completed(planned)
        positions = {**planned.starts, **{s: e.end for s, e in ends.items()}}
        self.planning.save(positions, force=False)
        if planned.batch >= KEEP_BATCHES:
            self._clean_up(planned.query, planned.batch - KEEP_BATCHES + 1)

    def _clean_up(self, query: str, below: int) -> None:
        """Delete the recorded ends of ``query``'s batches below ``below``: those this planner read, by name in one
        transaction once ``KEEP_BATCHES`` of them are due; by listing every ``SWEEP_BATCHES`` batches (ends a
        straggling task recorded late) and when the transaction was not applied (the heartbeat sweeps too, so the
        batches of an earlier driver go when a query restarts). ZooKeeper trouble is logged and tried again after
        the next batch."""
        store = self._batches()
        due = {b: shards for (q, b), shards in self._recorded.items() if q == query and b < below}
        try:
            if self._swept_at is None:
                self._swept_at = below
            if below - self._swept_at >= SWEEP_BATCHES:
                store.delete_batches(query, below)
                self._swept_at = below
            elif len(due) < KEEP_BATCHES:
                return
            elif not store.delete_ends(query, due):
                store.delete_batches(query, below)
            for batch in due:
                self._recorded.pop((query, batch), None)
        except CheckpointError as exc:
            log.warning("could not delete old batch ends (tried again after the next batch): %s", exc)

    def heartbeat(self, query: str, heartbeat_s: float, abandoned_after_s: float, completed: int = -1) -> None:
        """Beat the query's heartbeat when ``heartbeat_s`` passed since the last one (the first call of a process
        beats), delete this query's recorded ends more than ``KEEP_BATCHES`` behind batch ``completed`` (by
        listing: also those an earlier driver or a straggling task left), then the recorded ends of abandoned
        queries (no heartbeat for ``abandoned_after_s``).
        ZooKeeper trouble is logged, tried again at the next call: the heartbeat only guards this query's ends
        against other queries' clean-ups, which wait ``abandoned_after_s``."""
        if self._beat_at is not None and time.monotonic() - self._beat_at < heartbeat_s:
            return
        try:
            store = self._batches()
            now = store.touch_query(query, json.dumps({"worker": self.config.worker.worker_id}).encode())
            self._beat_at = time.monotonic()
            if completed >= KEEP_BATCHES:
                below = completed - KEEP_BATCHES + 1
                store.delete_batches(query, below)
                for key in [k for k in self._recorded if k[0] == query and k[1] < below]:
                    del self._recorded[key]
            beats = store.query_heartbeats()
            for other in abandoned({q: t for q, (t, _) in beats.items()}, now, query,
                                   abandoned_after_s)[:CLEANUP_QUERIES]:
                if store.delete_query(other, beats[other][1]):
                    log.info("deleted the batch ends of query %s: no heartbeat for %.0f s (its checkpoint "
                             "location is gone)", other, now - beats[other][0])
        except CheckpointError as exc:
            log.warning("could not write the heartbeat of query %s or clean up after abandoned queries (tried "
                        "again at the next trigger): %s", query, exc)

    def completed(self, last: PlannedBatch) -> dict[str, ShardEnd]:
        """The ends recorded for batch ``last.batch`` (which Spark completed); every planned shard must have one."""
        if last.batch < 0:
            return {}
        key = (last.query, last.batch)
        cached = self._ends.get(key)
        if cached is not None:
            return cached
        store = self._batches()
        groups = last.task_groups()
        node_of = {s: node for node, members in groups for s in members}
        raw = store.batch_ends(last.query, last.batch, [node for node, _ in groups]) if groups else {}
        ends: dict[str, ShardEnd] = {}
        for node, data in raw.items():
            ends.update(recorded_ends(node, data, f"{store.batches_node(last.query)}/{last.batch}/{node}"))
        missing = sorted(s for s, p in last.starts.items() if not p.ended and s not in ends
                         and s not in last.idle and s in self.planning.list_shards())
        if missing:
            node = f"{store.batches_node(last.query)}/{last.batch}/{node_of.get(missing[0], missing[0])}"
            raise CheckpointError(
                f"batch {last.batch} was completed but ZooKeeper has no recorded end for {', '.join(missing)} "
                f"(expected at {node}); its records cannot be told apart from the next batch's. Was the node "
                f"deleted? Start the query with a new checkpoint location: it resumes from ZooKeeper's checkpoints")
        self._ends = {key: ends}
        if groups:  # their nodes, deleted by name a few batches on
            self._recorded[key] = sorted(raw)
        return ends

    def _batches(self) -> ZooKeeperBatchStore:
        """The recorded batch ends and query heartbeats, on the driver's ZooKeeper session."""
        return ZooKeeperBatchStore.on_store(self.planning.clients.checkpoints())

    def close(self) -> None:
        """Stop the probes and forget them and the cached ends. Idempotent."""
        self._prober.close()
        self._streaks = ReadStreaks()
        self._renewed_after = None
        self._ends.clear()
        self._recorded.clear()
        self._swept_at = None

    def _seen_new(self, active: Sequence[str], caught_up: set[str], positions: Mapping[str, Position],
                  first: bool, idle_wait_s: float, renew: set[str]) -> tuple[set[str], set[str]]:
        """(the shards at their tip, ``caught_up``, in which something new was seen; those seen idle). The probes
        are made off this thread, each shard on its schedule (:mod:`kinesis_spout.spark.source.probes`): this waits
        only for the first probe of each shard new to the probes (a new query's, one a batch moved; up to
        ``PROBE_ROUND_S``: one not probed by then is in neither set and gets a task) and, when every active shard is
        at its tip and nothing was seen, for up to ``idle_wait_s`` in all until a probe finds something. An idle
        shard due later costs nothing here. Under AvailableNow after the run's first batch nothing is probed (a shard
        at its tip is done). Who calls: ``plan``, on the driver's planning thread."""
        if self.planning.cutoff is not None and not first:
            self._prober.track({}, self._getter)
            return set(), set(caught_up)
        tracked = {s: positions[s] for s in active if s in caught_up}
        self._prober.track(tracked, self._getter, renew)
        if not tracked:
            return set(), set()
        if self.planning.cutoff is not None:
            # the first batch of an AvailableNow run reads every shard whatever its probe says: the probes only tell
            # whether there is anything at all, so the first one to find something ends them
            seen = self._prober.wait(lambda v: bool(v.found) or not v.unprobed, PROBE_ROUND_S)
            self._prober.track({}, self._getter)
            return set(seen.found), set(seen.idle)
        waiting = len(tracked) == len(active)
        started = time.monotonic()
        seen = self._prober.wait(lambda v: not v.unprobed, PROBE_ROUND_S)
        if waiting and not seen.found:
            left = idle_wait_s - (time.monotonic() - started)
            seen = self._prober.wait(lambda v: bool(v.found), left)
        if waiting and seen.found:
            # shards whose last probe passed dropped user records only are probed on at the pace; once the idle
            # wait is over they get a task (one record per probe would take too long)
            return set(seen.found), set(seen.idle)
        return set(seen.found | seen.passing), set(seen.idle)

    def _getter(self, shard_id: str, position: Position) -> ShardGetter:
        """The getter of a shard's probes after ``position``: one record per call. Who calls: the prober's
        ``track``, on the planning thread (no I/O: its first probe gets the shard iterator)."""
        return shard_getter(self.planning.clients.kinesis(), self.config.stream_name, self.config.reading, shard_id,
                            position, 1, self.planning.hash_range(shard_id))

    @staticmethod
    def _probe(shard_id: str, position: Position, getter: ShardGetter) -> str:
        """One ``GetRecords(Limit=1)`` after ``position``: ``PROBE_FOUND`` if a record (or the shard's end) is there,
        or the reply was empty but said the shard's tip is further on; ``PROBE_PASSED`` if the reply held a Kinesis
        record whose user records all belonged to other shards (the next probe reads on after it); ``PROBE_IDLE``
        when nothing is there; ``PROBE_ERROR`` on a retriable error. Raises a non-retriable ``KinesisError``.

        Who calls: the prober's threads, one probe of a shard at a time (the getter is its shard's own)."""
        try:
            result = getter.fetch()
        except KinesisError as exc:
            if not exc.retriable:
                raise
            log.info("probing %s: %s", shard_id, exc)
            return PROBE_ERROR
        behind = not result.fetched and (result.millis_behind_latest or 0) > 0  # an empty reply short of the tip
        if skip_consumed(result.records, position) or result.shard_end or behind:
            return PROBE_FOUND
        if result.fetched:  # every user record dropped (or already read): more may follow, read on at the pace
            return PROBE_PASSED
        return PROBE_IDLE
