"""Spark adapters: the micro-batch pipeline with per-record ack/fail, and the Structured Streaming source.

pyspark is imported only by these modules, and only when one of these names is first used. Packages:
:mod:`~.pipeline` (``SpoutPipeline``), :mod:`~.source` (the data source, its pure logic, the lag listener),
:mod:`~.sink` (the Kinesis sink), :mod:`~.bookkeeping` (batch ids, batch ends and ownership, beside the checkpoints)
and :mod:`~.shared` (the columns and the process clients the adapters share). No module sits at this package's root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesis_spout import lazy_names

if TYPE_CHECKING:
    from kinesis_spout.spark.pipeline import SpoutPipeline, TransactionalBatch
    from kinesis_spout.spark.pipeline.batch import Batch
    from kinesis_spout.spark.pipeline.metrics import BatchMetrics, PipelineMetrics
    from kinesis_spout.spark.source import KinesisSpoutDataSource, register
    from kinesis_spout.spark.source.lag import QueryLag, ShardLag
    from kinesis_spout.spark.source.lag_listener import KinesisLagListener

__all__ = ["Batch", "BatchMetrics", "KinesisLagListener", "KinesisSpoutDataSource", "PipelineMetrics", "QueryLag",
           "ShardLag", "SpoutPipeline", "TransactionalBatch", "register"]

_WHERE = {
    "Batch": "kinesis_spout.spark.pipeline.batch",
    "KinesisLagListener": "kinesis_spout.spark.source.lag_listener",
    "QueryLag": "kinesis_spout.spark.source.lag",
    "ShardLag": "kinesis_spout.spark.source.lag",
    "BatchMetrics": "kinesis_spout.spark.pipeline.metrics",
    "PipelineMetrics": "kinesis_spout.spark.pipeline.metrics",
    "SpoutPipeline": "kinesis_spout.spark.pipeline",
    "TransactionalBatch": "kinesis_spout.spark.pipeline",
    "KinesisSpoutDataSource": "kinesis_spout.spark.source",
    "register": "kinesis_spout.spark.source",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept in the package's namespace
    (:func:`kinesis_spout.lazy_names.load`). Called by Python for a name the package does not hold yet (PEP 562)."""
    return lazy_names.load(globals(), _WHERE, name)


def __dir__() -> list[str]:
    """The package's names and its public names not loaded yet, for ``dir()`` and completion."""
    return lazy_names.names(globals(), _WHERE)
