"""The Structured Streaming source ``kinesis_spout``: a Kinesis stream as ``spark.readStream``.

    spark.dataSource.register(KinesisSpoutDataSource)
    df = (spark.readStream.format("kinesis_spout").option("streamName", "sentences")
          .option("appName", "wordcount").option("zookeeper", "127.0.0.1:2181").load())

How a micro-batch is made. Kinesis cannot say where a shard's data ends without reading it, so the driver reads:
``latestOffset`` takes what each shard has read (at most one GetRecords call per shard and round, paced as Kinesis
allows; a shard that returned records reads its next call ahead while Spark runs the batch), admits records
under the read limit, keeps them keyed by ``(shard, start, end)``, and returns the new per-shard sequence numbers.
``partitions`` then hands each shard's kept records to its partition as Arrow bytes, so the executors do not read
Kinesis again. A batch whose records are not kept (a replay after a restart) is read again between its exact
offsets: ``AFTER_SEQUENCE_NUMBER`` the start, up to and including the end. Offsets are described in
:mod:`kinesis_spout.spark.offsets`.

Checkpoints. Spark's checkpoint location is the truth for a query. When a batch is done (``commit``, and also the
next ``latestOffset``, which Spark calls only after the batch before it completed) its end is written to
ZooKeeper as each shard's checkpoint, so a query started without a checkpoint location, the spout, or the
``kinesis-spout`` command resume there.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxBytes, ReadMaxRows, SupportsTriggerAvailableNow

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import MIN_POLL_INTERVAL_S, SpoutConfig
from kinesis_spout.errors import CheckpointConflict, CheckpointError, KinesisError, StreamNotFoundError
from kinesis_spout.kinesis.client import make_client, translate
from kinesis_spout.kinesis.credentials import AwsCredentials
from kinesis_spout.kinesis.getter import LATEST_MARGIN, PacedGetter, ShardGetter
from kinesis_spout.kinesis.reader import Backoff
from kinesis_spout.kinesis.shards import HashKeyRange, Shard, drop_range, list_shards, owned_shards
from kinesis_spout.positions import TRIM_HORIZON, Position, at_timestamp
from kinesis_spout.records import Record
from kinesis_spout.spark.offsets import (
    allocate,
    as_checkpoint,
    consumed,
    encode_offset,
    end_after,
    first_after,
    in_range,
    initial_positions,
    lineage_checkpoint,
    parse_offset,
    parse_source_options,
    range_is_empty,
    unused_options,
    waiting_for_parents,
)
from kinesis_spout.spark.schema import SCHEMA_DDL, records_to_arrow

log = logging.getLogger("kinesis_spout.spark")

#: How long an idle ``latestOffset`` waits for the next shard poll before telling Spark there is nothing new.
IDLE_WAIT_S = 0.5
#: Retriable errors (throttling, 5xx, lost connections) in a row before a shard's read fails the query.
MAX_RETRIES = 30
#: Trigger.AvailableNow reads records that arrived up to this long after the run started (by Kinesis' clock):
#: an allowance for clock skew between this driver and Kinesis, so nothing present at the start is left out.
AVAILABLE_NOW_MARGIN = timedelta(seconds=2)
_FETCH_THREADS = 32


class KinesisSpoutDataSource(DataSource):
    """``format("kinesis_spout")``: register with ``spark.dataSource.register(KinesisSpoutDataSource)``.

    Options are SpoutConfig's string options (``streamName``, ``appName``, ``zookeeper``, ``endpointUrl``,
    ``initialPosition``, ...) plus ``maxRecordsPerTrigger`` and ``maxBytesPerTrigger``. Columns: see
    :mod:`kinesis_spout.spark.schema`.
    """

    @classmethod
    def name(cls) -> str:
        return "kinesis_spout"

    def schema(self) -> str:
        """Called by Spark at ``load()``: validates the options there, so a bad one fails before the query.

        ``load()`` serves ``spark.read`` and ``spark.readStream`` alike, so the batch-read options are accepted and
        ``appName`` is not required here; a stream query without ``appName`` fails at ``start()``."""
        from kinesis_spout.spark.batch_read import parse_batch_options

        config, _, _ = parse_batch_options(self.options)
        check_stream_exists(config)
        unused = unused_options(self.options)
        if unused:
            log.warning("options %s have no effect on the kinesis_spout source (a batch is done when Spark "
                        "commits it; per-record ack/fail is the spout's)", ", ".join(unused))
        return SCHEMA_DDL

    def reader(self, schema: Any) -> Any:
        """``spark.read.format("kinesis_spout")``: a batch read between two times
        (:mod:`kinesis_spout.spark.batch_read`)."""
        from kinesis_spout.spark.batch_read import KinesisBatchReader

        return KinesisBatchReader(self.options)

    def streamReader(self, schema: Any) -> "KinesisSpoutStreamReader":
        """The reader of the ``readMode`` option: ``driver`` (this module) or ``executors``
        (:mod:`kinesis_spout.spark.executor_source`)."""
        _, limits = parse_source_options(self.options)
        if limits.read_mode == "executors":
            from kinesis_spout.spark.executor_source import ExecutorStreamReader

            return ExecutorStreamReader(self.options)
        return KinesisSpoutStreamReader(self.options)


def check_stream_exists(config: SpoutConfig) -> None:
    """Raise ``StreamNotFoundError`` at ``load()`` when Kinesis says the stream does not exist (instead of a long
    Py4J trace once the query runs). When Kinesis cannot be asked now (no credentials here, no network), nothing is
    raised: the query reports it when it runs."""
    try:
        client = make_client(config.region, config.endpoint_url, read_timeout_s=5.0, credentials=config.credentials)
        client.describe_stream_summary(StreamName=config.stream_name)
    except Exception as exc:  # noqa: BLE001 - only "not found" is an answer; the rest is checked when reading
        err = translate(exc, f"describing stream {config.stream_name!r}")
        if isinstance(err, StreamNotFoundError):
            where = f"endpoint {config.endpoint_url}" if config.endpoint_url else f"region {config.region or 'default'}"
            raise StreamNotFoundError(
                f"stream {config.stream_name!r} does not exist at {where}; check the options streamName, region "
                f"and endpointUrl; if the stream was deleted, this query's checkpoint location and the app's "
                f"ZooKeeper checkpoints refer to the old stream: start with a new checkpoint location and a new "
                f"appName, or reset the checkpoints (kinesis-spout checkpoints reset)", code=err.code) from exc
        log.debug("could not check that stream %r exists at load(): %s", config.stream_name, err)


class ShardRange(InputPartition):
    """One shard's part of a micro-batch: records after ``start`` up to and including ``end``.

    ``arrow`` holds the records the driver already read (an Arrow IPC stream), or None when the executor must
    read them from Kinesis (a batch replayed by a new query process).
    """

    def __init__(self, shard_id: str, start: str, end: str, arrow: bytes | None,
                 hash_range: HashKeyRange | None = None) -> None:
        super().__init__((shard_id, start, end))
        self.shard_id = shard_id
        self.start = start
        self.end = end
        self.arrow = arrow
        self.hash_range = hash_range  # the shard's hash keys: user records of aggregates outside them are dropped

    def __repr__(self) -> str:
        kept = f"{len(self.arrow)} bytes kept" if self.arrow is not None else "to read"
        return f"ShardRange({self.shard_id}, ({self.start}, {self.end}], {kept})"


@dataclass
class _ShardCursor:
    """Driver-side reading of one shard: where the last planned batch ended and what was read beyond it."""

    shard_id: str
    position: Position
    getter: ShardGetter
    pending: list[Record] = field(default_factory=list)
    next_poll: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)
    at_tip: bool = False   # an empty read at the stream's tip since prepareForTriggerAvailableNow
    frozen: bool = False   # Trigger.AvailableNow: records past the run's start time were seen; read no further
    busy: bool = False     # the last read returned records: read ahead while Spark runs the batch
    ahead: Future[None] | None = None  # the read-ahead in progress

    @property
    def readable(self) -> bool:
        """Whether a GetRecords call may be made now or later (nothing waiting, not ended, not stopped)."""
        return not self.pending and not self.getter.shard_end and not self.frozen and self.ahead is None

    def admissible(self, cutoff: datetime | None) -> int:
        """How many of the pending records a batch may take: all of them, or under Trigger.AvailableNow those
        before the first one that arrived after ``cutoff`` (the rest stay pending, never dropped)."""
        if cutoff is None:
            return len(self.pending)
        cut = first_after((r.approximate_arrival_timestamp for r in self.pending), cutoff)
        return len(self.pending) if cut is None else cut

    def caught_up(self, cutoff: datetime | None) -> bool:
        """Trigger.AvailableNow: nothing left of what was in the shard when the run started."""
        return (self.ahead is None and self.admissible(cutoff) == 0
                and (self.getter.shard_end or self.frozen or self.at_tip))


def skip_consumed(records: list[Record], position: Position) -> list[Record]:
    """``records`` without those ``position`` already consumed: the user records of the aggregate a read started
    at, up to the position's sub-sequence. Other reads have none, and only the first records are looked at."""
    if not position.inside_aggregate:
        return records
    i = 0
    while i < len(records) and consumed(records[i].key, position):
        i += 1
    return records[i:] if i else records


class KinesisSpoutStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader Spark drives: offsets and batch planning on the driver, ``read`` on executors.

    The constructor does no I/O. Kinesis and ZooKeeper clients are made on first use in the driver's planner
    process and never pickled (executors get only the configuration); ``stop()`` releases them and is idempotent.
    """

    available_now_margin: timedelta = AVAILABLE_NOW_MARGIN

    def __init__(self, options: Mapping[str, str]) -> None:
        self.config, self.limits = parse_source_options(options)
        self._reset_driver_state()

    def _reset_driver_state(self) -> None:
        self._client: Any = None
        self._store: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._shards: dict[str, Shard] = {}
        self._listed_at: float | None = None
        self._cursors: dict[str, _ShardCursor] = {}
        self._kept: dict[tuple[str, str, str], list[Record]] = {}
        self._written: dict[str, str] = {}
        self._written_at: dict[str, float] = {}
        self._cutoff: datetime | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self.limits = state["limits"]
        self._reset_driver_state()

    # -- clients -------------------------------------------------------------------------------------------------
    def _kinesis(self) -> Any:
        if self._client is None:
            self._client = make_client(self.config.region, self.config.endpoint_url,
                                       credentials=self.config.credentials)
        return self._client

    def _checkpoints(self) -> Any:
        if self._store is None:
            from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

            store = ZooKeeperCheckpointStore.from_config(self.config)
            store.open()
            self._store = store
        return self._store

    def _list_shards(self, force: bool = False) -> dict[str, Shard]:
        """The owned shards, listed again every ``shardSyncIntervalS`` (or when ``force``; a shard that ends forces
        the next listing, to find its children)."""
        now = time.monotonic()
        if force or self._listed_at is None or now - self._listed_at >= self.config.shard_sync_interval_s:
            cfg = self.config
            mine = owned_shards(list_shards(self._kinesis(), cfg.stream_name), cfg.task_index, cfg.task_count)
            self._shards = {s.shard_id: s for s in mine}
            self._listed_at = now
        return self._shards

    def _hash_range(self, shard_id: str) -> HashKeyRange | None:
        """The shard's hash key range, from the listing, for its getters (None: no user record is dropped, with
        ``dropForeignUserRecords=false`` or for a shard no longer listed)."""
        drop = self.config.drop_foreign_user_records
        return drop_range(self.config.stream_name, shard_id, self._list_shards().get(shard_id) if drop else None, drop)

    # -- Spark's calls on the driver -----------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, str]:
        """Where a new query starts: each shard's ZooKeeper checkpoint, else ``initialPosition``.

        Who calls: Spark, for a query without offsets in its checkpoint location (and again to replay its first
        batch). A shard without a checkpoint whose parent has one is a child of a reshard: it starts at
        ``TRIM_HORIZON``. ``LATEST`` stays symbolic here; the first batch pins it to a time.
        """
        shards = self._list_shards(force=True)
        stored = self._checkpoints().list()
        positions = initial_positions({s: shard.parents for s, shard in shards.items()}, stored, self.config,
                                      {s for s, shard in shards.items() if shard.closed})
        for shard_id, checkpoint in stored.items():
            if shard_id in positions and (checkpoint.sequence_number is not None or checkpoint.shard_end):
                self._written[shard_id] = positions[shard_id].encode()
        log.info("stream %r, app %r: new query starts at %s", self.config.stream_name, self.config.app_name,
                 encode_offset(positions))
        return encode_offset(positions)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerTrigger`` as ReadMaxRows, else ``maxBytesPerTrigger`` as ReadMaxBytes (both apply when
        both are set), else everything available."""
        if self.limits.max_records is not None:
            return ReadMaxRows(self.limits.max_records)
        if self.limits.max_bytes is not None:
            return ReadMaxBytes(self.limits.max_bytes)
        return super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: the run ends when every shard is read to its tip, or to its first record that
        arrived more than ``available_now_margin`` after this call (so a busy stream cannot keep it going).

        Who calls: Spark, once before the first batch of an AvailableNow query.
        """
        self._cutoff = datetime.now(timezone.utc) + self.available_now_margin
        self._listed_at = None
        for cursor in self._cursors.values():
            cursor.at_tip = False

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        """The end of the next batch: the records after ``start`` read so far (read ahead, or by one GetRecords per
        due shard now), cut by ``limit``. Returns ``start`` when there is nothing new (under AvailableNow: when the
        run is complete).

        Who calls: Spark, only after every batch up to ``start`` completed, so ``start`` is written to ZooKeeper
        first (this is also how the last batch of an AvailableNow run reaches ZooKeeper). On an idle stream it
        waits IDLE_WAIT_S for new records before answering (Spark would otherwise ask again every 10 ms); under
        AvailableNow it waits until there is a batch or the run is complete.
        """
        positions = parse_offset(start, "start offset")
        self._save(positions, force=False)
        self._forget_kept(positions)
        max_rows, max_bytes = self._budget(limit)
        deadline = None if self._cutoff is not None else time.monotonic() + IDLE_WAIT_S
        while True:
            end, caught_up, wake = self._plan(positions, max_rows, max_bytes)
            if end != positions:
                return encode_offset(end)
            if self._cutoff is not None and caught_up:
                self._save(positions, force=True)
                return start
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return start
            wake = now + MIN_POLL_INTERVAL_S if wake is None else wake
            pause = max(0.0, min(wake, deadline if deadline is not None else wake) - now)
            ahead = [c.ahead for c in self._cursors.values() if c.ahead is not None and not c.ahead.done()]
            if ahead:
                wait(ahead, timeout=pause, return_when=FIRST_COMPLETED)
            else:
                time.sleep(pause)

    def _budget(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, self.limits.max_bytes
        if isinstance(limit, ReadMaxBytes):
            return self.limits.max_records, limit.max_bytes
        return None, None  # ReadAllAvailable (Trigger.Once, ...) ignores the configured limits

    def _plan(self, positions: dict[str, Position], max_rows: int | None, max_bytes: int | None
              ) -> tuple[dict[str, Position], bool, float | None]:
        """One planning round: poll due shards, admit records, start reading ahead on busy shards.

        Returns (end, all caught up, next poll time). A shard whose read-ahead is still running sits this round out.
        """
        shards = self._list_shards()
        for gone in [s for s in self._cursors if s not in shards]:
            del self._cursors[gone]  # no longer owned (or listed): its read-ahead, if any, is forgotten
        starts = {s: positions[s] for s in shards if s in positions}
        end = dict(positions)
        for shard_id, pos in self._new_shard_positions([s for s in shards if s not in positions], positions).items():
            end[shard_id] = pos  # a shard joins the query at its start; it is read from the next batch on
            if pos.sequence_number is not None:  # nothing of it belongs to the joining batch
                self._kept[(shard_id, TRIM_HORIZON.encode(), pos.encode())] = []
        for shard_id, pos in starts.items():
            if pos.unresolved:
                end[shard_id] = at_timestamp(datetime.now(timezone.utc) - LATEST_MARGIN)
        blocked = waiting_for_parents({s: shard.parents for s, shard in shards.items()}, starts, shards)
        cursors = [self._cursor(s, pos) for s, pos in starts.items()
                   if s not in blocked and not pos.ended and not pos.unresolved]
        everyone = cursors
        cursors = self._collect(cursors)
        now = time.monotonic()
        self._fetch([c for c in cursors if c.readable and c.next_poll <= now])
        cutoff = self._cutoff
        if cutoff is not None:
            for cursor in cursors:
                if cursor.admissible(cutoff) < len(cursor.pending):
                    cursor.frozen = True  # records past the run's start were seen: read no further
        counts = allocate({c.shard_id: [r.size for r in c.pending[:c.admissible(cutoff)]] for c in cursors},
                          max_rows, max_bytes)
        for cursor in cursors:
            n = counts[cursor.shard_id]
            taken, cursor.pending = cursor.pending[:n], cursor.pending[n:]
            new = end_after([r.key for r in taken[-1:]], cursor.pending[0].key if cursor.pending else None,
                            cursor.position)
            if cursor.getter.shard_end and not cursor.pending:  # every record of the shard was admitted
                new = new.finished()
                self._listed_at = None  # look for the children of the closed shard
                log.info("shard %s is closed and was read to its end", cursor.shard_id)
            if new != cursor.position:
                self._kept[(cursor.shard_id, cursor.position.encode(), new.encode())] = taken
                cursor.position = end[cursor.shard_id] = new
        for cursor in cursors:
            if cursor.busy and cursor.readable:
                cursor.ahead = self._threads().submit(self._read_ahead, cursor)
        waiting = [c.next_poll for c in cursors if c.readable and not (cutoff and c.at_tip)]
        return end, all(c.caught_up(cutoff) for c in everyone), min(waiting, default=None)

    def _new_shard_positions(self, shard_ids: list[str], positions: Mapping[str, Position]
                             ) -> dict[str, Position]:
        """Where shards new to this query start (children of a reshard, shards this task newly owns): by the
        lineage rule, from their ZooKeeper checkpoints, their parents in this query or in ZooKeeper, else the
        initial position. A shard whose checkpoint cannot be read now is left out of this round (never guessed)."""
        if not shard_ids:
            return {}
        parents = {s: self._shards[s].parents for s in shard_ids}
        stored: dict[str, Checkpoint] = {}
        for parent in {p for ps in parents.values() for p in ps}:
            if parent in positions:  # this query reads the parent: where it stands decides what it hands down
                stored[parent] = lineage_checkpoint(parent, positions[parent])
        out: dict[str, Position] = {}
        for shard_id in shard_ids:
            try:
                for wanted in (shard_id, *(p for p in parents[shard_id] if p not in stored)):
                    checkpoint = self._checkpoints().load(wanted)
                    if checkpoint is not None:
                        stored[wanted] = checkpoint
            except CheckpointError as exc:
                log.warning("shard %s is new to this query but its checkpoint cannot be read (%s); it waits for the "
                            "next batch", shard_id, exc)
                continue
            out[shard_id] = initial_positions({shard_id: parents[shard_id]}, stored, self.config,
                                              first_start=False)[shard_id]
            log.info("shard %s is new to this query: it starts at %s", shard_id, out[shard_id].encode())
        return out

    def _cursor(self, shard_id: str, position: Position) -> _ShardCursor:
        """The shard's cursor, made afresh when Spark asks from somewhere else than where it stands."""
        cursor = self._cursors.get(shard_id)
        if cursor is None or cursor.position != position:
            getter = ShardGetter(self._kinesis(), self.config.stream_name, shard_id, position,
                                 self.config.max_records_per_call, deaggregate=self.config.deaggregate,
                                 hash_range=self._hash_range(shard_id))
            cursor = self._cursors[shard_id] = _ShardCursor(shard_id, position, getter)
        return cursor

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_FETCH_THREADS, thread_name_prefix="kinesis-source-read")
        return self._pool

    def _fetch(self, cursors: Sequence[_ShardCursor]) -> None:
        """One GetRecords per cursor (in parallel when several); errors that retrying cannot fix are raised."""
        if len(cursors) == 1:
            self._fetch_one(cursors[0])
            return
        for future in [self._threads().submit(self._fetch_one, c) for c in cursors]:
            future.result()

    def _collect(self, cursors: Sequence[_ShardCursor]) -> list[_ShardCursor]:
        """The cursors not reading ahead any more (a read-ahead's error is raised here, on Spark's thread)."""
        ready = []
        for cursor in cursors:
            if cursor.ahead is not None:
                if not cursor.ahead.done():
                    continue
                future, cursor.ahead = cursor.ahead, None
                future.result()
            ready.append(cursor)
        return ready

    def _read_ahead(self, cursor: _ShardCursor) -> None:
        """On a pool thread, while Spark runs the batch: the shard's next GetRecords, when Kinesis allows it."""
        time.sleep(max(0.0, cursor.next_poll - time.monotonic()))
        self._fetch_one(cursor)

    def _fetch_one(self, cursor: _ShardCursor) -> None:
        """One GetRecords into the cursor's pending records; sets when the shard may be polled next (Kinesis'
        pace, the empty-read backoff, or a retry backoff after a retriable error, which is not raised)."""
        try:
            result = cursor.getter.fetch()
        except KinesisError as exc:
            if not exc.retriable or cursor.backoff.failures >= MAX_RETRIES:
                raise
            pause = cursor.backoff.next_delay()
            log.warning("%s; trying %s again in %.2f s", exc, cursor.shard_id, pause)
            cursor.next_poll = time.monotonic() + pause
            return
        cursor.backoff.reset()
        cursor.pending.extend(skip_consumed(result.records, cursor.position))
        # a reply whose user records all belonged to other shards was not empty: the shard may hold more
        cursor.busy = bool(result.fetched)
        at_tip = not result.fetched and result.millis_behind_latest in (0, None)
        cursor.at_tip = cursor.at_tip or at_tip
        pause = self.config.empty_record_backoff_s if at_tip else MIN_POLL_INTERVAL_S
        cursor.next_poll = time.monotonic() + pause

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        """One partition per shard with records in the batch, carrying the records read by ``latestOffset``."""
        first, last = parse_offset(start, "start offset"), parse_offset(end, "end offset")
        out: list[InputPartition] = []
        for shard_id in sorted(last):
            a, b = first.get(shard_id, TRIM_HORIZON), last[shard_id]
            if range_is_empty(a, b):
                continue
            records = self._kept.pop((shard_id, a.encode(), b.encode()), None)
            if records is not None and not records:
                continue  # a shard that joined the query in this batch at a stored checkpoint
            arrow = _arrow_bytes(self.config.stream_name, records) if records is not None else None
            out.append(ShardRange(shard_id, a.encode(), b.encode(), arrow, self._hash_range(shard_id)))
        return out

    def commit(self, end: dict[str, str]) -> None:
        """Spark completed every batch up to ``end``: write it to ZooKeeper as the shards' checkpoints."""
        positions = parse_offset(end, "committed offset")
        self._save(positions, force=False)
        self._forget_kept(positions)

    def stop(self) -> None:
        """Release the clients and threads of the driver. Idempotent."""
        store, self._store = self._store, None
        pool, self._pool = self._pool, None
        self._client = None
        self._cursors.clear()
        self._kept.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if store is not None:
            store.close()

    # -- ZooKeeper checkpoints -----------------------------------------------------------------------------------
    def _save(self, positions: Mapping[str, Position], force: bool) -> None:
        """Write positions that changed, at most once per ``checkpointIntervalS`` per shard unless ``force``.

        A checkpoint already ahead in ZooKeeper (another query, or the spout) is left alone; an unreachable
        ZooKeeper is logged and tried again at the next batch: Spark's checkpoint still holds the truth.
        """
        now = time.monotonic()
        for shard_id, pos in sorted(positions.items()):
            text = pos.encode()
            checkpoint = as_checkpoint(shard_id, pos)
            if checkpoint is None or self._written.get(shard_id) == text:
                continue
            if not force and now - self._written_at.get(shard_id, -1e18) < self.config.checkpoint_interval_s \
                    and checkpoint.sequence_number is not None:
                continue
            try:
                self._checkpoints().save(checkpoint.stamped(self.config.worker_id))
            except CheckpointConflict as exc:
                log.info("ZooKeeper is ahead of this query: %s", exc)
            except CheckpointError as exc:
                log.warning("could not write checkpoints to ZooKeeper (trying again after the next batch): %s", exc)
                return
            self._written[shard_id] = text
            self._written_at[shard_id] = now

    def _forget_kept(self, positions: Mapping[str, Position]) -> None:
        """Drop kept records of batches that are done (their end is not beyond ``positions``)."""
        for key in [k for k in self._kept if k[0] in positions
                    and not Position.parse(k[2]).is_beyond(positions[k[0]])]:
            del self._kept[key]

    # -- executors -------------------------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The partition's records as Arrow batches: those the driver kept, or read again from Kinesis."""
        import pyarrow as pa

        assert isinstance(partition, ShardRange)
        if partition.arrow is not None:
            yield from pa.ipc.open_stream(pa.BufferReader(partition.arrow))
            return
        records = self.replay(partition.shard_id, Position.parse(partition.start),
                              Position.parse(partition.end), partition.hash_range)
        yield from records_to_arrow(self.config.stream_name, records).to_batches()

    def replay(self, shard_id: str, start: Position, end: Position,
               hash_range: HashKeyRange | None = None) -> list[Record]:
        """Read exactly the records of ``(start, end]`` of a shard from Kinesis (a batch replayed after a restart)."""
        cfg = self.config
        return read_range(_executor_client(cfg.region, cfg.endpoint_url, cfg.credentials), cfg, shard_id, start, end,
                          hash_range)


