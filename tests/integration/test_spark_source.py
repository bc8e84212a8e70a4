"""The Structured Streaming source on real servers.

The first tests drive the stream reader the way Spark does (initialOffset, latestOffset, partitions, read,
commit) without a Spark session: fast, and on kinesalite with real 56-digit sequence numbers. The Spark tests run
queries on the shared local[2] session with moto's server and the real ZooKeeper; the crash test SIGKILLs a
Spark driver process.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.spark.offsets import ShardPosition
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

pyspark_datasource = pytest.importorskip("pyspark.sql.streaming.datasource")
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from kinesis_spout.spark.source import KinesisSpoutDataSource, KinesisSpoutStreamReader, ShardRange  # noqa: E402

CONSUMER = Path(__file__).parent / "procs" / "spark_source_consumer.py"
APP = "source-test"


def source_options(endpoint: KinesisEndpoint, zookeeper: Any, stream: str, **extra: str) -> dict[str, str]:
    return {"streamName": stream, "appName": APP, "zookeeper": zookeeper.hosts, "zookeeperPrefix": zookeeper.prefix,
            "endpointUrl": endpoint.endpoint_url, "region": endpoint.region, "initialPosition": "TRIM_HORIZON",
            "checkpointIntervalS": "0", "emptyRecordBackoffS": "0.2", **extra}


def message_ids(placed: list[tuple[str, str]]) -> list[str]:
    return [f"{shard}:{seq}" for shard, seq in placed]


def last_by_shard(placed: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for shard, seq in placed:
        if shard not in out or int(seq) > int(out[shard]):
            out[shard] = seq
    return out


def stored_checkpoints(zookeeper: Any, stream: str) -> dict[str, dict[str, Any]]:
    client = zookeeper.client()
    base = f"{zookeeper.prefix}/{APP}/{stream}/checkpoints"
    if not client.exists(base):
        return {}
    return {shard: json.loads(client.get(f"{base}/{shard}")[0]) for shard in client.get_children(base)}


def read_partition(reader: KinesisSpoutStreamReader, partition: Any) -> list[str]:
    return [mid for batch in reader.read(partition) for mid in batch.column("message_id").to_pylist()]


def run_batches(reader: KinesisSpoutStreamReader, start: dict[str, str], limit: Any, max_batches: int = 100
                ) -> tuple[list[tuple[dict[str, str], dict[str, str], list[Any], list[str]]], dict[str, str]]:
    """Drive the reader like Spark's micro-batch loop until latestOffset returns its start (AvailableNow)."""
    batches = []
    for _ in range(max_batches):
        end = reader.latestOffset(start, limit)
        if end == start:
            return batches, end
        parts = reader.partitions(start, end)
        ids = [mid for p in parts for mid in read_partition(reader, p)]
        batches.append((start, end, parts, ids))
        reader.commit(end)
        start = end
    raise AssertionError(f"no end after {max_batches} batches")


# -- the reader without Spark ----------------------------------------------------------------------------------------
def test_batches_cover_every_record_once_and_a_replay_reads_exactly_the_same(kinesalite: KinesisEndpoint,
                                                                              zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=3)
    placed = kinesalite.put(stream, [f"r{i}".encode() * (1 + i % 7) for i in range(300)])
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="70"))
    assert reader.getDefaultReadLimit() == ReadMaxRows(70)
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    assert all(len(ids) <= 70 for *_, ids in batches) and len(batches) >= 5
    assert all(isinstance(p, ShardRange) and p.arrow is not None for _, _, parts, _ in batches for p in parts)
    assert final == last_by_shard(placed)  # real sequence numbers, one per shard
    # a new process (the reader unpickled: no clients, nothing kept) reads each batch again from Kinesis
    fresh = pickle.loads(pickle.dumps(reader))
    for start, end, _, ids in batches:
        parts = fresh.partitions(start, end)
        assert all(p.arrow is None for p in parts)
        assert [mid for p in parts for mid in read_partition(fresh, p)] == ids
    reader.stop()
    reader.stop()


def test_children_of_a_split_shard_are_read_after_their_parent_ends(kinesalite: KinesisEndpoint,
                                                                    zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    client = kinesalite.client()
    parent = kinesalite.shard_ids(stream)[0]
    before = kinesalite.put(stream, [f"p{i}".encode() for i in range(30)])
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    after = kinesalite.put(stream, [f"c{i}".encode() for i in range(30)])
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="20"))
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    reader.stop()
    order = [mid for *_, ids in batches for mid in ids]
    assert sorted(order) == sorted(message_ids(before + after))
    last_parent = max(i for i, mid in enumerate(order) if mid.startswith(parent + ":"))
    first_child = min(i for i, mid in enumerate(order) if not mid.startswith(parent + ":"))
    assert last_parent < first_child
    assert final[parent] == f"SHARD_END:{last_by_shard(before)[parent]}"
    stored = stored_checkpoints(zookeeper, stream)
    assert stored[parent]["shard_end"] is True
    assert {s: d["sequence_number"] for s, d in stored.items()} == {**last_by_shard(before), **last_by_shard(after)}


def test_latest_is_pinned_to_a_time_so_a_replay_reads_the_same_records(moto_kinesis: KinesisEndpoint,
                                                                      zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    moto_kinesis.put(stream, [f"old{i}".encode() for i in range(10)])
    put_at = time.time()
    wait_until(lambda: time.time() > put_at + 1.2, 5)  # older than LATEST's margin for clock skew
    reader = KinesisSpoutStreamReader(source_options(moto_kinesis, zookeeper, stream, initialPosition="LATEST"))
    initial = reader.initialOffset()
    assert set(initial.values()) == {"LATEST"}
    pinned = reader.latestOffset(initial, ReadAllAvailable())
    assert all(v.startswith("AT_TIMESTAMP:") for v in pinned.values()) and reader.partitions(initial, pinned) == []
    new = moto_kinesis.put(stream, [f"new{i}".encode() for i in range(8)])
    batches: list[tuple[dict[str, str], dict[str, str], list[str]]] = []

    def next_batch() -> bool:
        start = batches[-1][1] if batches else pinned
        end = reader.latestOffset(start, ReadAllAvailable())
        batches.append((start, end, [mid for p in reader.partitions(start, end) for mid in read_partition(reader, p)]))
        return sum(len(ids) for *_, ids in batches) >= len(new)

    assert wait_until(next_batch, 10)
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(new))
    fresh = pickle.loads(pickle.dumps(reader))
    for start, end, ids in batches:
        assert [mid for p in fresh.partitions(start, end) for mid in read_partition(fresh, p)] == ids
    reader.stop()
