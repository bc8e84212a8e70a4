"""The Structured Streaming source on real servers.

The first tests drive the stream reader the way Spark does (initialOffset, latestOffset, partitions, read,
commit) without a Spark session: fast, and on kinesalite with real 56-digit sequence numbers. The Spark tests run
queries on the shared local[2] session with moto's server and the real ZooKeeper; the crash test SIGKILLs a
Spark driver process.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kinesis_spout.errors import StreamNotFoundError
from kinesis_spout.spark.source import KeptRecords, KinesisSpoutStreamReader, ShardRange
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import quick_start_env

from .support import (
    APP,
    CONSUMER,
    available_now_while_producing,
    collecting_sink,
    delete_stream,
    last_by_shard,
    load,
    message_ids,
    read_partition,
    run_batches,
    source_options,
    stored_checkpoints,
)

PER_BATCH = 50  # maxRecordsPerTrigger of the crash test's consumer


# -- the reader without Spark ----------------------------------------------------------------------------------------
def test_a_driver_read_shard_backs_off_as_a_reader_does_and_its_policy_stops_after_max_retries() -> None:
    """The driver's shard cursor retries GetRecords with the readers' delays; the policy's stop rule ends the tries
    after MAX_RETRIES retriable errors in a row."""
    from dataclasses import replace

    from kinesis_spout.kinesis.retrieval.polling import GET_RECORDS_RETRY, ShardGetter
    from kinesis_spout.positions import TRIM_HORIZON
    from kinesis_spout.spark.source.driver_planner import ShardCursor
    from kinesis_spout.spark.source.shard_reads import MAX_RETRIES

    cursor = ShardCursor("shardId-000000000000", TRIM_HORIZON,
                         ShardGetter(None, "stream", "shardId-000000000000", TRIM_HORIZON))
    other = ShardCursor("shardId-000000000001", TRIM_HORIZON,
                        ShardGetter(None, "stream", "shardId-000000000001", TRIM_HORIZON))
    assert cursor.backoff.policy == replace(GET_RECORDS_RETRY, max_attempts=MAX_RETRIES + 1)
    assert [cursor.backoff.failed().stop for _ in range(MAX_RETRIES)] == [None] * MAX_RETRIES
    assert (cursor.backoff.failures, other.backoff.failures) == (MAX_RETRIES, 0), "each cursor has its own backoff"
    assert cursor.backoff.failed().stop == "max_attempts"  # the error after MAX_RETRIES retried ones is raised


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
    assert all(isinstance(p, KeptRecords) for _, _, parts, _ in batches for p in parts)
    assert final == last_by_shard(placed)  # real sequence numbers, one per shard
    # a new process (the reader unpickled: no clients, nothing kept) reads each batch again from Kinesis
    fresh = pickle.loads(pickle.dumps(reader))
    for start, end, _, ids in batches:
        parts = fresh.partitions(start, end)
        assert all(isinstance(p, ShardRange) for p in parts)
        assert [mid for p in parts for mid in read_partition(fresh, p)] == ids
    reader.stop()
    reader.stop()


def _shards_of(reader: KinesisSpoutStreamReader, partition: Any) -> list[str]:
    """The shard ids of a partition's rows, each once, in the order its rows come."""
    return list(dict.fromkeys(mid.rsplit(":", 1)[0] for mid in read_partition(reader, partition)))


@pytest.mark.parametrize("per_partition", [None, "150"])
def test_a_batch_packs_whole_shards_into_partitions_of_up_to_records_per_partition(
        kinesalite: KinesisEndpoint, zookeeper: Any, per_partition: str | None) -> None:
    """The driver's records of a batch go to partitions several shards at a time (a Spark task costs the same
    however few records it holds), up to ``recordsPerPartition`` records, never splitting a shard; a fresh reader
    (a replay) reads each shard on its own, the same records in the same order."""
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(200)])
    per_shard = Counter(shard for shard, _ in placed)
    assert len(per_shard) == 4 and max(per_shard.values()) <= 75, per_shard  # any two shards fit in 150
    extra = {"recordsPerPartition": per_partition} if per_partition else {}
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, **extra))
    reader.prepareForTriggerAvailableNow()
    batches, _ = run_batches(reader, reader.initialOffset(), ReadAllAvailable())
    fresh = pickle.loads(pickle.dumps(reader))
    reader.stop()
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    for start, end, parts, ids in batches:
        shards = [_shards_of(reader, p) for p in parts]
        flat = [s for group in shards for s in group]
        assert len(flat) == len(set(flat)), f"a shard was split across partitions: {shards}"
        batch_shards = Counter(mid.rsplit(":", 1)[0] for mid in ids)
        if per_partition is None:  # the default (10,000) holds the whole batch
            assert len(parts) == 1, parts
        else:
            sizes = [len(read_partition(reader, p)) for p in parts]
            assert all(n <= 150 for n in sizes), sizes
            # packed greedily: no two neighbouring partitions would have fit in one
            assert all(a + b > 150 for a, b in zip(sizes, sizes[1:])), sizes
            assert len(parts) < len(batch_shards) or len(batch_shards) == 1, (sizes, batch_shards)
        replayed = fresh.partitions(start, end)
        assert [len(_shards_of(fresh, p)) for p in replayed] == [1] * len(batch_shards)
        assert [mid for p in replayed for mid in read_partition(fresh, p)] == ids
    fresh.stop()


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


