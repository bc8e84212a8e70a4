"""Helpers of the sink tests: reading a stream back whole (raw records of every shard, and user records through the
spout), checking where aggregated user records landed, and the text files a streaming write reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.kinesis.aggregation import UserRecord, deaggregate, hash_key
from kinesis_spout.records import Record
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until


def raw_records(endpoint: KinesisEndpoint, stream: str) -> dict[str, list[dict[str, Any]]]:
    """Every record of every shard (closed ones too), from TRIM_HORIZON to the end, by shard, in order."""
    client = endpoint.client()
    out: dict[str, list[dict[str, Any]]] = {}
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        sid = shard["ShardId"]
        it = client.get_shard_iterator(StreamName=stream, ShardId=sid,
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records: list[dict[str, Any]] = []
        while it:
            reply = client.get_records(ShardIterator=it, Limit=10_000)
            records += reply["Records"]
            if not reply["Records"]:
                break
            it = reply.get("NextShardIterator")
        out[sid] = records
    return out


def hash_ranges(endpoint: KinesisEndpoint, stream: str) -> dict[str, tuple[int, int]]:
    shards = endpoint.client().list_shards(StreamName=stream)["Shards"]
    return {s["ShardId"]: (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
            for s in shards}


def user_records_in_range(endpoint: KinesisEndpoint, stream: str) -> list[tuple[str, UserRecord]]:
    """The user records of every aggregate, with their shard, keeping only those in their shard's hash key range
    (what a reader that drops foreign user records delivers). Fails on a record that is not an aggregate."""
    ranges = hash_ranges(endpoint, stream)
    out: list[tuple[str, UserRecord]] = []
    for sid, records in raw_records(endpoint, stream).items():
        low, high = ranges[sid]
        for r in records:
            users = deaggregate(r["Data"])
            assert users is not None, f"a record of shard {sid} is not a KPL aggregate"
            for u in users:
                key = hash_key(u.partition_key, u.explicit_hash_key)
                if key is not None and low <= key <= high:
                    out.append((sid, u))
    return out


def read_with_spout(endpoint: KinesisEndpoint, stream: str, expected: int, timeout_s: float = 60.0) -> list[Record]:
    """The records (user records of aggregates de-aggregated, foreign ones dropped) the spout reads from
    TRIM_HORIZON until ``expected`` came or the time ran out, acked, in emit order; then a little more is read to
    see that nothing beyond ``expected`` arrives."""
    cfg = SpoutConfig(stream_name=stream, app_name="sink-check", endpoint_url=endpoint.endpoint_url,
                      region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                      empty_record_backoff_s=0.2, shard_sync_interval_s=1.0)
    got: list[Record] = []
    with KinesisSpout(cfg, MemoryCheckpointStore()) as spout:
        def take() -> bool:
            for tup in spout.next_batch(max_records=1000, timeout_s=0.1):
                got.append(tup.record)
                spout.ack(tup.message_id)
            return len(got) >= expected

        wait_until(take, timeout_s)
        for _ in range(3):  # nothing more
            take()
    return got


def write_files(directory: Path, files: int, per_file: int) -> list[str]:
    """``files`` text files in ``directory`` (made if missing), ``per_file`` numbered lines each, numbered on across
    files: the input of a streaming write. Returns the lines written, in order."""
    directory.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    for f in range(files):
        lines = [str(f * per_file + i) for i in range(per_file)]
        (directory / f"part-{f:04d}.txt").write_text("\n".join(lines) + "\n")
        ids += lines
    return ids


def stored(endpoint: KinesisEndpoint, stream: str) -> int:
    """How many records ``stream`` holds, in all its shards."""
    return sum(len(v) for v in raw_records(endpoint, stream).values())
