"""FaultProxy.limit_rate: Kinesis's shared read limit (GetRecords calls per second per shard, counted across every
application) enforced for real in front of an emulator, which has none."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

PTEE = "ProvisionedThroughputExceededException"


def _get(client: Any, stream: str, shard: str) -> str:
    """One GetRecords call at TRIM_HORIZON of ``shard``: "ok" or the error code it was answered with."""
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    try:
        client.get_records(ShardIterator=iterator, Limit=10)
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return "ok"


def test_calls_beyond_the_rate_are_throttled_per_shard_across_clients(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream(shards=2)
    kinesis_backend.put(stream, [b"a", b"b", b"c"])
    proxy.limit_rate("GetRecords", 5)
    apps = [make_client(through.region, through.endpoint_url, read_timeout_s=10.0) for _ in range(2)]
    t0 = time.monotonic()
    answers = [_get(apps[i % 2], stream, "shardId-000000000000") for i in range(8)]  # two apps, one shard
    other = _get(apps[0], stream, "shardId-000000000001")
    assert time.monotonic() - t0 < 1.0, "the calls took over a second: the window moved on (a slow machine)"
    assert answers == ["ok"] * 5 + [PTEE] * 3, answers
    assert other == "ok", "another shard has a budget of its own"
    assert proxy.injected[f"GetRecords:{PTEE}"] == 3
    assert wait_until(lambda: _get(apps[1], stream, "shardId-000000000000") == "ok", 5), "the window never moved"


def test_limit_rate_refuses_a_rate_that_is_not_positive(moto_kinesis: KinesisEndpoint) -> None:
    proxy = FaultProxy(moto_kinesis.endpoint_url)
    with pytest.raises(ValueError, match="per_second must be positive"):
        proxy.limit_rate("GetRecords", 0)
