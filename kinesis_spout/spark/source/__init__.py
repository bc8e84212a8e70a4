"""The ``kinesis_spout`` Spark data source: ``spark.readStream`` and ``spark.read`` of a Kinesis stream.

Modules: :mod:`~.datasource` (the DataSource), :mod:`~.driver` and :mod:`~.driver_planner` (``readMode=driver``),
:mod:`~.executor`, :mod:`~.executor_planner` and :mod:`~.executor_read` (``readMode=executors``), :mod:`~.batch`
(``spark.read``), and the parts they share: :mod:`~.planning` (the driver's listing, lineage and checkpoints),
:mod:`~.shard_reads` (how a shard is read), :mod:`~.clients` (who owns which client), :mod:`~.codec` (Arrow).
"""

from __future__ import annotations

from kinesis_spout.spark.batch_options import BATCH_OPTIONS
from kinesis_spout.spark.source.batch import KinesisBatchReader, ShardSpan, parse_batch_options
from kinesis_spout.spark.source.clients import WORKER_CLIENTS, ClientCache
from kinesis_spout.spark.source.datasource import KinesisSpoutDataSource, check_stream_exists, register
from kinesis_spout.spark.source.driver import KeptRecords, KinesisSpoutStreamReader, ShardRange
from kinesis_spout.spark.source.executor import ABANDONED_AFTER_S, HEARTBEAT_S, ExecutorStreamReader
from kinesis_spout.spark.source.executor_read import (
    EXECUTOR_READ_S,
    ShardsTask,
    ShardTask,
    read_shard_batch,
    read_task_batch,
)
from kinesis_spout.spark.source.planning import AVAILABLE_NOW_MARGIN, IDLE_WAIT_S
from kinesis_spout.spark.source.shard_reads import MAX_RETRIES, read_range, skip_consumed

__all__ = [
    "ABANDONED_AFTER_S",
    "AVAILABLE_NOW_MARGIN",
    "BATCH_OPTIONS",
    "EXECUTOR_READ_S",
    "HEARTBEAT_S",
    "IDLE_WAIT_S",
    "MAX_RETRIES",
    "WORKER_CLIENTS",
    "ClientCache",
    "ExecutorStreamReader",
    "KeptRecords",
    "KinesisBatchReader",
    "KinesisSpoutDataSource",
    "KinesisSpoutStreamReader",
    "ShardRange",
    "ShardSpan",
    "ShardTask",
    "ShardsTask",
    "check_stream_exists",
    "parse_batch_options",
    "read_range",
    "read_shard_batch",
    "read_task_batch",
    "skip_consumed",
    "register",
]
