"""``SpoutPipeline.run(until="caught_up")``: the run ends once every shard is read up to the tip it had at the start
and every record up to there was acked or dead-lettered (an empty shard included); the next run finds nothing."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.testing.kinesis import KinesisEndpoint


def test_a_run_until_caught_up_processes_what_the_stream_held_and_stops(
        spark: Any, kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout.spark")
    client = kinesalite.client()
    stream = kinesalite.create_stream(shards=3)
    shards = sorted(client.list_shards(StreamName=stream)["Shards"], key=lambda s: s["ShardId"])
    for shard, count in zip(shards, [4, 0, 3]):  # the middle shard stays empty
        for i in range(count):
            client.put_record(StreamName=stream, Data=f"{shard['ShardId']}-{i}".encode(), PartitionKey="pk",
                              ExplicitHashKey=shard["HashKeyRange"]["StartingHashKey"])
    poison = f"{shards[0]['ShardId']}-2"
    letters: list[str] = []
    config = SpoutConfig(stream_name=stream, app_name="caught-up", endpoint_url=kinesalite.endpoint_url,
                         region="us-east-1", initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2,
                         retry_limit=1, retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05),
                         dead_letter=lambda record, reason: letters.append(record.data.decode()))

    def process(df: Any, batch: Any) -> Any:
        return df.filter(df.data.cast("string") == poison).select("message_id")  # fails it on every attempt

    p = SpoutPipeline(spark, config, process, trigger_interval_s=0.0, max_batch_records=3,
                      checkpoint_store=MemoryCheckpointStore())
    metrics = p.run(until="caught_up", timeout_s=120)
    assert (metrics.acked, letters) == (6, [poison])
    assert any("stopping (caught up" in r.getMessage() for r in caplog.records), "the run did not end caught up"
    assert p.run(until="caught_up", timeout_s=120).records == 0  # the next run starts caught up
