"""Helpers of the spout tests that take tuples one at a time: a spout configuration quick to poll and to retry, and
a bounded wait for ``next_tuple``'s next tuple."""

from __future__ import annotations

from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, RetryBackoff, SpoutConfig
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

TIMEOUT_S = 15.0  # the bound on every wait of these tests


def make_config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    """A spout of app "tests" from TRIM_HORIZON of ``stream``: idle shards polled every 0.2 s, a checkpoint at every
    chance, retries after 0.01 s doubling up to 0.05 s; ``overrides`` sets any other setting."""
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="tests", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    options.update(overrides)
    return SpoutConfig(**options)


def next_tuple(spout: KinesisSpout, timeout_s: float = TIMEOUT_S) -> SpoutTuple:
    """The next tuple ``next_tuple`` gives (it never waits: polled until one comes or the time is up)."""
    got: list[SpoutTuple] = []

    def one() -> bool:
        tup = spout.next_tuple()
        if tup is not None:
            got.append(tup)
        return bool(got)

    assert wait_until(one, timeout_s, interval_s=0.01), "next_tuple gave nothing in time"
    return got[0]


def put_into_shards(endpoint: KinesisEndpoint, counts: list[int]) -> tuple[str, list[str], list[list[str]]]:
    """A stream with a shard per count and ``counts[i]`` records put into shard i (by explicit hash key): the
    stream, its shard ids in order, and the sequence numbers of each shard's records."""
    client = endpoint.client()
    stream = endpoint.create_stream(shards=len(counts))
    shards = sorted(client.list_shards(StreamName=stream)["Shards"], key=lambda s: s["ShardId"])
    seqs = [[client.put_record(StreamName=stream, Data=f"{index}-{i}".encode(), PartitionKey="pk",
                               ExplicitHashKey=shard["HashKeyRange"]["StartingHashKey"])["SequenceNumber"]
             for i in range(count)] for index, (shard, count) in enumerate(zip(shards, counts))]
    return stream, [shard["ShardId"] for shard in shards], seqs
