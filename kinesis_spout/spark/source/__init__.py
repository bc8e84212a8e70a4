"""The ``kinesis_spout`` Spark data source: ``spark.readStream`` and ``spark.read`` of a Kinesis stream.

Modules: :mod:`~.datasource` (the DataSource), :mod:`~.driver` and :mod:`~.driver_planner` (``readMode=driver``),
:mod:`~.executor`, :mod:`~.executor_planner` and :mod:`~.executor_read` (``readMode=executors``), :mod:`~.batch`
(``spark.read``), and the parts they share: :mod:`~.planning` (the driver's listing, lineage and checkpoints),
:mod:`~.shard_reads` (how a shard is read), :mod:`~.clients` (who owns which client), :mod:`~.codec` (Arrow).
Pure logic, no pyspark: :mod:`~.offsets` (options, offsets, admission control), :mod:`~.read_kinds` (the options of
one kind of read only), :mod:`~.aliases` (the AWS connector's option names), :mod:`~.executor_batches` (the
planned batches and recorded ends of ``readMode=executors``) and :mod:`~.lag` (the lag the readers report, which
:mod:`~.lag_listener`'s ``KinesisLagListener`` reads from a query's progress).

The package loads its public names on first use (PEP 562, as ``kinesis_spout`` and ``kinesis_spout.spark`` do):
importing one of its light modules (the pure option, offset and batch logic, the lag's format) loads neither the
data source nor pyspark, so the ZooKeeper tools and the unit tests of that logic do not pay for Spark.
``from kinesis_spout.spark.source import X`` still works for every name of ``__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesis_spout import lazy_names

if TYPE_CHECKING:
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
    from kinesis_spout.spark.source.read_kinds import BATCH_OPTIONS
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

#: The module of each public name.
_WHERE: dict[str, str] = {
    "BATCH_OPTIONS": "kinesis_spout.spark.source.read_kinds",
    "KinesisBatchReader": "kinesis_spout.spark.source.batch",
    "ShardSpan": "kinesis_spout.spark.source.batch",
    "parse_batch_options": "kinesis_spout.spark.source.batch",
    "WORKER_CLIENTS": "kinesis_spout.spark.source.clients",
    "ClientCache": "kinesis_spout.spark.source.clients",
    "KinesisSpoutDataSource": "kinesis_spout.spark.source.datasource",
    "check_stream_exists": "kinesis_spout.spark.source.datasource",
    "register": "kinesis_spout.spark.source.datasource",
    "KeptRecords": "kinesis_spout.spark.source.driver",
    "KinesisSpoutStreamReader": "kinesis_spout.spark.source.driver",
    "ShardRange": "kinesis_spout.spark.source.driver",
    "ABANDONED_AFTER_S": "kinesis_spout.spark.source.executor",
    "HEARTBEAT_S": "kinesis_spout.spark.source.executor",
    "ExecutorStreamReader": "kinesis_spout.spark.source.executor",
    "EXECUTOR_READ_S": "kinesis_spout.spark.source.executor_read",
    "ShardsTask": "kinesis_spout.spark.source.executor_read",
    "ShardTask": "kinesis_spout.spark.source.executor_read",
    "read_shard_batch": "kinesis_spout.spark.source.executor_read",
    "read_task_batch": "kinesis_spout.spark.source.executor_read",
    "AVAILABLE_NOW_MARGIN": "kinesis_spout.spark.source.planning",
    "IDLE_WAIT_S": "kinesis_spout.spark.source.planning",
    "MAX_RETRIES": "kinesis_spout.spark.source.shard_reads",
    "read_range": "kinesis_spout.spark.source.shard_reads",
    "skip_consumed": "kinesis_spout.spark.source.shard_reads",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept in the package's namespace
    (:func:`kinesis_spout.lazy_names.load`). Called by Python for a name the package does not hold yet (PEP 562)."""
    return lazy_names.load(globals(), _WHERE, name)


def __dir__() -> list[str]:
    """The package's names and its public names not loaded yet, for ``dir()`` and completion."""
    return lazy_names.names(globals(), _WHERE)
