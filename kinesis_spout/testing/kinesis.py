"""Helpers for tests and demos: a Kinesis endpoint handle, stream creation and bulk puts."""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable

from kinesis_spout.errors import KinesisError

DUMMY_CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


def kinesis_client(endpoint_url: str | None, region: str = "us-east-1", **kwargs: Any) -> Any:
    """A boto3 Kinesis client for ``endpoint_url`` with dummy credentials and bounded retries."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    return boto3.client("kinesis", endpoint_url=endpoint_url, region_name=region, config=config,
                        **{**DUMMY_CREDENTIALS, **kwargs})


@dataclass(frozen=True)
class KinesisEndpoint:
    """A running Kinesis (moto, kinesalite, kinesis-local or real) that tests talk to.

    ``real_sequence_numbers`` is False for moto, whose "1", "2", ... numbers hide ordering bugs.
    """

    name: str
    endpoint_url: str
    region: str = "us-east-1"
    real_sequence_numbers: bool = True

    def client(self, **kwargs: Any) -> Any:
        """A new boto3 Kinesis client for this endpoint."""
        return kinesis_client(self.endpoint_url, self.region, **kwargs)

    def unique_stream_name(self, prefix: str = "test") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    def create_stream(self, name: str | None = None, shards: int = 1, timeout_s: float = 60.0) -> str:
        """Create a stream with ``shards`` shards and wait until it is ACTIVE; returns its name."""
        name = name or self.unique_stream_name()
        client = self.client()
        client.create_stream(StreamName=name, ShardCount=shards)
        wait_for_stream(client, name, timeout_s)
        return name

    def shard_ids(self, stream: str) -> list[str]:
        shards = self.client().list_shards(StreamName=stream)["Shards"]
        return sorted(s["ShardId"] for s in shards)

    def put(self, stream: str, records: Iterable[bytes | str], partition_keys: Iterable[str] | None = None
            ) -> list[tuple[str, str]]:
        """Put records; returns ``(shard_id, sequence_number)`` of each, in order."""
        return put_records(self.client(), stream, records, partition_keys)


def wait_for_stream(client: Any, name: str, timeout_s: float = 60.0) -> None:
    """Wait until the stream is ACTIVE; raises TimeoutError naming the stream otherwise."""
    deadline = time.monotonic() + timeout_s
    status = "unknown"
    while time.monotonic() < deadline:
        try:
            status = client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"]
        except client.exceptions.ResourceNotFoundException:
            status = "not found"
        if status == "ACTIVE":
            return
        time.sleep(0.02)
    raise TimeoutError(f"stream {name!r} not ACTIVE after {timeout_s} s (last status: {status})")


def put_records(client: Any, stream: str, records: Iterable[bytes | str],
                partition_keys: Iterable[str] | None = None, batch: int = 500) -> list[tuple[str, str]]:
    """Put ``records`` with PutRecords in batches of ``batch``, retrying throttled entries.

    Partition keys default to ``"pk-0"``, ``"pk-1"``, ... which spread records over the shards. Returns the
    ``(shard_id, sequence_number)`` of each record in input order.
    """
    keys = iter(partition_keys) if partition_keys is not None else (f"pk-{i}" for i in itertools.count())
    entries = [{"Data": r.encode() if isinstance(r, str) else r, "PartitionKey": next(keys)} for r in records]
    placed: list[tuple[str, str]] = []
    for start in range(0, len(entries), batch):
        results = put_entries(client, stream, entries[start:start + batch], attempts=20)
        refused = results.count(None)
        if refused:
            raise KinesisError(f"put_records: {refused} records of {stream!r} still refused after 20 attempts")
        placed.extend(r for r in results if r is not None)
    return placed


def put_entries(client: Any, stream: str, entries: list[dict[str, Any]], attempts: int = 20
                ) -> list[tuple[str, str] | None]:
    """One PutRecords of ``entries`` (500 at most, as boto3 takes them), the refused ones put again with a growing
    pause, ``attempts`` calls at most.

    Who calls: :func:`put_records` and the scale benchmark's producers, which decide what a refusal means.
    Returns the ``(shard_id, sequence_number)`` of each entry in input order, None for an entry still refused.
    """
    results: list[tuple[str, str] | None] = [None] * len(entries)
    todo = list(range(len(entries)))
    for attempt in range(attempts):
        reply = client.put_records(StreamName=stream, Records=[entries[i] for i in todo])
        retry = []
        for i, res in zip(todo, reply["Records"]):
            if "SequenceNumber" in res:
                results[i] = (res["ShardId"], res["SequenceNumber"])
            else:
                retry.append(i)
        if not retry:
            break
        todo = retry
        time.sleep(min(0.05 * 2 ** attempt, 1.0))
    return results


def keys_on(client: Any, stream: str, shard_id: str, n: int) -> list[str]:
    """``n`` partition keys that Kinesis puts on ``shard_id`` of ``stream`` (their hash key lies in its range)."""
    from kinesis_spout.kinesis.aggregation import hash_key  # here: the test plugin imports this module

    shards = client.list_shards(StreamName=stream)["Shards"]
    rng = next(s["HashKeyRange"] for s in shards if s["ShardId"] == shard_id)
    low, high = int(rng["StartingHashKey"]), int(rng["EndingHashKey"])
    keys = (f"pk-{i}" for i in itertools.count())
    return list(itertools.islice((key for key in keys if low <= int(hash_key(key, None) or 0) <= high), n))
