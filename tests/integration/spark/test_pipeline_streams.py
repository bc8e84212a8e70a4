"""A ``SpoutPipeline`` over two streams: each record's ``stream_name`` and ``message_id`` name its stream, each
stream's checkpoints are its own in ZooKeeper, and the next run resumes both."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_spout import ConfigError, InitialPosition, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.testing import stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.plugin import ZooKeeperHandle


def test_a_pipeline_over_two_streams_fills_stream_name_and_keeps_checkpoints_per_stream(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: ZooKeeperHandle) -> None:
    clicks, orders = kinesalite.create_stream(), kinesalite.create_stream()
    put = {clicks: kinesalite.put(clicks, [b"c0", b"c1", b"c2"]), orders: kinesalite.put(orders, [b"o0", b"o1"])}
    config = SpoutConfig(stream_name=[clicks, orders], app_name="streams", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix, empty_record_backoff_s=0.2)
    with pytest.raises(ConfigError, match="leave checkpoint_store out"):
        SpoutPipeline(spark, config, lambda df, batch: None, checkpoint_store=MemoryCheckpointStore())
    rows: list[tuple[str, str, bytes]] = []

    def process(df: Any, batch: Any) -> None:
        rows.extend((r.stream_name, r.message_id, bytes(r.data)) for r in df.collect())

    pipeline = SpoutPipeline(spark, config, process, trigger_interval_s=0.0)
    assert pipeline.run(until="caught_up", timeout_s=60).acked == 5
    assert sorted((stream, data) for stream, _, data in rows) == \
        sorted([(clicks, b"c0"), (clicks, b"c1"), (clicks, b"c2"), (orders, b"o0"), (orders, b"o1")])
    assert all(mid.startswith(f"{stream}/") for stream, mid, _ in rows)
    for stream in (clicks, orders):
        last = put[stream][-1]  # (shard id, sequence number) of the stream's last record
        assert stored_checkpoints(config.for_stream(stream)) == {last[0]: (last[1], None)}
    assert pipeline.run(until="caught_up", timeout_s=60).records == 0  # the next run resumes both: nothing new
