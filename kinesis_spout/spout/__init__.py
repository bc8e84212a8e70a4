"""The spout: :class:`KinesisSpout`, Storm's spout contract over a Kinesis stream (open, next_tuple, ack, fail,
close), with per-shard trackers, checkpoints in ZooKeeper and lease membership. ``ShardMetrics`` (its per-shard
figures) lives in :mod:`kinesis_spout.metrics.shard` and is re-exported here for existing imports."""

from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.spout.facade import KinesisSpout

__all__ = ["KinesisSpout", "ShardMetrics"]
