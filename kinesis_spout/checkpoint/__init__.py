"""Checkpoint stores: where each shard's safe checkpoint is kept (ZooKeeper, or memory for tests)."""

from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore

__all__ = ["Checkpoint", "CheckpointStore", "MemoryCheckpointStore"]