def read_range(client: Any, cfg: SpoutConfig, shard_id: str, start: Position, end: Position,
               hash_range: HashKeyRange | None = None) -> list[Record]:
    """Read exactly the (user) records of ``(start, end]`` of a shard from Kinesis, paced as Kinesis allows.

    Who calls: executors, for a batch whose records are not at hand (a replay, a task that lost the race to record
    its end). Raises ``KinesisError`` when the shard runs out before ``end`` (a re-created stream, expired records).
    """
    getter = PacedGetter(ShardGetter(client, cfg.stream_name, shard_id, start,
                                     cfg.max_records_per_call, deaggregate=cfg.deaggregate, hash_range=hash_range),
                         MIN_POLL_INTERVAL_S, MAX_RETRIES)
    out: list[Record] = []
    if range_is_empty(start, end):
        return out
    high = end.key
    assert high is not None
    while True:
        result = getter.fetch()
        for record in result.records:
            if record.key > high:
                return out
            if in_range(record.key, start, end):  # the aggregate a replay starts at: skip what start consumed
                out.append(record)
        if out and out[-1].key.sequence == high.sequence and (out[-1].key == high or not end.inside_aggregate):
            return out  # a Kinesis record comes whole in one reply: nothing of the end's record is left
        if result.shard_end or not result.fetched and result.millis_behind_latest in (0, None):
            raise KinesisError(
                f"replaying {shard_id} of {cfg.stream_name!r} from {start.encode()} to {end.encode()}: the "
                f"shard has no more records after {out[-1].sequence_number if out else start.encode()}; was "
                f"the stream re-created or did the records expire? Start the query afresh (new checkpoint "
                f"location) to continue from ZooKeeper's checkpoints")


_clients: dict[tuple[str | None, str | None, AwsCredentials | None], Any] = {}
_clients_lock = threading.Lock()


def _executor_client(region: str | None, endpoint_url: str | None, credentials: AwsCredentials | None = None) -> Any:
    """One Kinesis client per Python worker process, endpoint and identity (boto3 clients are thread-safe; making
    one costs ~0.1 s), for the tasks' reads. Guarded by ``_clients_lock``."""
    key = (region, endpoint_url, credentials)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = make_client(region, endpoint_url, credentials=credentials)
        return client


def _arrow_bytes(stream_name: str, records: Sequence[Record]) -> bytes:
    """Records as an Arrow IPC stream in the source's columns (what ``read`` yields back as batches)."""
    import pyarrow as pa

    table = records_to_arrow(stream_name, records)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