def test_a_pinned_latest_reaches_zookeeper_so_a_query_without_its_checkpoint_resumes_there(
        moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    """LATEST pinned by the first batch is written to ZooKeeper at the next: a new query without Spark's checkpoint
    location starts at the pin, not at a new LATEST (which would skip what arrived in between)."""
    stream = moto_kinesis.create_stream(shards=1)
    options = source_options(moto_kinesis, zookeeper, stream, initialPosition="LATEST")
    reader = KinesisSpoutStreamReader(options)
    pinned = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    reader.latestOffset(pinned, ReadAllAvailable())  # Spark completed the empty first batch
    reader.stop()
    (shard, pin), = pinned.items()
    stored = stored_checkpoints(zookeeper, stream)[shard]
    assert (stored["reset_to"], stored["sequence_number"]) == ("AT_TIMESTAMP", None)
    assert f"AT_TIMESTAMP:{stored['timestamp']}" == pin
    second = KinesisSpoutStreamReader(options)
    assert second.initialOffset() == pinned
    second.stop()


def test_available_now_ends_at_the_records_present_when_it_started_and_zookeeper_resumes_there(
        moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    present = moto_kinesis.put(stream, [f"old{i}".encode() for i in range(40)])
    options = source_options(moto_kinesis, zookeeper, stream, maxRecordsPerTrigger="15")
    reader = KinesisSpoutStreamReader(options)
    batches, final, later = available_now_while_producing(moto_kinesis, stream, reader, max_batches=100)
    reader.stop()
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(present))
    assert final == last_by_shard(present)
    stored = stored_checkpoints(zookeeper, stream)  # the last batch reached ZooKeeper although never committed
    assert {s: d["sequence_number"] for s, d in stored.items()} == last_by_shard(present)
    # a new query without Spark's checkpoint starts from ZooKeeper and reads exactly the rest
    second = KinesisSpoutStreamReader(options)
    start = second.initialOffset()
    assert start == final
    second.prepareForTriggerAvailableNow()
    batches, _ = run_batches(second, start, ReadAllAvailable())
    second.stop()
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(later))


def test_zookeeper_ahead_of_the_query_is_left_alone(moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    from kinesis_spout import Checkpoint, ZooKeeperCheckpointStore

    stream = moto_kinesis.create_stream(shards=1)
    shard = moto_kinesis.shard_ids(stream)[0]
    reader = KinesisSpoutStreamReader(source_options(moto_kinesis, zookeeper, stream))
    store = ZooKeeperCheckpointStore.from_config(reader.config)
    store.open()
    try:
        store.save(Checkpoint(shard, "1000"))
        reader.commit({shard: "7"})  # e.g. an old query's checkpoint location: no error, no step back
        reader.commit({shard: "SHARD_END"})
        assert store.load(shard).sequence_number == "1000"
        reader.commit({shard: "1001"})
        assert store.load(shard).sequence_number == "1001"
    finally:
        store.close()
        reader.stop()


def test_available_now_ends_a_shard_only_after_its_records_past_the_cutoff_were_read(kinesis_local: KinesisEndpoint,
                                                                                    zookeeper: Any) -> None:
    """kinesis-local answers a closed shard's last GetRecords with records AND its end (no NextShardIterator), as
    Kinesis can. Records of that reply that arrived after the AvailableNow run's cutoff are left for the next run:
    the shard must not be recorded as finished at the last record the run kept, or they are never read."""
    stream = kinesis_local.create_stream(shards=1)
    parent = kinesis_local.shard_ids(stream)[0]
    early = kinesis_local.put(stream, [f"early{i}".encode() for i in range(5)])
    put_at = time.time()
    wait_until(lambda: time.time() > put_at + 1.5, 5)
    cutoff = datetime.now(timezone.utc)
    wait_until(lambda: time.time() > put_at + 3.0, 5)
    late = kinesis_local.put(stream, [f"late{i}".encode() for i in range(5)])
    client = kinesis_local.client()
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    options = source_options(kinesis_local, zookeeper, stream)
    reader = KinesisSpoutStreamReader(options)
    reader.available_now_margin = cutoff - datetime.now(timezone.utc)  # the run started between the two puts
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, reader.initialOffset(), ReadAllAvailable())
    reader.stop()
    assert [mid for *_, ids in batches for mid in ids] == message_ids(early)
    assert final[parent] == early[-1][1]  # not SHARD_END: the late records are still to be read
    assert stored_checkpoints(zookeeper, stream)[parent]["shard_end"] is False
    second = KinesisSpoutStreamReader(options)  # the next run reads them, then ends the shard
    second.prepareForTriggerAvailableNow()
    batches, final = run_batches(second, second.initialOffset(), ReadAllAvailable())
    second.stop()
    assert [mid for *_, ids in batches for mid in ids] == message_ids(late)
    assert final[parent] == f"SHARD_END:{late[-1][1]}"


