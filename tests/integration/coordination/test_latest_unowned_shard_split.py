"""An app at LATEST whose shard is split before any worker of the app reads it: nothing written after the app
started is lost.

Two spouts share the stream by the static split (``task_index`` of 2). The first starts at LATEST and reads its
own shard only; records then go to the other shard, which is split, and more records go to its children; only then
does the second spout start. The other shard was open when the app started, so the records it got from then on,
and its children's, are delivered: the app's first start pins every open shard, owned or not, and a closed shard
without a pin is read from its first record rather than skipped.
"""

from __future__ import annotations

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

KEYS = [f"key-{i}" for i in range(20)]


def test_a_shard_split_before_its_worker_started_loses_nothing_written_after_the_app_started(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    admin = kinesalite.client()
    store = MemoryCheckpointStore()

    def config(task: int) -> SpoutConfig:
        return SpoutConfig(stream_name=stream, app_name="unowned-split", endpoint_url=kinesalite.endpoint_url,
                           region=kinesalite.region, initial_position=InitialPosition.LATEST, task_index=task,
                           task_count=2, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
                           shard_sync_interval_s=0.5)

    first = KinesisSpout(config(0), store).open()
    second: KinesisSpout | None = None
    try:
        (mine,) = {m.shard_id for m in first.metrics()}
        (other,) = set(kinesalite.shard_ids(stream)) - {mine}
        placed = kinesalite.put(stream, [f"before-split-{i}" for i in range(20)], KEYS)
        assert any(shard == other for shard, _ in placed), "the other shard gets records before its split"
        hash_range = next(s["HashKeyRange"] for s in admin.list_shards(StreamName=stream)["Shards"]
                          if s["ShardId"] == other)
        middle = (int(hash_range["StartingHashKey"]) + int(hash_range["EndingHashKey"])) // 2
        admin.split_shard(StreamName=stream, ShardToSplit=other, NewStartingHashKey=str(middle))
        wait_for_stream(admin, stream)
        placed += kinesalite.put(stream, [f"after-split-{i}" for i in range(20)], KEYS)
        assert {s for s, _ in placed} - {mine, other}, "the children get records before the second spout starts"
        second = KinesisSpout(config(1), store).open()
        wanted = {f"before-split-{i}" for i in range(20)} | {f"after-split-{i}" for i in range(20)}
        delivered: set[str] = set()

        def step() -> bool:
            for spout in (first, second):
                assert spout is not None
                for tup in spout.next_batch(max_records=500, timeout_s=0.1):
                    delivered.add(tup.record.data.decode())
                    spout.ack(tup.message_id)
            return wanted <= delivered

        assert wait_until(step, 30, interval_s=0.0), f"never delivered: {sorted(wanted - delivered)}"
    finally:
        first.close()
        if second is not None:
            second.close()
