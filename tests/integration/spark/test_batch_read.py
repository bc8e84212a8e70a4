"""``spark.read.format("kinesis_spout")``: a batch read of every shard between two times, on a local[2] session.

kinesis-local gives real arrival timestamps and answers AT_TIMESTAMP iterators as Kinesis does (kinesalite never
answers one for a shard with no record after the time); the records are put in two waves a second apart, so a start
time between them selects the second wave. A split shard is read whole, parent and children alike. Nothing is written to
ZooKeeper.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from kinesis_spout import ConfigError
from kinesis_spout.spark import KinesisSpoutDataSource
from kinesis_spout.spark.source import parse_batch_options
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream

from .support import message_ids


def read(spark: Any, endpoint: KinesisEndpoint, stream: str, **options: str) -> list[str]:
    spark.dataSource.register(KinesisSpoutDataSource)
    df = (spark.read.format("kinesis_spout").option("streamName", stream).option("endpointUrl", endpoint.endpoint_url)
          .option("region", endpoint.region).options(**options).load())
    return [r.message_id for r in df.select("message_id").collect()]


def test_a_batch_read_takes_every_shard_between_two_times(kinesis_local: KinesisEndpoint, spark: Any) -> None:
    stream = kinesis_local.create_stream(shards=2)
    client = kinesis_local.client()
    first = kinesis_local.put(stream, [f"first-{i}".encode() for i in range(40)])
    time.sleep(1.5)
    middle = datetime.now(timezone.utc)
    time.sleep(1.5)
    parent = kinesis_local.shard_ids(stream)[0]
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 126))
    wait_for_stream(client, stream)
    second = kinesis_local.put(stream, [f"second-{i}".encode() for i in range(40)])
    assert len({shard for shard, _ in second}) >= 2
    everything = read(spark, kinesis_local, stream)
    assert sorted(everything) == sorted(message_ids(first + second))
    assert sorted(read(spark, kinesis_local, stream, startingTimestamp=middle.isoformat())) == \
        sorted(message_ids(second))
    assert sorted(read(spark, kinesis_local, stream, endingTimestamp=middle.isoformat())) == sorted(message_ids(first))
    later = kinesis_local.put(stream, [b"after the read was planned"])
    assert len(read(spark, kinesis_local, stream)) == len(everything) + len(later)  # each action plans anew


def test_batch_read_options_are_checked_with_their_names() -> None:
    with pytest.raises(ConfigError, match="option 'startingTimestamp' must be an ISO-8601 time"):
        parse_batch_options({"streamName": "s", "startingtimestamp": "yesterday"})
    start = datetime(2026, 11, 22, tzinfo=timezone.utc)
    with pytest.raises(ConfigError, match="'endingTimestamp' .* must be after 'startingTimestamp'"):
        parse_batch_options({"streamName": "s", "startingTimestamp": start.isoformat(),
                             "endingTimestamp": (start - timedelta(hours=1)).isoformat()})
    config, begin, end = parse_batch_options({"streamName": "s", "startingTimestamp": "2026-11-22T00:00:00Z"})
    assert (config.stream_name, begin, end) == ("s", start, None)