def test_a_shard_new_to_the_query_starts_at_its_zookeeper_checkpoint(kinesalite: KinesisEndpoint,
                                                                      zookeeper: Any) -> None:
    """A shard that joins a running query (another task owned it, or it was not listed) resumes after its stored
    checkpoint, not from TRIM_HORIZON: no re-read of what was already consumed."""
    from kinesis_spout import Checkpoint, ZooKeeperCheckpointStore

    stream = kinesalite.create_stream(shards=2)
    first, second = kinesalite.shard_ids(stream)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(60)])
    of_second = [p for p in placed if p[0] == second]
    assert len(of_second) > 10
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream))
    store = ZooKeeperCheckpointStore.from_config(reader.config)
    store.open()
    try:
        store.save(Checkpoint(second, of_second[9][1]))
    finally:
        store.close()
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, {first: "TRIM_HORIZON"}, ReadAllAvailable())
    reader.stop()
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids([p for p in placed if p[0] == first] + of_second[10:]))
    assert final == last_by_shard(placed)


def test_spark_reads_a_multi_shard_stream_under_the_record_limit_and_available_now_stops(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    stream = moto_kinesis.create_stream(shards=4)
    placed = moto_kinesis.put(stream, [f"spark-{i}".encode() for i in range(200)])
    batches: dict[int, list[dict[str, Any]]] = {}
    df = load(spark, source_options(moto_kinesis, zookeeper, stream, maxRecordsPerTrigger="45"))
    assert [f.name for f in df.schema.fields][:3] == ["stream_name", "shard_id", "sequence_number"]
    query = (df.writeStream.foreachBatch(collecting_sink(batches)).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    assert query.awaitTermination(180), "the AvailableNow query did not stop"
    assert query.exception() is None
    rows = [row for batch in batches.values() for row in batch]
    assert sorted(r["message_id"] for r in rows) == sorted(message_ids(placed))
    assert max(len(b) for b in batches.values()) <= 45 and sum(1 for b in batches.values() if b) >= 5
    by_id = {f"{s}:{q}": i for i, (s, q) in enumerate(placed)}
    for row in rows:
        i = by_id[row["message_id"]]
        assert (row["stream_name"], row["shard_id"], row["sequence_number"]) == (stream, *placed[i])
        assert row["data"] == f"spark-{i}".encode() and row["partition_key"] == f"pk-{i}"
        assert row["approximate_arrival_timestamp"] is not None and row["attempt"] == 1
    stored = stored_checkpoints(zookeeper, stream)
    assert {s: d["sequence_number"] for s, d in stored.items()} == last_by_shard(placed)


@pytest.mark.parametrize("read_mode", ["driver", "executors"])
def test_spark_query_under_a_byte_limit_then_a_new_query_resumes_from_zookeeper(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any, read_mode: str) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    first = moto_kinesis.put(stream, [f"first-{i:03d}".encode() for i in range(60)])
    batches: dict[int, list[dict[str, Any]]] = {}
    options = source_options(moto_kinesis, zookeeper, stream, maxBytesPerTrigger="200", readMode=read_mode)
    query = load(spark, options).writeStream.foreachBatch(collecting_sink(batches)).start()  # no checkpoint location
    try:
        assert wait_until(lambda: sum(len(b) for b in list(batches.values())) >= 60 or query.exception(), 120)
        # idle now: the next latestOffset writes the last batch's end to ZooKeeper
        assert wait_until(lambda: {s: d["sequence_number"] for s, d in stored_checkpoints(zookeeper, stream).items()}
                          == last_by_shard(first), 30)
    finally:
        query.stop()
    assert query.exception() is None
    sizes = [sum(len(r["data"]) + len(r["partition_key"]) for r in b) for b in batches.values() if b]
    assert max(sizes) <= 200 and len(sizes) >= 5
    assert sorted(r["message_id"] for b in batches.values() for r in b) == sorted(message_ids(first))
    second = moto_kinesis.put(stream, [f"second-{i}".encode() for i in range(25)])
    batches.clear()
    query = (load(spark, options).writeStream.foreachBatch(collecting_sink(batches))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert sorted(r["message_id"] for b in batches.values() for r in b) == sorted(message_ids(second))


# -- a driver killed with SIGKILL --------------------------------------------------------------------------------
def logged_ids(log: Path) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():  # a SIGKILL may cut the last line short
            out.append(parts[0])
    return out


@pytest.mark.crash
@pytest.mark.spark  # a Spark driver in a subprocess
def test_sigkill_of_the_driver_and_a_restart_lose_nothing(moto_kinesis: KinesisEndpoint, zookeeper: Any,
                                                          tmp_path: Path) -> None:
    stream = moto_kinesis.create_stream(shards=4)
    placed = moto_kinesis.put(stream, [f"crash-{i}".encode() for i in range(200)])
    log = tmp_path / "processed.log"
    log.touch()
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", moto_kinesis.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--app", APP, "--log", str(log),
            "--checkpoint-location", str(tmp_path / "checkpoint"), "--max-records-per-trigger", str(PER_BATCH)]
    env = quick_start_env({**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
    kills = 0
    for progress in (PER_BATCH + 10, 2 * PER_BATCH + 10):
        before = len(logged_ids(log))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)  # its own group: the JVM and Python workers die with it
        try:
            assert wait_until(lambda: len(logged_ids(log)) >= before + progress or proc.poll() is not None, 120), \
                "the consumer made no progress"
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        placed += moto_kinesis.put(stream, [f"crash-more-{kills}-{i}".encode() for i in range(100)])
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr[-3000:]
    counts = Counter(logged_ids(log))
    missing = set(message_ids(placed)) - set(counts)
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:3]}"
    assert set(counts) == set(message_ids(placed))
    stored = stored_checkpoints(zookeeper, stream)
    assert {s: d["sequence_number"] for s, d in stored.items()} == last_by_shard(placed)
    replays = sum(n - 1 for n in counts.values())
    print(f"\n[spark source crash] {kills} SIGKILLs: {len(placed)} records, {sum(counts.values())} deliveries, "
          f"{replays} replays")
    # a restart replays only the batch Spark had planned but not committed: at most one batch per kill
    assert replays <= kills * PER_BATCH


def test_a_stream_deleted_under_a_driver_read_is_an_error_saying_what_to_do(kinesalite: KinesisEndpoint,
                                                                         zookeeper: Any) -> None:
    """The rule of executor reads, on the driver: its planning and its replays name the deleted stream and what to
    do (a new checkpoint location, a new appName or reset checkpoints), not Kinesis's bare 'not found'."""
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [b"one", b"two"])
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, readMode="driver"))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(10))
    assert end != start
    restarted = pickle.loads(pickle.dumps(reader))  # a new process: it reads the batch from Kinesis again
    [replay] = restarted.partitions(start, end)
    assert isinstance(replay, ShardRange)
    delete_stream(kinesalite.client(), stream)
    said = (rf"stream '{stream}'.* does not exist.*, but this query read it \((its checkpoint location or the "
            rf"app's ZooKeeper checkpoints hold positions in it|a batch was planned on it)\): was (it|the stream) "
            rf"deleted.*new checkpoint location.*new appName")
    planner, replayer = (pickle.loads(pickle.dumps(reader)) for _ in range(2))  # restarts after the deletion
    try:
        with pytest.raises(StreamNotFoundError, match=said):
            planner.latestOffset(end, ReadMaxRows(10))
        with pytest.raises(StreamNotFoundError, match=said):
            replayer.partitions(start, end)  # a restart replays the batch it had planned
        with pytest.raises(StreamNotFoundError, match=said):
            read_partition(restarted, replay)  # a task of the replay
    finally:
        for each in (reader, restarted, planner, replayer):
            each.stop()


def test_a_stream_that_does_not_exist_fails_at_load_naming_it(spark: Any, moto_kinesis: KinesisEndpoint,
                                                                zookeeper: Any) -> None:
    options = source_options(moto_kinesis, zookeeper, "no-such-stream")
    with pytest.raises(Exception, match=r"stream 'no-such-stream' does not exist in region us-east-1 at endpoint "
                                        r"http://127\.0\.0\.1:\d+; check the options streamName, region and "
                                        r"endpointUrl"):
        load(spark, options)
    stream = moto_kinesis.create_stream(shards=1)
    assert load(spark, {**options, "streamName": stream}).isStreaming  # an existing stream loads
