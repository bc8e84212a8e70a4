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
#: How many bursts of calls the rate test makes at most, to get one that fits in a second on a loaded machine
BURSTS = 10


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
    # The nine calls must fall in one sliding second; a loaded machine may spread them over more, and then the
    # window moves on during the burst, which proves nothing either way: such a burst is made again, once the
    # second has passed (refused calls do not count, the others leave the window after a second).
    for _ in range(BURSTS):
        refused = proxy.injected.get(f"GetRecords:{PTEE}", 0)
        t0 = time.monotonic()
        answers = [_get(apps[i % 2], stream, "shardId-000000000000") for i in range(8)]  # two apps, one shard
        other = _get(apps[0], stream, "shardId-000000000001")
        if time.monotonic() - t0 < 1.0:
            break
        time.sleep(1.0)  # the sliding second of the rate limit itself: every call of this burst leaves it
    else:
        pytest.fail(f"none of {BURSTS} bursts of nine calls fit in a second: the machine is too slow for this test")
    assert answers == ["ok"] * 5 + [PTEE] * 3, answers
    assert other == "ok", "another shard has a budget of its own"
    assert proxy.injected[f"GetRecords:{PTEE}"] - refused == 3
    assert wait_until(lambda: _get(apps[1], stream, "shardId-000000000000") == "ok", 5), "the window never moved"


def test_limit_rate_refuses_a_rate_that_is_not_positive(moto_kinesis: KinesisEndpoint) -> None:
    proxy = FaultProxy(moto_kinesis.endpoint_url)
    with pytest.raises(ValueError, match="per_second must be positive"):
        proxy.limit_rate("GetRecords", 0)
