"""Shards the spout finds finished when it adds shards: the others of the same listing are still read at once, and
a finished shard is looked up once, not at every round of the shard sync. Written against mutants of
kinesis_spout/spout.py the rest of the suite let survive (see benchmarks/results/mutation.md). kinesalite (real
sequence numbers) through the fixture, behind the fault-injecting proxy (here only to count the listings)."""

from __future__ import annotations

import collections
from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

TIMEOUT_S = 15.0


class CountingStore(MemoryCheckpointStore):
    """A memory store that counts the loads of each shard's checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: collections.Counter[str] = collections.Counter()

    def load(self, shard_id: str) -> Checkpoint | None:
        self.loads[shard_id] += 1
        return super().load(shard_id)


def config_for(endpoint_url: str, region: str, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(stream_name=stream, app_name="tests", endpoint_url=endpoint_url, region=region,
                                   initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2,
                                   checkpoint_interval_s=0.0)
    options.update(overrides)
    return SpoutConfig(**options)


def test_a_shard_listed_after_a_finished_one_is_read_at_open_and_the_finished_one_is_looked_up_once(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=3)
    first, *others = kinesalite.shard_ids(stream)
    store = CountingStore()
    store.save(Checkpoint(first, None, shard_end=True))  # finished by an earlier run: never read again
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(12)], [f"key-{i}" for i in range(12)])
    expected = sorted(f"{shard}:{seq}" for shard, seq in placed if shard != first)
    assert {shard for shard, seq in placed} - {first}, "no record went to the shards after the finished one"
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        config = config_for(proxy.endpoint_url, kinesalite.region, stream, shard_sync_interval_s=0.2)
        with KinesisSpout(config, store) as spout:
            assert sorted(spout.shard_ids) == sorted(others), "shards after the finished one were not read at open"
            got: list[SpoutTuple] = []

            def read() -> bool:
                batch = spout.next_batch(max_records=100, timeout_s=0.1)
                spout.ack_many(t.message_id for t in batch)
                got.extend(batch)
                return len(got) >= len(expected)

            assert wait_until(read, TIMEOUT_S), f"read {len(got)} of {len(expected)}"
            listings = proxy.calls["ListShards"]
            assert wait_until(lambda: proxy.calls["ListShards"] >= listings + 3, TIMEOUT_S), "no sync rounds"
        assert sorted(t.message_id for t in got) == expected
    assert store.loads[first] == 1, f"the finished shard was looked up {store.loads[first]} times"
