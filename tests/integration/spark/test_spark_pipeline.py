"""SpoutPipeline on the shared local[2] SparkSession, moto's Kinesis server and the real ZooKeeper.

Retries and dead letters through a derived DataFrame, a process() that raises once (its batch is tried again),
stop/resume with batch limits, SIGINT, and (slow) SIGKILL of a driver process mid-run.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import (
    ConfigError,
    InitialPosition,
    RetryBackoff,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.spark import Batch, SpoutPipeline
from kinesis_spout.spark.bookkeeping.batch_store import batch_store_for
from kinesis_spout.spark.pipeline.batch import failed_message_ids
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import quick_start_env

CONSUMER = Path(__file__).parents[1] / "procs" / "spark_pipeline_consumer.py"


def make_config(moto: KinesisEndpoint, zookeeper: Any, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="pipeline", zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
        endpoint_url=moto.endpoint_url, region=moto.region, initial_position=InitialPosition.TRIM_HORIZON,
        empty_record_backoff_s=0.2, checkpoint_interval_s=0.1,
        retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    options.update(overrides)
    return SpoutConfig(**options)


def last_by_shard(placed: list[tuple[str, str]]) -> dict[str, str]:
    last: dict[str, int] = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    return {shard: str(seq) for shard, seq in last.items()}


def stored(config: SpoutConfig) -> tuple[dict[str, str | None], int]:
    """The checkpoints and the batch id in ZooKeeper, read through a store of our own."""
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        return {s: cp.sequence_number for s, cp in store.list().items()}, batch_store_for(store).load_batch_id()
    finally:
        store.close()


class Recorder:
    """A process function's memory: every call's batch and the (message_id, attempt, data) of its rows."""

    def __init__(self) -> None:
        self.calls: list[tuple[Batch, list[tuple[str, int, bytes]]]] = []
        self.lock = threading.Lock()

    def see(self, df: Any, batch: Batch) -> None:
        rows = [(r.message_id, r.attempt, bytes(r.data)) for r in df.select("message_id", "attempt", "data").collect()]
        with self.lock:
            self.calls.append((batch, rows))

    @property
    def deliveries(self) -> list[tuple[str, int]]:
        with self.lock:
            return [(mid, attempt) for _, rows in self.calls for mid, attempt, _ in rows]

    @property
    def ids(self) -> set[str]:
        return {mid for mid, _ in self.deliveries}

    @property
    def batch_ids(self) -> list[int]:
        with self.lock:
            return [batch.id for batch, _ in self.calls]


# -- no servers ------------------------------------------------------------------------------------------------
def test_constructor_and_answers_are_validated() -> None:
    config = SpoutConfig(stream_name="s", app_name="a")
    with pytest.raises(ConfigError, match="process"):
        SpoutPipeline(None, config, process="not callable")  # type: ignore[arg-type]
    for bad in ({"trigger_interval_s": -1}, {"max_batch_records": 0}, {"max_batch_bytes": 1.5}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            SpoutPipeline(None, config, lambda df, b: None, **bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SpoutConfig"):
        SpoutPipeline(None, {"stream_name": "s"}, lambda df, b: None)  # type: ignore[arg-type]
    assert failed_message_ids(None) == set()
    assert failed_message_ids(["s:1", "s:2", "s:1"]) == {"s:1", "s:2"}
    with pytest.raises(TypeError, match="list of message ids"):
        failed_message_ids("s:1")
    with pytest.raises(TypeError, match="strings"):
        failed_message_ids([1])
    with pytest.raises(ConfigError, match="max_batches"):
        SpoutPipeline(None, config, lambda df, b: None).run(max_batches=-1)


# -- Spark, moto, ZooKeeper ------------------------------------------------------------------------------------
def test_failed_derived_rows_fail_their_records_which_retry_then_dead_letter(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any, caplog: pytest.LogCaptureFixture) -> None:
    from pyspark.sql import functions as F

    stream = moto_kinesis.create_stream(shards=2)
    sentences = ["the bad apple" if i in (4, 17) else f"good sentence number {i}" for i in range(30)]
    placed = moto_kinesis.put(stream, sentences)
    bad = {f"{shard}:{seq}" for (shard, seq), text in zip(placed, sentences) if "bad" in text}
    dead: list[tuple[str, str]] = []
    config = make_config(moto_kinesis, zookeeper, stream, retry_limit=2,
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    seen = Recorder()

    def word_check(df: Any, batch: Batch) -> Any:
        seen.see(df, batch)
        words = df.select("message_id", F.explode(F.split(F.col("data").cast("string"), " ")).alias("word"))
        return words.filter(F.col("word") == "bad")  # derived rows; failing them fails their root records

    caplog.set_level(logging.DEBUG, logger="kinesis_spout.spark")
    pipeline = SpoutPipeline(spark, config, word_check, trigger_interval_s=0.05)
    metrics = pipeline.run(until=lambda: len(dead) == 2 and len(seen.ids) == 30, timeout_s=90)

    assert len(dead) == 2 and {mid for mid, _ in dead} == bad
    assert all("on attempt 3 of 3" in reason for _, reason in dead)
    attempts: dict[str, list[int]] = defaultdict(list)
    for mid, attempt in seen.deliveries:
        attempts[mid].append(attempt)
    assert {mid: a for mid, a in attempts.items() if mid in bad} == {mid: [1, 2, 3] for mid in bad}
    assert all(a == [1] for mid, a in attempts.items() if mid not in bad)
    assert len(attempts) == 30
    ids = seen.batch_ids
    assert ids == list(range(1, len(ids) + 1)), "batch ids start at 1 and increase by one"
    assert all(rows for _, rows in seen.calls), "process() never sees an empty batch"
    assert stored(config) == (last_by_shard(placed), ids[-1])
    assert (metrics.batches, metrics.records, metrics.failed, metrics.acked) == (len(ids), 34, 6, 28)
    assert metrics.dead_lettered == 2 and metrics.batch_id == ids[-1] and metrics.failed_batches == 0
    assert set(metrics.lag_ms) == set(moto_kinesis.shard_ids(stream))
    assert metrics.latency_p50_s is not None and metrics.latency_p95_s >= metrics.latency_p50_s
    batch_lines = [r.getMessage() for r in caplog.records
                   if r.levelno == logging.INFO and r.getMessage().startswith("batch ")]
    assert len(batch_lines) == len(ids)
    shards = len(metrics.lag_ms)  # INFO: the lag summed up; DEBUG: each shard's
    assert all("/s; DataFrame" in line and f" of {shards} shards behind" in line and "shardId-" not in line
               for line in batch_lines), batch_lines
    lag_lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and " lag ms by shard: " in
                 r.getMessage()]
    assert len(lag_lines) == len(ids) and all(line.count("shardId-") == shards for line in lag_lines), lag_lines


def test_an_exception_fails_the_batch_which_is_tried_again_with_the_same_records_and_id(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    """process() raises once: no record is failed (nothing goes to the retry queue); the same batch is tried again
    at once (after a short backoff) under the same id with batch.attempt 2, and the run goes on."""
    stream = moto_kinesis.create_stream(shards=2)
    placed = moto_kinesis.put(stream, [f"record-{i}" for i in range(20)])
    config = make_config(moto_kinesis, zookeeper, stream)
    seen = Recorder()

    def flaky(df: Any, batch: Batch) -> None:
        seen.see(df, batch)
        if len(seen.calls) == 1:
            raise RuntimeError("the sink is down")

    pipeline = SpoutPipeline(spark, config, flaky, trigger_interval_s=0.0, max_batch_records=8,
                             batch_retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    metrics = pipeline.run(until=lambda: pipeline.metrics.acked == 20, timeout_s=90)

    (first_batch, first_rows), (again_batch, again_rows) = seen.calls[:2]
    assert (first_batch.id, first_batch.attempt, again_batch.id, again_batch.attempt) == (1, 1, 1, 2)
    assert 1 <= len(first_rows) == first_batch.records <= 8 and sorted(again_rows) == sorted(first_rows), \
        "the failed batch is tried again with the same records"
    assert all(batch.attempt == 1 for batch, _ in seen.calls[2:])
    assert seen.batch_ids == [1] + list(range(1, len(seen.calls))), "the next batches go on from id 2"
    assert all(attempt == 1 for _, attempt in seen.deliveries), "no record went through the retry queue"
    assert Counter(mid for mid, _ in seen.deliveries) == Counter(
        [mid for mid, _, _ in first_rows] + [f"{shard}:{seq}" for shard, seq in placed])
    assert metrics.failed_batches == 1 and metrics.failed == 0 and metrics.acked == 20 and metrics.dead_lettered == 0
    assert metrics.last is not None and metrics.last.error is None
    assert stored(config) == (last_by_shard(placed), metrics.batch_id)


def test_a_record_the_scheme_cannot_decode_is_dead_lettered_and_the_run_goes_on(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    """JsonScheme on deeply nested JSON raises RecursionError, not ValueError: the pipeline must neither end its run
    (a crash loop under a supervisor) nor lose the records taken with it."""
    from kinesis_spout import JsonScheme

    stream = moto_kinesis.create_stream(shards=1)
    records = [json.dumps({"n": i}).encode() for i in range(10)]
    records.insert(5, b"[" * 100_000 + b"]" * 100_000)
    placed = moto_kinesis.put(stream, records)
    dead: list[tuple[str, str]] = []
    config = make_config(moto_kinesis, zookeeper, stream, scheme=JsonScheme(),
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    seen = Recorder()
    pipeline = SpoutPipeline(spark, config, seen.see, trigger_interval_s=0.0)
    pipeline.run(until=lambda: len(seen.ids) == 10, timeout_s=60)
    assert sorted(data for _, rows in seen.calls for _, _, data in rows) == sorted(r for r in records if r[:1] == b"{")
    assert [mid for mid, _ in dead] == [f"{placed[5][0]}:{placed[5][1]}"] and "RecursionError" in dead[0][1]
    assert stored(config)[0] == last_by_shard(placed)


def test_stop_resumes_with_the_next_batch_id_and_honours_limits(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    placed = moto_kinesis.put(stream, [f"r{i:02d}" for i in range(40)])  # 3 B of data + "pk-N": 7-8 B a record
    config = make_config(moto_kinesis, zookeeper, stream)
    seen = Recorder()

    first = SpoutPipeline(spark, config, seen.see, trigger_interval_s=0.0, max_batch_records=5)
    metrics = first.run(max_batches=2, timeout_s=60)
    assert metrics.batches == 2 and seen.batch_ids == [1, 2]
    assert all(len(rows) <= 5 for _, rows in seen.calls)
    checkpoints, batch_id = stored(config)
    processed: dict[str, int] = {}
    for mid in seen.ids:
        shard, seq = mid.split(":")
        processed[shard] = max(processed.get(shard, 0), int(seq))
    assert batch_id == 2 and checkpoints == {s: str(q) for s, q in processed.items()}, "stop flushed checkpoints"

    second = SpoutPipeline(spark, config, seen.see, trigger_interval_s=0.02, max_batch_bytes=20)
    runner = threading.Thread(target=second.run, kwargs={"timeout_s": 60}, name="pipeline-run")
    runner.start()
    try:
        assert wait_until(lambda: len(seen.ids) == 40, 60), f"only {len(seen.ids)} of 40 records processed"
        calls = len(seen.calls)
        assert not wait_until(lambda: len(seen.calls) > calls, 1.0), "process() was called on an empty batch"
        assert second.running
    finally:
        second.stop()
        runner.join(30)
    assert not runner.is_alive() and not second.running
    assert seen.batch_ids == list(range(1, calls + 1)), "the second run goes on from the stored batch id"
    deliveries = Counter(mid for mid, _ in seen.deliveries)
    assert set(deliveries.values()) == {1}, "a graceful stop replays nothing"
    sizes = [sum(len(data) + len(f"pk-{int(data[1:])}") for _, _, data in rows) for _, rows in seen.calls[2:]]
    assert max(sizes) < 20 + 8 and min(len(rows) for _, rows in seen.calls[2:]) >= 1
    assert stored(config) == (last_by_shard(placed), calls)


def test_sigint_stops_gracefully_and_restores_the_handler(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    placed = moto_kinesis.put(stream, [f"record-{i}" for i in range(10)])
    config = make_config(moto_kinesis, zookeeper, stream)
    seen = Recorder()
    pipeline = SpoutPipeline(spark, config, seen.see, trigger_interval_s=0.05)
    original = signal.getsignal(signal.SIGINT)

    def interrupt_when_done() -> None:
        # signal only once our handler is in place, so a broken pipeline cannot interrupt the test session
        if wait_until(lambda: len(seen.ids) == 10 and signal.getsignal(signal.SIGINT) is not original, 60):
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt_when_done, name="sigint-sender")
    sender.start()
    metrics = pipeline.run(timeout_s=60)
    sender.join(5)
    assert len(seen.ids) == 10 and metrics.records == 10
    assert metrics.running_s < 55, "the run ended on SIGINT, not on its timeout"
    assert signal.getsignal(signal.SIGINT) is original
    assert stored(config) == (last_by_shard(placed), metrics.batch_id)


def test_a_batch_waits_while_zookeeper_cannot_store_its_id(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    placed = moto_kinesis.put(stream, [f"before-{i}" for i in range(5)])
    config = make_config(moto_kinesis, zookeeper, stream)
    seen = Recorder()
    pipeline = SpoutPipeline(spark, config, seen.see, trigger_interval_s=0.05)
    runner = threading.Thread(target=pipeline.run, kwargs={"timeout_s": 90}, name="pipeline-run")
    runner.start()
    try:
        assert wait_until(lambda: len(seen.ids) == 5, 60)
        zookeeper.server.stop()
        placed += moto_kinesis.put(stream, [f"during-{i}" for i in range(5)])
        assert not wait_until(lambda: len(seen.ids) > 5, 3.0), "a batch ran without its id stored"
        zookeeper.server.start()
        assert wait_until(lambda: len(seen.ids) == 10, 60), "the held batch did not run after ZooKeeper returned"
    finally:
        pipeline.stop()
        runner.join(30)
    assert not runner.is_alive()
    assert seen.batch_ids == list(range(1, len(seen.calls) + 1))
    assert Counter(mid for mid, _ in seen.deliveries) == Counter(seen.ids), "nothing was processed twice"
    assert stored(config) == (last_by_shard(placed), len(seen.calls))


@pytest.mark.parametrize("limit", ["timeout_s", "zookeeper_deadline_s"])
def test_a_zookeeper_outage_never_holds_a_run_past_its_limits(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any, limit: str) -> None:
    """ZooKeeper stops mid-run while a batch waits for its id: the run ends at its timeout_s, or with a
    CheckpointError at zookeeper_deadline_s, instead of waiting for ZooKeeper however long it takes."""
    from kinesis_spout import CheckpointError

    stream = moto_kinesis.create_stream(shards=1)
    moto_kinesis.put(stream, [f"before-{i}" for i in range(3)])
    # static: the spout reads on during the outage, so a batch waits for its id (a lease worker would pause instead)
    config = make_config(moto_kinesis, zookeeper, stream, coordination="static",
                         zookeeper_deadline_s=600.0 if limit == "timeout_s" else 4.0)
    seen = Recorder()
    pipeline = SpoutPipeline(spark, config, seen.see, trigger_interval_s=0.05)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            # 15 s: room for the first batch on a busy machine; the outage then holds the run until its timeout
            pipeline.run(timeout_s=15 if limit == "timeout_s" else 600)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome.append(exc)

    runner = threading.Thread(target=run, name="pipeline-run")
    runner.start()
    try:
        assert wait_until(lambda: len(seen.ids) == 3, 60)
        zookeeper.server.stop()
        moto_kinesis.put(stream, [f"during-{i}" for i in range(3)])
        runner.join(75)
        assert not runner.is_alive(), f"the run was still waiting for ZooKeeper ({limit})"
    finally:
        pipeline.stop()
        zookeeper.server.start()
        runner.join(30)
    assert len(seen.ids) == 3, "no batch ran without its id stored"
    if limit == "timeout_s":
        assert outcome == [None]
    else:
        assert len(outcome) == 1 and isinstance(outcome[0], CheckpointError)
        assert "zookeeper_deadline_s" in str(outcome[0]) and "read again" in str(outcome[0])


# -- a driver killed with SIGKILL ------------------------------------------------------------------------------
def log_lines(log: Path) -> list[tuple[str, int, int, int]]:
    """``(message_id, attempt, batch_id, pid)`` of each complete line the consumer wrote."""
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and all(p.isdigit() for p in parts[1:]):  # a SIGKILL may cut the last line short
            out.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3])))
    return out


@pytest.mark.crash
@pytest.mark.spark  # a Spark driver in a subprocess
def test_sigkill_of_the_driver_and_restart_lose_nothing(moto_kinesis: KinesisEndpoint, zookeeper: Any,
                                                         tmp_path: Path) -> None:
    total, kills = 400, 2
    rng = random.Random(11)
    stream = moto_kinesis.create_stream(shards=4)
    placed = moto_kinesis.put(stream, [f"sentence number {i}" for i in range(total)])
    expected = {f"{shard}:{seq}" for shard, seq in placed}
    last = last_by_shard(placed)
    log = tmp_path / "processed.log"
    log.touch()
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", moto_kinesis.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--log", str(log),
            "--expect", json.dumps(last)]
    env = quick_start_env({**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
    config = SpoutConfig(stream_name=stream, app_name="spark-crash", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix)
    history: list[tuple[dict[str, str | None], int]] = []
    for _ in range(kills):
        before = len(log_lines(log))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            target = before + rng.randrange(40, total // (kills + 1))
            assert wait_until(lambda: len(log_lines(log)) >= target or proc.poll() is not None, 120), "no progress"
            assert proc.poll() is None, f"consumer exited early: {proc.stderr.read().decode()[-2000:]}"
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stderr.close()
        history.append(stored(config))
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr[-3000:]

    lines = log_lines(log)
    counts = Counter(mid for mid, _, _, _ in lines)
    missing = expected - set(counts)
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:3]}"
    checkpoints, batch_id = stored(config)
    assert checkpoints == last
    for (earlier, earlier_id), (later, later_id) in zip(history, history[1:] + [(checkpoints, batch_id)]):
        assert later_id >= earlier_id
        assert all(int(later.get(s) or 0) >= int(q or 0) for s, q in earlier.items()), "a checkpoint moved back"
    pids_by_batch: dict[int, set[int]] = defaultdict(set)
    for _, _, bid, pid in lines:
        pids_by_batch[bid].add(pid)
    assert all(len(p) == 1 for p in pids_by_batch.values()), "a batch id was used again after a crash"
    assert batch_id >= max(pids_by_batch)
    retries = sum(1 for _, attempt, _, _ in lines if attempt > 1)
    replays = len(lines) - len(expected) - retries
    print(f"\n[spark crash] {kills} SIGKILLs: {len(expected)} records, {len(lines)} deliveries, {retries} deliberate "
          f"retries, {replays} replays after crashes, {len(pids_by_batch)} batches")


def test_two_pipelines_share_a_stream_through_leases_and_never_share_a_batch_id(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    """Two SpoutPipelines of one app on one stream (coordination="leases", two workers): every record is processed,
    each shard by one of them at a time, and each batch id is used by one pipeline only."""
    stream = moto_kinesis.create_stream(shards=4)
    placed = moto_kinesis.put(stream, [f"word-{i}" for i in range(100)])
    seen = {name: Recorder() for name in ("p1", "p2")}
    producing = threading.Event()
    producing.set()

    def produce() -> None:  # until both pipelines hold shards and have processed some (bounded)
        client = moto_kinesis.client()
        for n in range(150):
            if seen["p1"].ids and seen["p2"].ids:
                break
            placed.extend(put_records(client, stream, [f"more-{n}-{i}" for i in range(10)]))
            time.sleep(0.2)
        producing.clear()
    pipelines = {name: SpoutPipeline(spark, make_config(moto_kinesis, zookeeper, stream, coordination="leases",
                                                        worker_id=name, zookeeper_session_timeout_s=4.0),
                                     seen[name].see, trigger_interval_s=0.05, max_batch_records=20)
                 for name in seen}

    def done() -> bool:
        return not producing.is_set() and seen["p1"].ids | seen["p2"].ids >= {f"{s}:{q}" for s, q in placed}

    runners = [threading.Thread(target=p.run, kwargs={"until": done, "timeout_s": 90}, name=f"run-{n}")
               for n, p in pipelines.items()] + [threading.Thread(target=produce, name="producer")]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join(120)
    assert not any(r.is_alive() for r in runners)
    assert seen["p1"].ids | seen["p2"].ids >= {f"{s}:{q}" for s, q in placed}
    assert seen["p1"].ids and seen["p2"].ids, "both pipelines processed records"
    ids = {name: set(rec.batch_ids) for name, rec in seen.items()}
    assert not ids["p1"] & ids["p2"], "a batch id was used by both pipelines"


def test_an_aggregated_stream_arrives_as_user_records_with_their_sub_sequence_numbers(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    """KPL aggregates (made by aws-kinesis-agg) reach process() as one row per user record; a word count over them
    counts every word once."""
    from aws_kinesis_agg.aggregator import RecordAggregator

    stream = moto_kinesis.create_stream(shards=1)
    sentences = [f"the quick fox {i}" for i in range(60)]
    blobs = []
    for start in range(0, 60, 20):
        aggregator = RecordAggregator()
        for i in range(start, start + 20):
            aggregator.add_user_record(f"pk-{i}", sentences[i].encode())
        blobs.append(bytes(aggregator.clear_and_get().get_contents()[2]))
    moto_kinesis.put(stream, blobs)
    rows: list[tuple[str, int, str]] = []

    def collect(df: Any, batch: Batch) -> None:
        rows.extend((r.partition_key, r.sub_sequence_number, bytes(r.data).decode())
                    for r in df.select("partition_key", "sub_sequence_number", "data").collect())

    pipeline = SpoutPipeline(spark, make_config(moto_kinesis, zookeeper, stream), collect, trigger_interval_s=0.0)
    pipeline.run(until=lambda: len(rows) >= 60, timeout_s=60)
    assert sorted(rows, key=lambda r: int(r[0][3:])) == [(f"pk-{i}", i % 20, sentences[i]) for i in range(60)]
    words = Counter(word for _, _, text in rows for word in text.split())
    assert words["the"] == words["quick"] == words["fox"] == 60
