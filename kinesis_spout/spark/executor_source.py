"""The stream reader of ``readMode=executors``, under its former module name: it lives in
:mod:`kinesis_spout.spark.source` now (:mod:`~kinesis_spout.spark.source.executor`)."""

from __future__ import annotations

from kinesis_spout.spark.source import ExecutorStreamReader, ShardTask, read_shard_batch

__all__ = ["ExecutorStreamReader", "ShardTask", "read_shard_batch"]
