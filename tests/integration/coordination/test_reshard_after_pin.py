"""A shard pinned at LATEST and split before anything arrived in it: its children are read from their first record.

KCL's rule: a child found after the app started reading its parent starts at TRIM_HORIZON, since its parent was
followed to its end. A pin is taken by this machine's clock; when that clock runs ahead of Kinesis', a child that
started at its parent's pin would skip its first records. Here an earlier spout stored a pin a few seconds ahead of
Kinesis (a skewed clock) and stopped; the shard was split and records went to the children; a new spout must
deliver them all.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

SKEW = timedelta(seconds=3)


def test_children_of_a_shard_pinned_by_a_clock_ahead_of_kinesis_lose_no_record(
        kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    admin = kinesis_local.client()
    (parent,) = kinesis_local.shard_ids(stream)
    store = MemoryCheckpointStore()
    pin = datetime.now(timezone.utc) + SKEW
    store.save(Checkpoint.pinned(parent, pin))  # an earlier spout, its clock ahead, pinned the open shard
    admin.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(admin, stream)
    placed = kinesis_local.put(stream, [f"child-{i}" for i in range(6)], [f"k{i}" for i in range(6)])
    assert parent not in {shard for shard, _ in placed}
    # the new spout opens once this clock has passed the pin: a parent's pin would then skip the records above
    assert wait_until(lambda: datetime.now(timezone.utc) > pin + timedelta(milliseconds=200), 10)
    config = SpoutConfig(stream_name=stream, app_name="pinned-then-split", endpoint_url=kinesis_local.endpoint_url,
                         region=kinesis_local.region, initial_position=InitialPosition.LATEST,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, shard_sync_interval_s=0.5)
    with KinesisSpout(config, store) as spout:
        got = drain(spout, 6, timeout_s=20.0)
    assert sorted(t.record.data.decode() for t in got) == [f"child-{i}" for i in range(6)]
    end = store.load(parent)
    assert end is not None and end.shard_end and end.timestamp is None, end
