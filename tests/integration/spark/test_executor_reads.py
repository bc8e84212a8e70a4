"""``readMode=executors`` on real servers: the driver plans, tasks read Kinesis, recorded ends make replays exact.

The first tests drive the stream reader as Spark does (initialOffset, latestOffset, partitions, read, commit)
without a session, on kinesalite with real sequence numbers and a real ZooKeeper: every attempt of a task (a
retry, a replay in a new process) yields exactly the same records. Then queries on the shared local[2] Spark
session, a SIGKILLed driver, and what may happen while a query is stopped: a reshard, a deleted or re-created
stream, a new AvailableNow run, another query of the app abandoned for good (its recorded ends are cleaned up).
Attempts racing each other, tasks killed mid-read and speculative copies are in test_executor_faults.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout import CheckpointError, StreamNotFoundError
from kinesis_spout.kinesis.shards import list_shards
from kinesis_spout.positions import after
from kinesis_spout.spark.bookkeeping.batch_store import batch_store_for
from kinesis_spout.spark.source import WORKER_CLIENTS, ExecutorStreamReader, ShardsTask
from kinesis_spout.spark.source.executor_batches import PlannedBatch, ShardEnd, encode_ends
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import quick_start_env

from .support import (
    APP,
    CONSUMER,
    delete_stream,
    drive,
    executor_options,
    last_by_shard,
    load,
    message_ids,
    read_partition,
    source_options,
    stored_checkpoints,
)


def test_batches_cover_every_record_once_and_every_attempt_of_a_task_yields_the_same(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=3)
    placed = kinesalite.put(stream, [f"r{i}".encode() * (1 + i % 5) for i in range(300)])
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="60"))
    reader.prepareForTriggerAvailableNow()
    batches, final = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    assert all(len(ids) <= 60 for *_, ids in batches) and len(batches) >= 5
    assert final == batches[-1][1]  # the run ended after the last planned batch
    assert {s: d["sequence_number"] for s, d in stored_checkpoints(zookeeper, stream).items()} == \
        last_by_shard(placed)
    # a new process (unpickled: no clients) replays the last batches: their tasks find their recorded ends
    fresh = pickle.loads(pickle.dumps(reader))
    for start, end, ids in batches[-3:]:
        parts = fresh.partitions(start, end)
        assert all(isinstance(p, ShardsTask) for p in parts) and len(parts) == 1, "3 shards: one task reads them"
        assert [mid for p in parts for mid in read_partition(fresh, p)] == ids
        # two replays of each task at once agree too (the ends are recorded: both read up to them)
        for part in parts:
            results: list[list[str]] = []
            threads = [threading.Thread(target=lambda: results.append(read_partition(fresh, part)))
                       for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert len(results) == 2 and results[0] == results[1]
    reader.stop()
    fresh.stop()


def test_racing_attempts_yield_the_end_recorded_first(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """An attempt that finds a shorter end already recorded when it comes to record its own (another attempt won
    the race; here the store records it directly) trims to it. Attempts really racing, both mid-read at once, are
    in test_executor_faults."""
    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, [f"race-{i}".encode() for i in range(40)])
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(1000))
    planned = PlannedBatch.parse(end)
    shard = placed[0][0]
    store = batch_store_for(WORKER_CLIENTS.checkpoints(reader.config))
    short = encode_ends({shard: ShardEnd(after(placed[6][1]), 7)})
    [(node, _)] = planned.task_groups()
    assert store.record_batch_end(planned.query, planned.batch, node, short) == short
    [part] = reader.partitions(start, end)
    assert read_partition(reader, part) == message_ids(placed[:7])
    # the next batch starts after the recorded end: nothing lost, nothing twice
    reader.commit(end)
    following = reader.latestOffset(end, ReadMaxRows(1000))
    rest = [mid for p in reader.partitions(end, following) for mid in read_partition(reader, p)]
    assert rest == message_ids(placed[7:])
    reader.stop()


def test_a_missing_recorded_end_of_a_completed_batch_is_an_error_naming_the_node(kinesalite: KinesisEndpoint,
                                                                                 zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [b"one", b"two"])
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(1000))
    for part in reader.partitions(start, end):
        read_partition(reader, part)
    planned = PlannedBatch.parse(end)
    node = f"{batch_store_for(WORKER_CLIENTS.checkpoints(reader.config)).batches_node(planned.query)}/{planned.batch}"
    zookeeper.client().delete(node, recursive=True)
    fresh = pickle.loads(pickle.dumps(reader))
    with pytest.raises(CheckpointError, match=f"batch {planned.batch} was completed but ZooKeeper has no recorded "
                                              f"end for shardId-000000000000 \\(expected at {node}/"):
        fresh.latestOffset(end, ReadMaxRows(1000))
    reader.stop()
    fresh.stop()


def test_an_idle_stream_plans_no_batch_until_a_record_arrives(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMaxRows(1000)) == start  # probed, nothing there: no empty batch
    placed = kinesalite.put(stream, [b"late"])
    # probes run off the planning path, each shard on its idle backoff: the record is planned once a probe saw it
    planned: list[str] = []
    assert wait_until(lambda: planned.append(reader.latestOffset(start, ReadMaxRows(1000))) or planned[-1] != start,
                      30), "the late record was never planned"
    end = planned[-1]
    assert [mid for p in reader.partitions(start, end) for mid in read_partition(reader, p)] == message_ids(placed)
    reader.commit(end)
    assert reader.latestOffset(end, ReadMaxRows(1000)) == end  # caught up again: no empty batch after it
    reader.stop()


def test_children_of_a_split_are_read_after_their_parent_mid_query(kinesalite: KinesisEndpoint,
                                                                   zookeeper: Any) -> None:
    """The parent is closed more than a second after its last record: kinesalite then answers a new iterator after
    that record with an empty reply and a next iterator (only the next call says the shard ended), as Kinesis may.
    A task that takes that reply for the parent's tip never records its end, and its children are never read."""
    stream = kinesalite.create_stream(shards=1)
    client = kinesalite.client()
    parent = kinesalite.shard_ids(stream)[0]
    before = kinesalite.put(stream, [f"p{i}".encode() for i in range(30)])
    put_at = time.time()
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="20",
                                                   shardSyncIntervalS="0.2"))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(20))  # the first batch is planned before the split
    order = [mid for p in reader.partitions(start, end) for mid in read_partition(reader, p)]
    reader.commit(end)
    # kinesalite keeps times in whole seconds: its iterator after a record starts at the record's second + 1, and
    # the parent's end is the split's second; the split must come two seconds later for the iterator to fall short
    wait_until(lambda: time.time() >= math.floor(put_at) + 2, 5)
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    after_last = client.get_shard_iterator(StreamName=stream, ShardId=parent, StartingSequenceNumber=before[-1][1],
                                           ShardIteratorType="AFTER_SEQUENCE_NUMBER")["ShardIterator"]
    reply = client.get_records(ShardIterator=after_last)
    assert reply["Records"] == [] and reply.get("NextShardIterator")  # the condition this test is about
    after = kinesalite.put(stream, [f"c{i}".encode() for i in range(30)])
    reader.prepareForTriggerAvailableNow()
    batches, _ = drive(reader, end, ReadMaxRows(20))
    order += [mid for *_, ids in batches for mid in ids]
    assert sorted(order) == sorted(message_ids(before + after)) and len(order) == len(set(order))
    last_parent = max(i for i, mid in enumerate(order) if mid.startswith(parent + ":"))
    first_child = min(i for i, mid in enumerate(order) if not mid.startswith(parent + ":"))
    assert last_parent < first_child
    stored = stored_checkpoints(zookeeper, stream)
    assert stored[parent]["shard_end"] is True
    reader.stop()


