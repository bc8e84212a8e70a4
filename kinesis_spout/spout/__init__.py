"""The spout: :class:`KinesisSpout`, Storm's spout contract over a Kinesis stream (open, next_tuple, ack, fail,
close), with per-shard trackers, checkpoints in ZooKeeper and lease membership."""

from kinesis_spout.spout.facade import KinesisSpout, ShardMetrics

__all__ = ["KinesisSpout", "ShardMetrics"]
