"""What a pipeline's runners are given: the validated settings of one :class:`~kinesis_spout.spark.SpoutPipeline`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kinesis_spout.checkpoint.base import CheckpointStore
from kinesis_spout.config import SpoutConfig
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.spark.pipeline.batch import Batch

__all__ = ["PipelineSettings", "ProcessFunction"]

#: ``process(df, batch)``: returns None, failed message ids, or a DataFrame with a ``message_id`` column.
ProcessFunction = Callable[[Any, Batch], Any]


@dataclass(frozen=True)
class PipelineSettings:
    """The pipeline's settings as its constructor validated them (read-only, shared by the runs).

    ``batch_retry`` is how a batch whose ``process`` raised is tried again: its delays (jittered), its
    ``max_attempts`` (``batch_retry_limit`` + 1 tries in all) and its ``deadline_s`` (``batch_retry_deadline_s``,
    from the batch's first failure); see :mod:`kinesis_spout.spark.pipeline.batch_retry`.
    """

    spark: Any
    config: SpoutConfig
    process: ProcessFunction
    trigger_interval_s: float
    max_batch_records: int
    max_batch_bytes: int
    checkpoint_store: CheckpointStore | None
    batch_retry: RetryPolicy

    def make_store(self, config: SpoutConfig) -> CheckpointStore:
        """The given checkpoint store, else ``ZooKeeperCheckpointStore.from_config(config)``."""
        if self.checkpoint_store is not None:
            return self.checkpoint_store
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        return ZooKeeperCheckpointStore.from_config(config)
