"""The stream reader of ``readMode=executors``: the driver plans, the executors read Kinesis, ZooKeeper makes
every replay exact.

The driver's planning is :mod:`kinesis_spout.spark.source.executor_planner`; what a task does is
:mod:`kinesis_spout.spark.source.executor_read`; the model (offsets, recorded ends, cuts) is in
:mod:`kinesis_spout.spark.source.executor_batches`. Tasks use one Kinesis client and one ZooKeeper client per
Python worker process (:data:`kinesis_spout.spark.source.clients.WORKER_CLIENTS`), not per task.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from kinesis_spout.errors import KinesisError
from kinesis_spout.spark.bookkeeping.batch_store import ZooKeeperBatchStore
from kinesis_spout.spark.source.clients import WORKER_CLIENTS
from kinesis_spout.spark.source.codec import record_batches
from kinesis_spout.spark.source.executor_batches import PlannedBatch
from kinesis_spout.spark.source.executor_planner import ExecutorPlanner
from kinesis_spout.spark.source.executor_read import ShardsTask, ShardTask, read_task_batch, stream_gone
from kinesis_spout.spark.source.lag import ShardLag, latest_offset
from kinesis_spout.spark.source.offsets import encode_offset
from kinesis_spout.spark.source.planning import (
    AVAILABLE_NOW_MARGIN,
    IDLE_WAIT_S,
    PlannedReader,
    default_read_limit,
    read_budget,
)

__all__ = ["ABANDONED_AFTER_S", "HEARTBEAT_S", "ExecutorStreamReader"]

log = logging.getLogger(__name__)

#: A running query's driver writes its heartbeat (the mtime of ``batches/<query>``) this often at most.
HEARTBEAT_S = 600.0
#: Recorded ends of another query of the app whose heartbeat is older than this are deleted (a week: far longer
#: than any trigger interval, so only a stopped query can be that quiet).
ABANDONED_AFTER_S = 7 * 24 * 3600.0


class ExecutorStreamReader(PlannedReader[ExecutorPlanner], DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of ``readMode=executors`` (see the module docstring).

    The constructor does no I/O. The driver's clients live in its planning, made on first use and never pickled;
    ``read`` on an executor takes the worker process's clients. Spark calls the planning methods from one thread.
    ``heartbeat_s`` and ``abandoned_after_s`` default to ``HEARTBEAT_S`` and ``ABANDONED_AFTER_S``.
    """

    available_now_margin: timedelta = AVAILABLE_NOW_MARGIN
    heartbeat_s: float = HEARTBEAT_S
    abandoned_after_s: float = ABANDONED_AFTER_S

    planner_type = ExecutorPlanner

    # -- Spark's calls on the driver -----------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        """A new query: nothing planned (batch -1), each shard at its ZooKeeper checkpoint or ``initialPosition``,
        and a new query id that names this query's recorded ends."""
        positions = self._planning.initial_positions()
        planned = PlannedBatch(uuid.uuid4().hex[:16], -1, positions)
        log.info("stream %r, app %r: new query %s (executor reads) starts at %s", self.config.stream_name,
                 self.config.app_name, planned.query, encode_offset(positions))
        return planned.encode()

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerTrigger`` as ReadMaxRows, else ``maxBytesPerTrigger`` as ReadMaxBytes (both apply when
        both are set), else everything available."""
        return default_read_limit(self.limits)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: the run ends when every shard is read to its tip, or to its first record that
        arrived more than ``available_now_margin`` after this call. Who calls: Spark, once before the first batch."""
        self._planning.start_available_now(self.available_now_margin)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch's offset: each shard's start (where the last batch's task ended) and the per-shard
        limits; ``start`` itself when there is nothing to read (or, under AvailableNow, the run is complete).

        Who calls: Spark, after every batch up to ``start`` completed. Idle streams are probed with
        ``GetRecords(Limit=1)`` per shard for up to ``IDLE_WAIT_S`` before answering. A stream that was deleted
        (or deleted and re-created) since the query read it is an error that says what to do.
        """
        last = PlannedBatch.parse(start, "start offset")
        self._planner.heartbeat(last.query, self.heartbeat_s, self.abandoned_after_s, last.batch)
        max_rows, max_bytes = read_budget(limit, self.limits)
        try:
            planned = self._planner.plan(last, max_rows, max_bytes, IDLE_WAIT_S, self.limits.shards_per_task)
        except KinesisError as exc:
            known = f"its checkpoint location holds batch {last.batch}" if last.batch >= 0 else "it started on it"
            raise stream_gone(exc, self.config, known) from exc
        self._latest = last if planned is None else planned
        return start if planned is None else planned.encode()

    def reportLatestOffset(self) -> dict[str, Any]:
        """What Spark shows as the source's ``latestOffset`` in every progress: per shard where the next batch
        starts, and MillisBehindLatest 0 for the shards whose last task reached the tip (the driver reads no
        records here, so the lag of the others is not known; :mod:`kinesis_spout.spark.source.lag`). Who calls: Spark
        (PySpark 4.2+), after each ``latestOffset``."""
        planned: PlannedBatch | None = getattr(self, "_latest", None)
        at_tip = self._planner.at_tip(planned.batch) if planned is not None else frozenset()
        shards = [ShardLag(s, pos.encode(), 0 if s in at_tip else None)
                  for s, pos in (planned.starts.items() if planned is not None else ())]
        return latest_offset(self.config.stream_name, self.config.app_name, shards)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """A task per group of up to ``shardsPerTask`` shards of the planned batch that are not finished and not idle
        (:meth:`~kinesis_spout.spark.source.executor_batches.PlannedBatch.task_groups`, as the offset says; a shard
        at its tip in which the planning saw nothing new gets none; the tasks read, nothing is carried). With
        ``retrieval=fanout`` the app's consumer is registered (or found) here, and the task of each shard that was
        behind its tip subscribes; the others ask GetRecords (a subscription per batch for a shard with little to
        read would only wait out Kinesis' 5 s between subscriptions). A stream deleted under the query: as in
        :meth:`latestOffset`."""
        planned = PlannedBatch.parse(end, "end offset")
        try:
            return self._partitions(planned)
        except KinesisError as exc:
            raise stream_gone(exc, self.config, f"batch {planned.batch} was planned on it") from exc

    def _partitions(self, planned: PlannedBatch) -> Sequence[InputPartition]:
        cutoff = planned.cutoff.isoformat() if planned.cutoff is not None else None
        consumer = self._planning.consumer_arn() if self.config.reading.retrieval == "fanout" else None
        at_tip = self._planner.at_tip(planned.batch)  # fan-out: these are read with GetRecords, not subscribed
        shards = self._planning.list_shards()
        if planned.tasks():  # each task then records its end with one request
            self._planner.open_batch(planned)

        def part(shard_id: str) -> ShardTask:
            return ShardTask(planned.query, planned.batch, shard_id, planned.starts[shard_id].encode(),
                             planned.max_records, planned.max_bytes, cutoff, self._planning.hash_range(shard_id),
                             None if shard_id in at_tip else consumer, shard_id in shards and shards[shard_id].closed)

        groups = planned.task_groups()
        if planned.shards_per_task <= 1:
            return [part(shard_id) for _, (shard_id,) in groups]
        return [ShardsTask(planned.query, planned.batch, node, [part(s) for s in members]) for node, members in groups]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark completed batch ``end``: its recorded ends become the shards' ZooKeeper checkpoints, and ends of
        old batches are deleted."""
        self._planner.commit(PlannedBatch.parse(end, "committed offset"))

    def stop(self) -> None:
        """Release the clients of the driver. Idempotent."""
        self._planner.close()
        self._planning.close()

    # -- executors -------------------------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The task's records, exactly those up to the ends recorded for its shards in its batch, read with the
        worker process's clients. Who calls: Spark, on an executor."""
        assert isinstance(partition, (ShardTask, ShardsTask))
        cfg = self.config
        try:
            batches = ZooKeeperBatchStore.on_store(WORKER_CLIENTS.checkpoints(cfg))
            records = read_task_batch(WORKER_CLIENTS.kinesis(cfg.kinesis), batches, cfg, partition)
        except KinesisError as exc:
            raise stream_gone(exc, cfg, f"batch {partition.batch} was planned on it") from exc
        yield from record_batches(cfg.stream_name, records)
