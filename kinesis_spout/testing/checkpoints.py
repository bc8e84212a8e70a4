"""Read an app's stored checkpoints, for assertions in tests: per shard, the sequence number and sub-sequence number
its consumer resumes after.

    from kinesis_spout.testing import SHARD_END, stored_checkpoints

    assert stored_checkpoints(config) == {"shardId-000000000000": ("49650...", None),   # resumes after this record
                                          "shardId-000000000001": (SHARD_END, None)}    # read to its end
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
    from kinesis_spout.config import SpoutConfig

__all__ = ["SHARD_END", "StoredCheckpoint", "stored_checkpoints"]

SHARD_END = "SHARD_END"
"""The sequence number :func:`stored_checkpoints` gives a shard read to its end (its children are read next)."""


class StoredCheckpoint(NamedTuple):
    """A shard's stored checkpoint: every record up to ``sequence_number`` is done (up to its user record
    ``sub_sequence_number`` inside a KPL aggregate; None: the whole record). ``sequence_number`` is
    :data:`SHARD_END` for a shard read to its end, and None for a shard whose start is stored but in which nothing
    was consumed yet (a pinned ``LATEST`` or ``AT_TIMESTAMP`` start). A plain tuple compares equal to it."""

    sequence_number: str | None
    sub_sequence_number: int | None = None


def _stored(checkpoint: Checkpoint) -> StoredCheckpoint:
    if checkpoint.shard_end:
        return StoredCheckpoint(SHARD_END, None)
    return StoredCheckpoint(checkpoint.sequence_number, checkpoint.sub_sequence_number)


def stored_checkpoints(source: SpoutConfig | CheckpointStore) -> dict[str, StoredCheckpoint]:
    """Every shard's stored checkpoint of an app, by shard id (shards with none stored are absent).

    ``source`` is the app's :class:`~kinesis_spout.SpoutConfig` (its ZooKeeper, prefix, app and stream: a ZooKeeper
    session is opened for the read and closed after it), or a checkpoint store the caller opened (a
    ``MemoryCheckpointStore`` handed to the spout, say). Reads only: safe while the app runs, and it sees what the
    app's checkpoint writer has written so far (``spout.flush_checkpoints()`` first, to see every ack)."""
    from kinesis_spout.config import SpoutConfig

    if isinstance(source, SpoutConfig):
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        store = ZooKeeperCheckpointStore.from_config(source)
        store.open()
        try:
            listed = store.list()
        finally:
            store.close()
    else:
        listed = source.list()
    return {shard_id: _stored(checkpoint) for shard_id, checkpoint in sorted(listed.items())}
