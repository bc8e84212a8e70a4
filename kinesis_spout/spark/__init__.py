"""Spark adapters: the micro-batch pipeline with per-record ack/fail, and the Structured Streaming source.

pyspark is imported only by these modules, and only when one of these names is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kinesis_spout.spark.lag import QueryLag, ShardLag
    from kinesis_spout.spark.lag_listener import KinesisLagListener
    from kinesis_spout.spark.pipeline import SpoutPipeline, TransactionalBatch
    from kinesis_spout.spark.pipeline.batch import Batch
    from kinesis_spout.spark.pipeline.metrics import BatchMetrics, PipelineMetrics
    from kinesis_spout.spark.source import KinesisSpoutDataSource, register

__all__ = ["Batch", "BatchMetrics", "KinesisLagListener", "KinesisSpoutDataSource", "PipelineMetrics", "QueryLag",
           "ShardLag", "SpoutPipeline", "TransactionalBatch", "register"]

_WHERE = {
    "Batch": "kinesis_spout.spark.pipeline.batch",
    "KinesisLagListener": "kinesis_spout.spark.lag_listener",
    "QueryLag": "kinesis_spout.spark.lag",
    "ShardLag": "kinesis_spout.spark.lag",
    "BatchMetrics": "kinesis_spout.spark.pipeline.metrics",
    "PipelineMetrics": "kinesis_spout.spark.pipeline.metrics",
    "SpoutPipeline": "kinesis_spout.spark.pipeline",
    "TransactionalBatch": "kinesis_spout.spark.pipeline",
    "KinesisSpoutDataSource": "kinesis_spout.spark.source",
    "register": "kinesis_spout.spark.source",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kinesis_spout.spark' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
