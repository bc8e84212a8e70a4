"""``readMode=executors``: the driver plans, the executors read Kinesis, ZooKeeper makes every replay exact.

The model (offsets, recorded ends, cuts) is in :mod:`kinesis_spout.spark.batches`. Here is the I/O:

- **Driver** (:class:`ExecutorStreamReader`): ``latestOffset`` for batch ``N + 1`` reads the ends batch ``N``'s
  tasks recorded (one listing and pipelined reads), starts each shard there, adds shards new to the query by the
  lineage rule once their parents are read to their end, and plans a batch only when there is something to read:
  a shard whose last task stopped at a limit is read on at once; a shard whose task reached the tip is probed with
  one ``GetRecords(Limit=1)`` (the driver reads no data). ``commit`` copies the ends of the completed batch to the
  shards' ZooKeeper checkpoints and deletes recorded ends a few batches behind. The driver beats a heartbeat on
  its query's ``batches/<query>`` node (every ``HEARTBEAT_S``) and, when the query starts and at each heartbeat,
  deletes the recorded ends of other queries of the app whose heartbeat is older than ``ABANDONED_AFTER_S``
  (queries whose checkpoint location was deleted; see :func:`kinesis_spout.spark.batches.abandoned`).
- **Executors** (:func:`read_shard_batch`): a task reads its shard from the batch's start into a bounded buffer
  (the batch's per-shard limits, ``EXECUTOR_READ_S`` of reading, the tip, the shard's end, the AvailableNow
  cutoff), records the end it chose (the first writer wins), and yields exactly the records up to the end that
  stands. One Kinesis client and one ZooKeeper client per Python worker process, not per task.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from kinesis_spout.config import MIN_POLL_INTERVAL_S, SpoutConfig
from kinesis_spout.errors import CheckpointError, KinesisError, StreamNotFoundError
from kinesis_spout.kinesis.getter import LATEST_MARGIN, PacedGetter, ShardGetter
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Position, at_timestamp
from kinesis_spout.records import Record
from kinesis_spout.spark.batch_store import ZooKeeperBatchStore
from kinesis_spout.spark.batches import PlannedBatch, ShardEnd, abandoned, cut, split_limit, within
from kinesis_spout.spark.offsets import encode_offset, initial_positions, waiting_for_parents
from kinesis_spout.spark.schema import records_to_arrow
from kinesis_spout.spark.source import (
    IDLE_WAIT_S,
    MAX_RETRIES,
    KinesisSpoutStreamReader,
    _executor_client,
    read_range,
    skip_consumed,
)

log = logging.getLogger("kinesis_spout.spark")

#: How long a task reads its shard at most before it records its end (it stops sooner at a limit or the tip).
EXECUTOR_READ_S = 1.0
#: Recorded ends are kept for this many completed batches behind the last one (replays need only the last).
KEEP_BATCHES = 3
#: A running query's driver writes its heartbeat (the mtime of ``batches/<query>``) this often at most.
HEARTBEAT_S = 600.0
#: Recorded ends of another query of the app whose heartbeat is older than this are deleted (a week: far longer
#: than any trigger interval, so only a stopped query can be that quiet).
ABANDONED_AFTER_S = 7 * 24 * 3600.0
#: Abandoned queries deleted at most per clean-up (the rest at the next heartbeat), to bound a driver's pause.
CLEANUP_QUERIES = 20

#: What a probe saw: a record to read (or the shard's end), only records whose user records were all dropped, nothing.
PROBE_FOUND, PROBE_PASSED, PROBE_IDLE = "found", "passed", "idle"


class ShardTask(InputPartition):
    """One shard's part of a planned batch: read from ``start`` under the batch's limits (executor side)."""

    def __init__(self, query: str, batch: int, shard_id: str, start: str, max_records: int | None,
                 max_bytes: int | None, cutoff: str | None, hash_range: HashKeyRange | None = None) -> None:
        super().__init__((query, batch, shard_id))
        self.query = query
        self.batch = batch
        self.shard_id = shard_id
        self.start = start
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.cutoff = cutoff
        self.hash_range = hash_range  # the shard's hash keys: user records of aggregates outside them are dropped

    def __repr__(self) -> str:
        return f"ShardTask(batch {self.batch}, {self.shard_id} after {self.start})"


class ExecutorStreamReader(KinesisSpoutStreamReader):
    """The stream reader of ``readMode=executors`` (driver-side planning; see the module docstring).

    Inherits the clients, the shard listing, the lineage of new shards and the ZooKeeper checkpoint writes of the
    driver-read source; all driver state is touched by Spark's planning thread only. ``heartbeat_s`` and
    ``abandoned_after_s`` default to ``HEARTBEAT_S`` and ``ABANDONED_AFTER_S``.
    """

    heartbeat_s: float = HEARTBEAT_S
    abandoned_after_s: float = ABANDONED_AFTER_S

    def _reset_driver_state(self) -> None:
        super()._reset_driver_state()
        self._ends: dict[tuple[str, int], dict[str, ShardEnd]] = {}
        self._probes: dict[str, tuple[Position, ShardGetter, float]] = {}
        self._beat_at: float | None = None  # time.monotonic() of the last heartbeat written

    def initialOffset(self) -> dict[str, Any]:
        """A new query: nothing planned (batch -1), each shard at its ZooKeeper checkpoint or ``initialPosition``,
        and a new query id that names this query's recorded ends."""
        shards = self._list_shards(force=True)
        stored = self._checkpoints().list()
        positions = initial_positions({s: shard.parents for s, shard in shards.items()}, stored, self.config,
                                      {s for s, shard in shards.items() if shard.closed})
        for shard_id, checkpoint in stored.items():
            if shard_id in positions and (checkpoint.sequence_number is not None or checkpoint.shard_end):
                self._written[shard_id] = positions[shard_id].encode()
        planned = PlannedBatch(uuid.uuid4().hex[:16], -1, positions)
        log.info("stream %r, app %r: new query %s (executor reads) starts at %s", self.config.stream_name,
                 self.config.app_name, planned.query, encode_offset(positions))
        return planned.encode()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch's offset: each shard's start (where the last batch's task ended) and the per-shard
        limits; ``start`` itself when there is nothing to read (or, under AvailableNow, the run is complete).

        Who calls: Spark, after every batch up to ``start`` completed. Idle streams are probed with
        ``GetRecords(Limit=1)`` per shard for up to ``IDLE_WAIT_S`` before answering. A stream that was deleted
        (or deleted and re-created) since the query read it is an error that says what to do.
        """
        last = PlannedBatch.parse(start, "start offset")
        self._heartbeat(last.query)
        try:
            return self._latest_offset(start, last, limit)
        except KinesisError as exc:
            known = f"its checkpoint location holds batch {last.batch}" if last.batch >= 0 else "it started on it"
            raise _stream_gone(exc, self.config, known) from exc

    def _latest_offset(self, start: dict[str, Any], last: PlannedBatch, limit: ReadLimit) -> dict[str, Any]:
        ends = self._completed(last)
        positions = dict(last.starts)
        for shard_id, end in ends.items():
            positions[shard_id] = end.end
        self._save(positions, force=False)
        shards = self._list_shards(force=any(e.end.ended for e in ends.values()))
        joined = self._new_shard_positions([s for s in shards if s not in positions], positions)
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
        # a closed shard read to its tip but not seen to end yet is read again: its next read finds the end
        caught_up = {s for s in active if s in ends
                     and (ends[s].past_cutoff or ends[s].at_tip and not shards[s].closed)}
        # the ends say nothing about now in a new query, or in a new AvailableNow run (they were recorded under
        # another cutoff, maybe days ago): probe every shard before planning
        fresh = last.batch < 0 or last.cutoff != self._cutoff
        if fresh:
            caught_up = set(active)
        if self._cutoff is not None and not fresh and not blocked and caught_up == set(active):
            self._save(positions, force=True)
            return start  # AvailableNow: every shard read to its tip, its end or the cutoff
        if not self._worth_a_batch(active, caught_up, positions, ends, fresh):
            if not joined and not pinned:
                return start
            # else a batch (maybe empty) puts the new shards and pins into Spark's offset log
        max_rows, max_bytes = self._budget(limit)
        planned = PlannedBatch(last.query, last.batch + 1, positions, split_limit(max_rows, len(active)),
                               split_limit(max_bytes, len(active)), self._cutoff)
        return planned.encode()

    def _heartbeat(self, query: str) -> None:
        """Beat the query's heartbeat when ``heartbeat_s`` passed since the last one (the first call of a process
        beats), then delete the recorded ends of abandoned queries. ZooKeeper trouble is logged, tried again at
        the next call: the heartbeat only guards this query's ends against other queries' clean-ups, which wait
        ``abandoned_after_s``."""
        if self._beat_at is not None and time.monotonic() - self._beat_at < self.heartbeat_s:
            return
        try:
            store = ZooKeeperBatchStore.on_store(self._checkpoints())
            now = store.touch_query(query, json.dumps({"worker": self.config.worker_id}).encode())
            self._beat_at = time.monotonic()
            beats = store.query_heartbeats()
            for other in abandoned({q: t for q, (t, _) in beats.items()}, now, query,
                                   self.abandoned_after_s)[:CLEANUP_QUERIES]:
                if store.delete_query(other, beats[other][1]):
                    log.info("deleted the batch ends of query %s: no heartbeat for %.0f s (its checkpoint "
                             "location is gone)", other, now - beats[other][0])
        except CheckpointError as exc:
            log.warning("could not write the heartbeat of query %s or clean up after abandoned queries (tried "
                        "again at the next trigger): %s", query, exc)

    def _completed(self, last: PlannedBatch) -> dict[str, ShardEnd]:
        """The ends recorded for batch ``last.batch`` (which Spark completed); every planned shard must have one."""
        if last.batch < 0:
            return {}
        key = (last.query, last.batch)
        cached = self._ends.get(key)
        if cached is not None:
            return cached
        store = ZooKeeperBatchStore.on_store(self._checkpoints())
        raw = store.batch_ends(last.query, last.batch)
        ends = {s: ShardEnd.from_json(data, f"{store.batches_node(last.query)}/{last.batch}/{s}")
                for s, data in raw.items()}
        missing = sorted(s for s, p in last.starts.items() if not p.ended and s not in ends
                         and s in self._list_shards())
        if missing:
            node = f"{store.batches_node(last.query)}/{last.batch}/{missing[0]}"
            raise CheckpointError(
                f"batch {last.batch} was completed but ZooKeeper has no recorded end for {', '.join(missing)} "
                f"(expected at {node}); its records cannot be told apart from the next batch's. Was the node "
                f"deleted? Start the query with a new checkpoint location: it resumes from ZooKeeper's checkpoints")
        self._ends = {key: ends}
        return ends

    def _worth_a_batch(self, active: Sequence[str], caught_up: set[str], positions: Mapping[str, Position],
                       ends: Mapping[str, ShardEnd], first: bool) -> bool:
        """Whether a batch has something to read: a shard whose last task stopped at a limit, else a probe that
        finds a record (waiting up to ``IDLE_WAIT_S``)."""
        if any(s not in caught_up for s in active):
            return True
        if self._cutoff is not None and not first:
            return False
        deadline = time.monotonic() + IDLE_WAIT_S
        passing: set[str] = set()  # the last probe passed records whose user records were all dropped: not idle
        while True:
            for shard_id in active:
                seen = self._probe(shard_id, positions[shard_id])
                if seen == PROBE_FOUND:
                    return True
                if seen == PROBE_PASSED:
                    passing.add(shard_id)
                elif seen == PROBE_IDLE:
                    passing.discard(shard_id)
            wake = min((due for _, _, due in self._probes.values()), default=time.monotonic() + MIN_POLL_INTERVAL_S)
            if time.monotonic() >= deadline or not active:
                # the idle wait is over; a shard whose probes were still passing dropped user records gets a
                # batch: its task reads on at full GetRecords size (one record per probe would take too long)
                return bool(passing)
            time.sleep(max(0.0, min(wake, deadline) - time.monotonic()))

    def _probe(self, shard_id: str, position: Position) -> str | None:
        """One ``GetRecords(Limit=1)`` after ``position`` when the shard may be polled: ``PROBE_FOUND`` if a record
        (or the shard's end) is there; ``PROBE_PASSED`` if the reply held a Kinesis record whose user records all
        belonged to other shards (the next probe, at the shard's pace, reads on after it); ``PROBE_IDLE`` when nothing
        is there (or on a retriable error); None when the shard is not due yet.

        Who calls: ``_worth_a_batch``, on the driver's planning thread; changes ``_probes``."""
        probe = self._probes.get(shard_id)
        now = time.monotonic()
        if probe is None or probe[0] != position:
            getter = ShardGetter(self._kinesis(), self.config.stream_name, shard_id, position, 1,
                                 deaggregate=self.config.deaggregate, hash_range=self._hash_range(shard_id))
            probe = (position, getter, 0.0)
        pos, getter, due = probe
        if due > now:
            self._probes[shard_id] = probe
            return None
        try:
            result = getter.fetch()
        except KinesisError as exc:
            if not exc.retriable:
                raise
            log.info("probing %s: %s", shard_id, exc)
            self._probes[shard_id] = (pos, getter, now + MIN_POLL_INTERVAL_S)
            return PROBE_IDLE
        if skip_consumed(result.records, position) or result.shard_end:
            self._probes.pop(shard_id, None)  # the batch's task reads it; a new probe starts at the new end
            return PROBE_FOUND
        if result.fetched:  # every user record dropped (or already read): more may follow, read on at the pace
            self._probes[shard_id] = (pos, getter, now + MIN_POLL_INTERVAL_S)
            return PROBE_PASSED
        self._probes[shard_id] = (pos, getter, now + max(MIN_POLL_INTERVAL_S, self.config.empty_record_backoff_s))
        return PROBE_IDLE

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One task per shard of the planned batch that is not finished (the tasks read; nothing is carried)."""
        planned = PlannedBatch.parse(end, "end offset")
        cutoff = planned.cutoff.isoformat() if planned.cutoff is not None else None
        return [ShardTask(planned.query, planned.batch, shard_id, pos.encode(), planned.max_records,
                          planned.max_bytes, cutoff, self._hash_range(shard_id))
                for shard_id, pos in sorted(planned.starts.items()) if not pos.ended and not pos.unresolved]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark completed batch ``end``: its recorded ends become the shards' ZooKeeper checkpoints, and ends of
        batches ``KEEP_BATCHES`` behind are deleted."""
        planned = PlannedBatch.parse(end, "committed offset")
        ends = self._completed(planned)
        positions = {**planned.starts, **{s: e.end for s, e in ends.items()}}
        self._save(positions, force=False)
        if planned.batch >= KEEP_BATCHES:
            try:
                batches = ZooKeeperBatchStore.on_store(self._checkpoints())
                batches.delete_batches(planned.query, planned.batch - KEEP_BATCHES + 1)
            except CheckpointError as exc:
                log.warning("could not delete old batch ends (tried again after the next batch): %s", exc)

    # -- executors -------------------------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The task's records, exactly those up to the end recorded for its ``(batch, shard)``."""
        assert isinstance(partition, ShardTask)
        cfg = self.config
        try:
            records = read_shard_batch(_executor_client(cfg.region, cfg.endpoint_url, cfg.credentials),
                                       ZooKeeperBatchStore.on_store(_executor_store(cfg)), cfg, partition)
        except KinesisError as exc:
            raise _stream_gone(exc, cfg, f"batch {partition.batch} was planned on it") from exc
        yield from records_to_arrow(cfg.stream_name, records).to_batches()


def _stream_gone(exc: KinesisError, cfg: SpoutConfig, known: str) -> KinesisError:
    """``exc`` as it is, or, when it says the stream is gone or is not the one this query read (it was deleted,
    maybe re-created, while the query was stopped), an error of the same kind that says so and what to do."""
    where = f"endpoint {cfg.endpoint_url}" if cfg.endpoint_url else f"region {cfg.region or 'default'}"
    fix = (f"Its records are gone: start the query with a new checkpoint location, and with a new appName or after "
           f"resetting app {cfg.app_name!r}'s ZooKeeper checkpoints (`kinesis-spout checkpoints reset`), which hold "
           f"positions in the old stream")
    text = str(exc)
    if isinstance(exc, StreamNotFoundError) and "Shard " in text:  # a shard: Kinesis says the same when it expired
        return StreamNotFoundError(
            f"a shard of stream {cfg.stream_name!r} at {where} does not exist, but this query read it ({known}): "
            f"was the stream deleted, or is the shard older than the stream's retention? If the stream was "
            f"deleted: {fix}. [{exc}]", code=exc.code)
    if isinstance(exc, StreamNotFoundError):
        return StreamNotFoundError(
            f"stream {cfg.stream_name!r} does not exist at {where}, but this query read it ({known}): was it "
            f"deleted? {fix}. (If it was not deleted, check the options streamName, region and endpointUrl.) "
            f"[{exc}]", code=exc.code)
    if exc.code == "InvalidArgumentException" and ("did not come from this stream" in text
                                                   or "StartingSequenceNumber" in text):
        return KinesisError(
            f"stream {cfg.stream_name!r} at {where} is not the stream this query read ({known}): Kinesis says a "
            f"position of it does not come from this stream, so the stream was deleted and re-created. {fix}. "
            f"[{exc}]", code=exc.code)
    return exc


def read_shard_batch(client: Any, store: Any, cfg: SpoutConfig, task: ShardTask) -> list[Record]:
    """Read the task's part of its batch and return exactly the records up to the end that stands.

    When an end is already recorded for ``(batch, shard)`` (a retry, a speculative copy, a replay), the records up
    to it are read. Otherwise the shard is read under the task's limits, the end chosen is recorded (the first
    writer wins), and the records up to the winner's end are returned.
    """
    start = Position.parse(task.start, f"task of {task.shard_id}")
    where = f"{store.batches_node(task.query)}/{task.batch}/{task.shard_id}"
    recorded = store.batch_end(task.query, task.batch, task.shard_id)
    if recorded is not None:
        end = ShardEnd.from_json(recorded, where)
        return read_range(client, cfg, task.shard_id, start, end.end, task.hash_range)
    cutoff = datetime.fromisoformat(task.cutoff) if task.cutoff else None
    records, reached_tip, shard_end = _read_bounded(client, cfg, task, start, cutoff)
    n, mine = cut(records, start, task.max_records, task.max_bytes, cutoff, shard_end=shard_end,
                  reached_tip=reached_tip)
    standing = ShardEnd.from_json(store.record_batch_end(task.query, task.batch, task.shard_id, mine.to_json()),
                                  where)
    if standing.end == mine.end:
        return records[:n]
    log.info("%s: another attempt recorded the end first (%s, not %s)", where, standing.end.encode(),
             mine.end.encode())
    high = standing.end.key
    if high is not None and records and records[-1].key >= high:
        return within(records, start, standing.end)
    return read_range(client, cfg, task.shard_id, start, standing.end, task.hash_range)


def _read_bounded(client: Any, cfg: SpoutConfig, task: ShardTask, start: Position, cutoff: datetime | None
                  ) -> tuple[list[Record], bool, bool]:
    """Read from ``start`` until a limit, the tip, the shard's end, the cutoff or ``EXECUTOR_READ_S``; returns
    (records, reached the tip, reached the shard's end)."""
    per_call = cfg.max_records_per_call if task.max_records is None else min(cfg.max_records_per_call,
                                                                             task.max_records)
    getter = PacedGetter(ShardGetter(client, cfg.stream_name, task.shard_id, start, per_call,
                                     deaggregate=cfg.deaggregate, hash_range=task.hash_range),
                         MIN_POLL_INTERVAL_S, MAX_RETRIES)
    records: list[Record] = []
    size = 0
    deadline = time.monotonic() + EXECUTOR_READ_S
    while True:
        result = getter.fetch()
        new = skip_consumed(result.records, start) if not records else result.records
        records.extend(new)
        size += sum(r.size for r in new)
        if result.shard_end:
            return records, True, True
        # the tip: an empty reply that is not behind, or a short one that says it is not behind (an emulator says
        # MillisBehindLatest 0 also when the Limit cut the reply short)
        if result.millis_behind_latest in (0, None) and result.fetched < per_call:
            return records, True, False
        if task.max_records is not None and len(records) >= task.max_records:
            return records, False, False
        if task.max_bytes is not None and size >= task.max_bytes:
            return records, False, False
        if cutoff is not None and any(r.approximate_arrival_timestamp is not None
                                      and r.approximate_arrival_timestamp > cutoff for r in new):
            return records, False, False
        if time.monotonic() >= deadline:
            return records, False, False


_stores: dict[tuple[str, str], Any] = {}
_stores_lock = threading.Lock()


def _executor_store(cfg: SpoutConfig) -> Any:
    """One open ZooKeeper store per Python worker process and checkpoint path (its kazoo client is thread-safe)."""
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

    key = (cfg.zookeeper, cfg.checkpoint_path)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = ZooKeeperCheckpointStore.from_config(cfg)
            store.open()
            _stores[key] = store
        return store