def test_a_second_available_now_run_reads_what_arrived_after_the_first(kinesalite: KinesisEndpoint,
                                                                        zookeeper: Any) -> None:
    """The ends of the first run's last batch say its shards were at their tip then: a new run (a new cutoff)
    must look again, not take them for its own."""
    stream = kinesalite.create_stream(shards=2)
    first = kinesalite.put(stream, [f"first-{i}".encode() for i in range(20)])
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    reader.prepareForTriggerAvailableNow()
    batches, final = drive(reader, reader.initialOffset(), ReadMaxRows(1000))
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(first))
    reader.stop()
    second = kinesalite.put(stream, [f"second-{i}".encode() for i in range(10)])
    rerun = pickle.loads(pickle.dumps(reader))  # the next run: a new process, the same checkpoint location
    rerun.prepareForTriggerAvailableNow()
    batches, _ = drive(rerun, final, ReadMaxRows(1000))
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(second))
    rerun.prepareForTriggerAvailableNow()  # and a run with nothing new plans no batch
    assert drive(rerun, batches[-1][1], ReadMaxRows(1000))[0] == []
    rerun.stop()


# -- queries on Spark --------------------------------------------------------------------------------------------
def test_spark_query_reads_on_executors_and_a_second_action_on_a_batch_sees_the_same_rows(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"spark-{i}".encode() for i in range(400)])
    seen: dict[int, tuple[int, list[str]]] = {}

    def count_then_collect(df: Any, batch_id: int) -> None:  # two actions: each runs the batch's tasks
        counted = df.count()
        seen[batch_id] = (counted, sorted(r.message_id for r in df.select("message_id").collect()))

    df = load(spark, executor_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="120"))
    query = (df.writeStream.foreachBatch(count_then_collect).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    assert query.awaitTermination(180), "the AvailableNow query did not stop"
    assert query.exception() is None
    assert all(counted == len(ids) for counted, ids in seen.values())
    rows = [mid for _, ids in seen.values() for mid in ids]
    assert sorted(rows) == sorted(message_ids(placed))
    assert max(len(ids) for _, ids in seen.values()) <= 120 and len(seen) >= 4
    assert {s: d["sequence_number"] for s, d in stored_checkpoints(zookeeper, stream).items()} == \
        last_by_shard(placed)


def logged_batches(log: Path) -> dict[str, dict[int, set[str]]]:
    """batch id -> process id -> message ids, from the consumer's log (a SIGKILL may cut the last line short)."""
    out: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            out[parts[1]][int(parts[2])].add(parts[0])
    return out


@pytest.mark.crash
@pytest.mark.spark  # a Spark driver in a subprocess
def test_sigkill_of_the_driver_twice_under_a_producer_replays_batches_exactly(
        kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    """Two SIGKILLs (the second kill's run starts by replaying what the first cut short), each after at least 60
    records of batches of 40, with 25 records put while the driver runs and 25 after each kill; the last run reads
    the rest. 200 records at first leave at least three batches to each killed run, so a kill lands mid-query."""
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"crash-{i}".encode() for i in range(200)])
    log = tmp_path / "processed.log"
    log.touch()
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", kinesalite.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--app", APP, "--log", str(log),
            "--checkpoint-location", str(tmp_path / "checkpoint"), "--max-records-per-trigger", "40",
            "--read-mode", "executors"]
    env = quick_start_env({**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
    for kill in range(2):
        before = sum(len(ids) for pids in logged_batches(log).values() for ids in pids.values())
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            assert wait_until(lambda: sum(len(i) for p in logged_batches(log).values() for i in p.values())
                              >= before + 60 or proc.poll() is not None, 120), "the consumer made no progress"
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            placed += kinesalite.put(stream, [f"live-{kill}-{i}".encode() for i in range(25)])  # a live producer
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        placed += kinesalite.put(stream, [f"more-{kill}-{i}".encode() for i in range(25)])
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr[-3000:]
    batches = logged_batches(log)
    batch_of: dict[str, set[str]] = defaultdict(set)
    for batch_id, by_pid in batches.items():
        runs = list(by_pid.values())
        complete = runs[-1]
        assert all(run <= complete for run in runs), f"batch {batch_id} yielded other rows when it was replayed"
        for mid in complete:
            batch_of[mid].add(batch_id)
    assert set(batch_of) == set(message_ids(placed)), "records lost"
    assert all(len(ids) == 1 for ids in batch_of.values()), "a record came in two different batches"
    replayed = sum(1 for by_pid in batches.values() if len(by_pid) > 1)
    print(f"\n[executor reads crash] {len(placed)} records in {len(batches)} batches, {replayed} replayed")
    assert Counter(len(ids) for ids in batch_of.values()) == Counter({1: len(placed)})


# -- what happened while the query was stopped -------------------------------------------------------------------
def run_available_now(spark: Any, df: Any, checkpoint: Path) -> tuple[dict[int, list[str]], Any]:
    """One AvailableNow run of ``df`` on ``checkpoint``: batch id -> message ids, and the query (ended)."""
    batches: dict[int, list[str]] = {}

    def sink(frame: Any, batch_id: int) -> None:
        batches[batch_id] = [r.message_id for r in frame.select("message_id").collect()]

    query = (df.writeStream.foreachBatch(sink).trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        query.awaitTermination(180)
    except Exception:  # noqa: BLE001 - a failed query: the caller looks at query.exception()
        pass
    assert not query.isActive, "the AvailableNow query did not stop"
    return batches, query


@pytest.mark.slow
def test_a_stream_resharded_while_the_query_was_stopped_goes_on_children_after_parents(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=3)
    client = kinesalite.client()
    s0, s1, s2 = kinesalite.shard_ids(stream)
    placed = kinesalite.put(stream, [f"before-{i}".encode() for i in range(60)])
    options = executor_options(kinesalite, zookeeper, stream)
    first, query = run_available_now(spark, load(spark, options), tmp_path / "checkpoint")
    assert query.exception() is None
    # stopped: the parents get more records, then s0 is split and s1, s2 merged; the children get records
    placed += kinesalite.put(stream, [f"stopped-{i}".encode() for i in range(30)])
    client.split_shard(StreamName=stream, ShardToSplit=s0, NewStartingHashKey=str(2 ** 126))
    wait_for_stream(client, stream)
    client.merge_shards(StreamName=stream, ShardToMerge=s1, AdjacentShardToMerge=s2)
    wait_for_stream(client, stream)
    children = {s.shard_id: {s.parent_shard_id, s.adjacent_parent_shard_id} - {None}
                for s in list_shards(client, stream) if s.shard_id not in (s0, s1, s2)}
    assert sorted(map(sorted, children.values())) == [[s0], [s0], sorted([s1, s2])]
    placed += kinesalite.put(stream, [f"after-{i}".encode() for i in range(60)])
    second, query = run_available_now(spark, load(spark, options), tmp_path / "checkpoint")
    assert query.exception() is None
    assert min(second) > max(first)  # the same query went on
    batch_of: dict[str, list[int]] = defaultdict(list)
    for batch_id, ids in {**first, **second}.items():
        for mid in ids:
            batch_of[mid].append(batch_id)
    assert sorted(batch_of) == sorted(message_ids(placed)), "records lost"
    assert all(len(b) == 1 for b in batch_of.values()), "a record came twice"
    for child, parents in children.items():
        child_batches = [b[0] for mid, b in batch_of.items() if mid.startswith(child + ":")]
        parent_batches = [b[0] for mid, b in batch_of.items() if mid.split(":")[0] in parents]
        assert child_batches and max(parent_batches) < min(child_batches), f"{child} was read before its parents"


@pytest.mark.slow
@pytest.mark.parametrize("read_mode", ["executors", "driver"])  # one rule, both read modes
def test_a_stream_deleted_or_re_created_while_the_query_was_stopped_is_an_error_saying_what_to_do(
        read_mode: str, spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=2)
    client = kinesalite.client()
    placed = kinesalite.put(stream, [f"old-{i}".encode() for i in range(20)])
    options = source_options(kinesalite, zookeeper, stream, readMode=read_mode)
    df = load(spark, options)
    first, query = run_available_now(spark, df, tmp_path / "checkpoint")
    assert query.exception() is None and sorted(m for ids in first.values() for m in ids) == \
        sorted(message_ids(placed))
    delete_stream(client, stream)
    with pytest.raises(Exception, match=f"stream '{stream}' does not exist"):  # a restart's load() says it first
        load(spark, options)
    # a DataFrame loaded before the deletion: the query itself says what happened and what to do
    _, query = run_available_now(spark, df, tmp_path / "checkpoint")
    error = str(query.exception())
    assert f"stream '{stream}' does not exist" in error and "was it deleted?" in error
    assert "new checkpoint location" in error and "kinesis-spout checkpoints reset" in error
    # re-created with the same name: the positions of the checkpoint location do not belong to it
    client.create_stream(StreamName=stream, ShardCount=2)
    wait_for_stream(client, stream)
    kinesalite.put(stream, [f"new-{i}".encode() for i in range(10)])
    again, query = run_available_now(spark, load(spark, options), tmp_path / "checkpoint")
    error = str(query.exception())
    assert f"stream '{stream}'" in error and "deleted and re-created" in error, error[-2000:]
    assert "new checkpoint location" in error and not again


def test_a_deleted_stream_stops_the_planner_and_the_tasks_with_what_to_do(kinesalite: KinesisEndpoint,
                                                                         zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [b"one", b"two"])
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(10))
    [part] = reader.partitions(start, end)
    delete_stream(kinesalite.client(), stream)
    with pytest.raises(StreamNotFoundError, match=f"a shard of stream '{stream}' .* does not exist, but this query "
                                                  f"read it \\(batch 0 was planned on it\\): was the stream "
                                                  f"deleted.*new checkpoint location"):
        read_partition(reader, part)
    restarted = pickle.loads(pickle.dumps(reader))  # the driver, restarted
    with pytest.raises(StreamNotFoundError, match=f"stream '{stream}' does not exist .*its checkpoint location "
                                                  f"holds batch 0.*was it deleted\\?.*new appName"):
        restarted.latestOffset(end, ReadMaxRows(10))
    with pytest.raises(StreamNotFoundError, match=f"stream '{stream}' does not exist .*batch 0 was planned on it"
                                                  r".*was it deleted\?"):
        restarted.partitions(start, end)  # a restart replays the batch it had planned: the stream is gone
    reader.stop()
    restarted.stop()


def test_a_starting_query_deletes_the_batch_ends_of_abandoned_queries_and_never_a_live_ones(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    options = executor_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="10")

    def one_batch(reader: ExecutorStreamReader, start: dict[str, Any]) -> dict[str, Any]:
        end = reader.latestOffset(start, ReadMaxRows(10))
        assert end != start
        for part in reader.partitions(start, end):
            read_partition(reader, part)
        reader.commit(end)
        return end

    live = ExecutorStreamReader(options)
    live.heartbeat_s = 0.1
    live_end = one_batch(live, live.initialOffset())
    gone = ExecutorStreamReader(options)  # its checkpoint location is deleted after two batches
    gone_end = one_batch(gone, one_batch(gone, gone.initialOffset()))
    gone.stop()
    store = batch_store_for(WORKER_CLIENTS.checkpoints(live.config))
    ids = {name: PlannedBatch.parse(end).query for name, end in (("live", live_end), ("gone", gone_end))}
    assert set(ids.values()) <= set(store.query_heartbeats())

    # The starting query takes a query quiet for 3 s as abandoned: the gone one is quiet for 4 s, the live one beat
    # just before (3 s of margin for the starting reader's own start on a loaded machine).
    def gone_is_quiet_for_four_seconds() -> bool:
        live_end_now = live.latestOffset(live_end, ReadMaxRows(10))  # the live query plans on and beats
        assert live_end_now == live_end or PlannedBatch.parse(live_end_now).batch == 1
        beats = store.query_heartbeats()
        return beats[ids["live"]][0] - beats[ids["gone"]][0] > 4.0

    assert wait_until(gone_is_quiet_for_four_seconds, 30)
    # a beat the clean-up did not see protects the query: every transaction of the deletion checks the version
    stale = store.query_heartbeats()[ids["live"]][1]
    store.touch_query(ids["live"], b"{}")
    assert not store.delete_query(ids["live"], stale)
    assert store.batch_ends(ids["live"], 0)
    starting = ExecutorStreamReader(options)
    starting.abandoned_after_s = 3.0
    starting.latestOffset(starting.initialOffset(), ReadMaxRows(10))
    client = zookeeper.client()
    assert not client.exists(store.batches_node(ids["gone"])), "the abandoned query's batch ends were kept"
    assert client.exists(store.batches_node(ids["live"])) and store.batch_ends(ids["live"], 0)
    # the live query goes on from its recorded ends, also after a restart of its driver
    fresh = pickle.loads(pickle.dumps(live))
    assert PlannedBatch.parse(one_batch(fresh, live_end)).batch == 1
    # a tree bigger than one transaction goes in several, each checking the version judged
    version = store.query_heartbeats()[ids["live"]][1]
    assert store.delete_query(ids["live"], version, per_transaction=2)
    assert not client.exists(store.batches_node(ids["live"]))
    for reader in (live, starting, fresh):
        reader.stop()
