"""A stream resharded before the app first ran: LATEST and AT_TIMESTAMP deliver only what they ask for.

The stream's one shard is split, records are written to its children, and only then does a spout start, at
LATEST (or at AT_TIMESTAMP, a time after those records). New records written after the start must be delivered,
the children's old ones must not: the closed parent is not read at LATEST, and a pinned start travels down to the
children instead of turning into TRIM_HORIZON. Each child gets old and new records, so once every new record has
come, any old one would have come before it (a shard is read in order).

kinesalite never answers an AT_TIMESTAMP iterator for a shard with no record after the time, so AT_TIMESTAMP (and
the Structured Streaming source, whose first batch pins LATEST to a time) runs on kinesis-local only.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.coordination.lineage import PIN_MARGIN
from kinesis_spout.spark.source import KinesisSpoutStreamReader
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

KEYS = [f"key-{i}" for i in range(20)]
OLD, NEW = 40, 25


def split_and_fill(endpoint: KinesisEndpoint) -> tuple[str, str, list[str]]:
    """A 1-shard stream split in two, then OLD records written to the children; returns the stream, the parent and
    the old records' message ids. Returns once the clock is past the old records' arrival plus the pin margin."""
    stream = endpoint.create_stream(shards=1)
    admin = endpoint.client()
    (parent,) = endpoint.shard_ids(stream)
    admin.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(admin, stream)
    placed = endpoint.put(stream, [f"old-{i}" for i in range(OLD)], [KEYS[i % len(KEYS)] for i in range(OLD)])
    assert {shard for shard, _ in placed} == set(endpoint.shard_ids(stream)) - {parent}, "both children get some"
    written = datetime.now(timezone.utc)
    # a pinned start reaches back PIN_MARGIN for clock skew: let the clock pass it (a condition, not a pause)
    assert wait_until(lambda: datetime.now(timezone.utc) > written + PIN_MARGIN + timedelta(milliseconds=200), 5)
    return stream, parent, [f"{shard}:{seq}" for shard, seq in placed]


def run_spout(endpoint: KinesisEndpoint, stream: str, position: InitialPosition, when: datetime | None
              ) -> tuple[list[bytes], set[str], Any]:
    """Start a spout, then write NEW records; returns what it delivered once every new record came, the shards
    it read, and its store."""
    store = MemoryCheckpointStore()
    config = SpoutConfig(stream_name=stream, app_name="resharded-before", endpoint_url=endpoint.endpoint_url,
                         region=endpoint.region, initial_position=position, initial_timestamp=when,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, shard_sync_interval_s=0.5)
    delivered: list[bytes] = []
    with KinesisSpout(config, store) as spout:
        placed = endpoint.put(stream, [f"new-{i}" for i in range(NEW)], [KEYS[i % len(KEYS)] for i in range(NEW)])
        assert len({shard for shard, _ in placed}) == 2, "both children get new records"

        def step() -> bool:
            for tup in spout.next_batch(max_records=500, timeout_s=0.1):
                delivered.append(tup.record.data)
                spout.ack(tup.message_id)
            return sum(d.startswith(b"new-") for d in delivered) >= NEW

        assert wait_until(step, 60, interval_s=0.0), f"new records delivered: {delivered}"
        assert spout.flush_checkpoints()
        read = {m.shard_id for m in spout.metrics()}
    return delivered, read, store


@pytest.mark.parametrize("emulator", ["kinesalite", "kinesis_local"])
def test_latest_after_a_reshard_before_the_first_start_delivers_only_new_records(
        request: pytest.FixtureRequest, emulator: str) -> None:
    endpoint: KinesisEndpoint = request.getfixturevalue(emulator)
    stream, parent, _ = split_and_fill(endpoint)
    delivered, read, _store = run_spout(endpoint, stream, InitialPosition.LATEST, None)
    old = sorted(d.decode() for d in delivered if d.startswith(b"old-"))
    assert len(old) == 0, f"{len(old)} of {OLD} old records delivered: {old[:5]}..."
    assert sorted(delivered) == sorted(f"new-{i}".encode() for i in range(NEW))
    assert parent not in read, "a shard closed before the start at LATEST was read"


def test_at_timestamp_after_a_reshard_delivers_no_record_older_than_the_time(kinesis_local: KinesisEndpoint) -> None:
    stream, parent, _ = split_and_fill(kinesis_local)
    when = datetime.now(timezone.utc) - timedelta(milliseconds=100)  # after the old records, before the new
    delivered, _read, store = run_spout(kinesis_local, stream, InitialPosition.AT_TIMESTAMP, when)
    old = sorted(d.decode() for d in delivered if d.startswith(b"old-"))
    assert len(old) == 0, f"{len(old)} of {OLD} old records delivered: {old[:5]}..."
    assert sorted(delivered) == sorted(f"new-{i}".encode() for i in range(NEW))
    end = store.load(parent)  # the parent was read from the time, had nothing after it, and ended with the pin
    assert end is not None and end.shard_end and end.timestamp == when


def test_the_structured_streaming_source_at_latest_after_a_reshard_reads_only_new_records(
        kinesis_local: KinesisEndpoint, zookeeper: Any) -> None:
    """Driven the way Spark drives it (initialOffset, latestOffset, partitions, read, commit), without a session.
    The closed parent is not read; its end is written marked as never read, so a later reader of the app starts
    its children at LATEST, not at TRIM_HORIZON (also through the offset string Spark stores and commits)."""
    stream, parent, _ = split_and_fill(kinesis_local)
    app = "resharded-before-source"
    reader = KinesisSpoutStreamReader({
        "streamName": stream, "appName": app, "zookeeper": zookeeper.hosts, "zookeeperPrefix": zookeeper.prefix,
        "endpointUrl": kinesis_local.endpoint_url, "region": kinesis_local.region, "initialPosition": "LATEST",
        "checkpointIntervalS": "0", "emptyRecordBackoffS": "0.2"})
    try:
        start = reader.initialOffset()
        assert start[parent] == "SHARD_END@LATEST" and {v for s, v in start.items() if s != parent} == {"LATEST"}
        kinesis_local.put(stream, [f"new-{i}" for i in range(NEW)], [KEYS[i % len(KEYS)] for i in range(NEW)])
        delivered: list[bytes] = []

        def next_batch() -> bool:
            nonlocal start
            end = reader.latestOffset(start, ReadAllAvailable())
            for part in reader.partitions(start, end):
                delivered.extend(d for batch in reader.read(part) for d in batch.column("data").to_pylist())
            reader.commit(end)
            start = end
            return sum(d.startswith(b"new-") for d in delivered) >= NEW

        assert wait_until(next_batch, 60, interval_s=0.0), f"delivered: {delivered}"
        reader.latestOffset(start, ReadAllAvailable())  # writes the last batch's end to ZooKeeper
    finally:
        reader.stop()
    old = sorted(d.decode() for d in delivered if d.startswith(b"old-"))
    assert len(old) == 0, f"{len(old)} of {OLD} old records delivered: {old[:5]}..."
    assert sorted(delivered) == sorted(f"new-{i}".encode() for i in range(NEW))
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/{app}/{stream}/checkpoints"
    stored = {shard: json.loads(zk.get(f"{base}/{shard}")[0]) for shard in zk.get_children(base)}
    assert len(stored) == 3 and stored[parent]["shard_end"] and stored[parent]["sequence_number"] is None
    assert stored[parent]["reset_to"] == "LATEST"
