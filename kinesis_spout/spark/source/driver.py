"""The stream reader of ``readMode=driver`` (the default): the driver reads Kinesis, the tasks get the records.

How a micro-batch is made. Kinesis cannot say where a shard's data ends without reading it, so the driver reads
(:mod:`kinesis_spout.spark.source.driver_planner`, with the records kept as the columns GetRecords' replies were
decoded into: :mod:`kinesis_spout.spark.source.driver_columns`) and ``partitions`` hands the kept records to the
tasks as Arrow bytes built from those columns, several shards' to a partition (``recordsPerPartition``), so the
executors do not read Kinesis again. A batch whose records are not kept (a replay after a restart) is read again
between its exact offsets: ``AFTER_SEQUENCE_NUMBER`` the start, up to and including the end. Offsets are described in
:mod:`kinesis_spout.spark.source.offsets`.

Checkpoints. Spark's checkpoint location is the truth for a query. When a batch is done (``commit``, and also the
next ``latestOffset``, which Spark calls only after the batch before it completed) its end is written to
ZooKeeper as each shard's checkpoint, so a query started without a checkpoint location, the spout, or the
``kinesis-spout`` command resume there.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import TRIM_HORIZON, Position
from kinesis_spout.records import Record
from kinesis_spout.spark.source.clients import WORKER_CLIENTS
from kinesis_spout.spark.source.codec import decode_batches, encode_records, record_batches
from kinesis_spout.spark.source.driver_columns import ColumnDriverPlanner
from kinesis_spout.spark.source.lag import latest_offset
from kinesis_spout.spark.source.offsets import (
    encode_offset,
    parse_offset,
    range_is_empty,
)
from kinesis_spout.spark.source.packing import pack
from kinesis_spout.spark.source.planning import (
    AVAILABLE_NOW_MARGIN,
    IDLE_WAIT_S,
    PlannedReader,
    default_read_limit,
    read_budget,
)
from kinesis_spout.spark.source.rows import join_rows, rows_bytes
from kinesis_spout.spark.source.shard_reads import read_range, stream_gone

__all__ = ["TASK_BYTES", "KeptRecords", "KinesisSpoutStreamReader", "ShardRange", "kept_partitions"]

log = logging.getLogger(__name__)

#: The most Arrow bytes of kept records in one partition: a task travels with its partition, and Spark warns about
#: every task over 1000 KiB ("contains a task of very large size"); the rest of the task stays well under the margin.
TASK_BYTES = 768 << 10

#: Why a driver-read query knows its stream, in the error of a stream deleted under it (:func:`stream_gone`).
KNOWN_ON_DRIVER = "its checkpoint location or the app's ZooKeeper checkpoints hold positions in it"



class ShardRange(InputPartition):
    """One shard's part of a micro-batch that its task reads from Kinesis: the records after ``start`` up to and
    including ``end`` (a batch replayed by a new query process, whose driver did not read it)."""

    def __init__(self, shard_id: str, start: str, end: str, hash_range: HashKeyRange | None = None) -> None:
        super().__init__((shard_id, start, end))
        self.shard_id = shard_id
        self.start = start
        self.end = end
        self.hash_range = hash_range  # the shard's hash keys: user records of aggregates outside them are dropped

    def __repr__(self) -> str:
        return f"ShardRange({self.shard_id}, ({self.start}, {self.end}], to read)"


class KeptRecords(InputPartition):
    """Records the driver read for a micro-batch, of one or more shards, as an Arrow IPC stream (``arrow``): each
    shard's records in order, the shards one after the other. ``ranges``: each shard's ``(shard_id, start, end)``
    (a shard whose records are too many bytes for one task spans several partitions: :func:`kept_partitions`)."""

    def __init__(self, ranges: Sequence[tuple[str, str, str]], arrow: bytes) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)
        self.arrow = arrow

    def __repr__(self) -> str:
        shards = ", ".join(shard_id for shard_id, _, _ in self.ranges)
        return f"KeptRecords({shards}: {len(self.arrow)} bytes)"


def kept_partitions(stream: str, runs: Sequence[Sequence[tuple[str, str, str, Sequence[Record]]]]
                    ) -> list[KeptRecords]:
    """The partitions of the kept records of a batch: one per run of :func:`~kinesis_spout.spark.source.packing.pack`
    (``(shard_id, start, end, records)`` each), cut in order into partitions of at most :data:`TASK_BYTES` of Arrow
    (a partition of one record may be larger), so that no task makes Spark warn. Who calls: ``partitions``."""
    out: list[KeptRecords] = []
    for run in runs:
        ranges = [(shard_id, a, b) for shard_id, a, b, _ in run]
        out += _sized(stream, ranges, join_rows([records for *_, records in run]))
    return out


def _sized(stream: str, ranges: list[tuple[str, str, str]], records: Sequence[Record]) -> list[KeptRecords]:
    """``records`` (in order) as one partition, or as several of at most :data:`TASK_BYTES` each."""
    arrow = encode_records(stream, records)
    if len(arrow) <= TASK_BYTES or len(records) < 2:
        return [KeptRecords(ranges, arrow)]
    parts = -(-len(arrow) // TASK_BYTES)
    step = -(-len(records) // parts)
    return [kept for i in range(0, len(records), step) for kept in _sized(stream, ranges, records[i:i + step])]


class KinesisSpoutStreamReader(PlannedReader[ColumnDriverPlanner], DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader Spark drives: offsets and batch planning on the driver, ``read`` on executors.

    The constructor does no I/O. Kinesis and ZooKeeper clients are made on first use in the driver's planner
    process and never pickled (executors get only the configuration and read with their worker process's
    clients); ``stop()`` releases them and is idempotent. Spark calls the planning methods from one thread.
    """

    available_now_margin: timedelta = AVAILABLE_NOW_MARGIN

    planner_type = ColumnDriverPlanner

    # -- Spark's calls on the driver -----------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, str]:
        """Where a new query starts: each shard's ZooKeeper checkpoint, else ``initialPosition``.

        Who calls: Spark, for a query without offsets in its checkpoint location (and again to replay its first
        batch). A shard without a checkpoint whose parent has one is a child of a reshard: it starts at
        ``TRIM_HORIZON``. ``LATEST`` stays symbolic here; the first batch pins it to a time.
        """
        positions = self._planning.initial_positions()
        log.info("stream %r, app %r: new query starts at %s", self.config.stream_name, self.config.app_name,
                 encode_offset(positions))
        return encode_offset(positions)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerTrigger`` as ReadMaxRows, else ``maxBytesPerTrigger`` as ReadMaxBytes (both apply when
        both are set), else everything available."""
        return default_read_limit(self.limits)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: the run ends when every shard is read to its tip, or to its first record that
        arrived more than ``available_now_margin`` after this call (so a busy stream cannot keep it going).

        Who calls: Spark, once before the first batch of an AvailableNow query.
        """
        self._planning.start_available_now(self.available_now_margin)
        self._planner.restart_tips()

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        """The end of the next batch: the records after ``start`` read so far (read ahead, or by one GetRecords per
        due shard now), cut by ``limit``. Returns ``start`` when there is nothing new (under AvailableNow: when the
        run is complete).

        Who calls: Spark, only after every batch up to ``start`` completed, so ``start`` is written to ZooKeeper
        first (this is also how the last batch of an AvailableNow run reaches ZooKeeper). On an idle stream it
        waits IDLE_WAIT_S for new records before answering (Spark would otherwise ask again every 10 ms); under
        AvailableNow it waits until there is a batch or the run is complete. A stream that was deleted (or deleted
        and re-created) under the query is an error that says what to do (:func:`stream_gone`, as executor reads).
        """
        try:
            return self._latest_offset(start, limit)
        except KinesisError as exc:
            raise stream_gone(exc, self.config, KNOWN_ON_DRIVER) from exc

    def _latest_offset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        positions = parse_offset(start, "start offset")
        self._planning.save(positions, force=False)
        self._planner.forget_kept(positions)
        max_rows, max_bytes = read_budget(limit, self.limits)
        cutoff = self._planning.cutoff
        deadline = None if cutoff is not None else time.monotonic() + IDLE_WAIT_S
        while True:
            end, caught_up, wake = self._planner.plan(positions, max_rows, max_bytes)
            if end != positions:
                return encode_offset(end)
            if cutoff is not None and caught_up:
                self._planning.save(positions, force=True)
                return start
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return start
            wake = now + MIN_POLL_INTERVAL_S if wake is None else wake
            self._planner.wait(max(0.0, min(wake, deadline if deadline is not None else wake) - now))

    def reportLatestOffset(self) -> dict[str, Any]:
        """What Spark shows as the source's ``latestOffset`` in every progress: per shard the position after the
        last record read (read ahead included), its last read's MillisBehindLatest, the arrival time of its last
        record and the records read and not in a planned batch (:mod:`kinesis_spout.spark.source.lag`). Who calls: Spark
        (PySpark 4.2+), after each ``latestOffset``, on the same thread."""
        return latest_offset(self.config.stream_name, self.config.app_name, self._planner.lags())

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        """The batch's partitions: the records ``latestOffset`` read and kept, several shards' to a partition up to
        ``recordsPerPartition`` records (:func:`~kinesis_spout.spark.source.packing.pack`; a shard's records are
        never split); a shard whose records were not kept here (a batch replayed after a restart) is a partition
        of its own that its task reads from Kinesis. A stream deleted under the query: as in :meth:`latestOffset`."""
        try:
            return self._partitions(start, end)
        except KinesisError as exc:
            raise stream_gone(exc, self.config, KNOWN_ON_DRIVER) from exc

    def _partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        first, last = parse_offset(start, "start offset"), parse_offset(end, "end offset")
        kept: list[tuple[tuple[str, str, str, Sequence[Record]], int, int]] = []
        out: list[InputPartition] = []
        for shard_id in sorted(last):
            pa, pb = first.get(shard_id, TRIM_HORIZON), last[shard_id]
            if range_is_empty(pa, pb):
                continue
            a, b = pa.encode(), pb.encode()
            records = self._planner.take_kept(shard_id, a, b)
            if records is None:
                out.append(ShardRange(shard_id, a, b, self._planning.hash_range(shard_id)))
            elif records:  # (none: a shard that joined the query in this batch at a stored checkpoint)
                kept.append(((shard_id, a, b, records), len(records), rows_bytes(records)))
        return out + kept_partitions(self.config.stream_name, pack(kept, self.limits.records_per_partition))

    def commit(self, end: dict[str, str]) -> None:
        """Spark completed every batch up to ``end``: write it to ZooKeeper as the shards' checkpoints."""
        positions = parse_offset(end, "committed offset")
        self._planning.save(positions, force=False)
        self._planner.forget_kept(positions)

    def stop(self) -> None:
        """Release the clients and threads of the driver. Idempotent."""
        self._planner.close()
        self._planning.close()

    # -- executors -------------------------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The partition's records as Arrow batches: those the driver kept, or read again from Kinesis."""
        if isinstance(partition, KeptRecords):
            yield from decode_batches(partition.arrow)
            return
        assert isinstance(partition, ShardRange)
        records = self.replay(partition.shard_id, Position.parse(partition.start),
                              Position.parse(partition.end), partition.hash_range)
        yield from record_batches(self.config.stream_name, records)

    def replay(self, shard_id: str, start: Position, end: Position,
               hash_range: HashKeyRange | None = None) -> Sequence[Record]:
        """Read exactly the records of ``(start, end]`` of a shard from Kinesis (a batch replayed after a restart),
        with the worker process's client. Who calls: ``read``, on an executor."""
        try:
            client = WORKER_CLIENTS.kinesis(self.config.kinesis)
            return read_range(client, self.config.stream_name, self.config.reading, shard_id, start, end, hash_range)
        except KinesisError as exc:
            raise stream_gone(exc, self.config, "a batch was planned on it") from exc
