"""A ``process()`` that raises (a sink that is down, a table write refused, a bug) fails its BATCH, not its records.

SpoutPipeline tries the same batch again (same records, same id, ``batch.attempt`` 2, 3, ...) after a jittered
backoff; past ``batch_retry_limit`` (or ``batch_retry_deadline_s``) ``run()`` ends with ``BatchFailedError`` and
nothing of the batch is acked, failed or dead-lettered: the next run reads its records again. Records that
``process()`` fails by name keep their own path (the spout's retry queue, then the dead letters).

Real servers through the fixtures: kinesalite (real sequence numbers), ZooKeeper, Redis and the shared local[2]
Spark session. The sink failure is a real Spark write refused because its path exists, as a second run of the
README's word count refuses its table.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import ConfigError, InitialPosition, RetryBackoff, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import in_background, wait_until

pytestmark = pytest.mark.slow

#: Batch retries a test can wait for: three tries in all, 10-50 ms apart.
FAST = dict(batch_retry_limit=2, batch_retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))


def make_config(kinesalite: KinesisEndpoint, zookeeper: Any, stream: str, app: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name=app, zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
        endpoint_url=kinesalite.endpoint_url, region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
        empty_record_backoff_s=0.2, checkpoint_interval_s=0.1,
        retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    options.update(overrides)
    return SpoutConfig(**options)


def checkpoints(config: SpoutConfig) -> dict[str, str | None]:
    """The checkpoints stored in ZooKeeper, read through a store of our own."""
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        return {shard: cp.sequence_number for shard, cp in store.list().items()}
    finally:
        store.close()


def ids(placed: list[tuple[str, str]]) -> list[str]:
    return [f"{shard}:{seq}" for shard, seq in placed]


class Tries:
    """What ``process()`` saw: per call, the batch's id and attempt and its rows' (message_id, record attempt)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, tuple[str, ...], tuple[int, ...]]] = []
        self.lock = threading.Lock()

    def see(self, df: Any, batch: Any) -> tuple[str, ...]:
        rows = df.select("message_id", "attempt").collect()
        mids = tuple(sorted(r.message_id for r in rows))
        with self.lock:
            self.calls.append((batch.id, batch.attempt, mids, tuple(r.attempt for r in rows)))
        return mids

    def by_batch(self) -> dict[int, list[tuple[int, tuple[str, ...]]]]:
        """Batch id -> [(batch.attempt, message ids)] in call order."""
        out: dict[int, list[tuple[int, tuple[str, ...]]]] = defaultdict(list)
        with self.lock:
            for batch_id, attempt, mids, _ in self.calls:
                out[batch_id].append((attempt, mids))
        return dict(out)

    def delivered(self) -> Counter[str]:
        with self.lock:
            return Counter(mid for _, _, mids, _ in self.calls for mid in mids)


# -- no servers ------------------------------------------------------------------------------------------------
def test_the_batch_retry_settings_are_validated_and_named() -> None:
    config = SpoutConfig(stream_name="s", app_name="a")
    for bad in ({"batch_retry_limit": -1}, {"batch_retry_limit": 1.5}, {"batch_retry_limit": True},
                {"batch_retry_deadline_s": 0}, {"batch_retry_deadline_s": float("nan")},
                {"batch_retry_backoff": 0.5}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            SpoutPipeline(None, config, lambda df, b: None, **bad)  # type: ignore[arg-type]
    assert SpoutPipeline(None, config, lambda df, b: None, batch_retry_limit=0, batch_retry_deadline_s=None)


# -- Spark, kinesalite, ZooKeeper ------------------------------------------------------------------------------
def test_a_sink_that_always_refuses_ends_the_run_with_batch_failed_and_costs_no_record(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """The reported defect: a table write that fails on every batch. The first batch (before the sink broke)
    keeps its acks; the failing batch is tried 3 times with the same records and id, then run() ends with
    BatchFailedError; nothing is dead-lettered, the checkpoint stays at the first batch; a second run with the
    sink fixed processes every record of the failed batch (0 lost)."""
    from pyspark.errors import AnalysisException

    from kinesis_spout.errors import BatchFailedError

    stream = kinesalite.create_stream(shards=1)
    good = kinesalite.put(stream, [f"good-{i}" for i in range(5)])
    later: list[tuple[str, str]] = []
    dead: list[str] = []
    config = make_config(kinesalite, zookeeper, stream, "sink-down", retry_limit=1,
                         dead_letter=lambda record, reason: dead.append(record.message_id))
    table = tmp_path / "word_counts"
    table.mkdir()  # the table's folder is there already: every write of it is refused
    tries = Tries()

    def write(df: Any, batch: Any) -> None:
        tries.see(df, batch)
        if not later:  # the first batch succeeds; then the sink "breaks" and more records arrive
            later.extend(kinesalite.put(stream, [f"later-{i}" for i in range(5)]))
            return
        df.select("data").write.mode("errorifexists").parquet(str(table))

    caplog.set_level(logging.INFO, logger="kinesis_spout.spark")
    pipeline = SpoutPipeline(spark, config, write, trigger_interval_s=0.0, **FAST)
    outcome: BaseException | None = None
    try:
        pipeline.run(until=lambda: bool(dead), timeout_s=90)  # until: a dead letter would end it at once
    except Exception as exc:  # noqa: BLE001 - checked below, after what matters most
        outcome = exc

    assert not dead, f"records dead-lettered because the sink refused: {dead}"
    assert isinstance(outcome, BatchFailedError), f"run() ended so: {outcome!r}"
    first, *rest = tries.by_batch().items()
    assert first[1] == [(1, tuple(sorted(ids(good))))], "the first batch ran once, before the sink broke"
    [(failed_id, failed_tries)] = rest
    assert [a for a, _ in failed_tries] == [1, 2, 3], "the failing batch is tried 3 times under its id"
    held = failed_tries[0][1]
    assert held and set(held) <= set(ids(later)) and all(m == held for _, m in failed_tries), \
        "every try holds the same records"
    assert all(set(a) == {1} for _, _, _, a in tries.calls), "no record was failed into the retry queue"
    error = outcome
    assert (error.batch_id, error.tries) == (failed_id, 3)
    assert isinstance(error.__cause__, AnalysisException)
    assert "batch_retry_limit" in str(error) and "no record of it was acked or dead-lettered" in str(error)
    assert checkpoints(config) == {good[0][0]: good[-1][1]}, "the checkpoint stays at the last batch that succeeded"
    assert pipeline.metrics.acked == 5 and pipeline.metrics.failed == 0

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and f"batch {failed_id}" in r.getMessage()]
    assert [("try 1 of 3" in w.getMessage(), "try 2 of 3" in w.getMessage()) for w in warnings] == \
        [(True, False), (False, True)]
    assert all("AnalysisException" in w.getMessage() and " s" in w.getMessage() for w in warnings)
    assert warnings[0].exc_info and not warnings[1].exc_info, "the traceback once, at the first failure"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and f"batch {failed_id}" in r.getMessage()]
    assert len(errors) == 1 and "batch_retry_limit" in errors[0].getMessage()

    fixed = Tries()
    again = SpoutPipeline(spark, config, lambda df, batch: fixed.see(df, batch) and None, trigger_interval_s=0.0)
    again.run(until=lambda: set(fixed.delivered()) >= set(ids(later)), timeout_s=60)
    assert fixed.delivered() == Counter(ids(later)), "the next run delivers each record of the failed batch once"
    assert not dead and checkpoints(config) == {later[0][0]: later[-1][1]}


def test_a_batch_that_fails_twice_then_succeeds_keeps_its_records_and_id(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """Every batch fails twice (a sink that needs three tries): each is tried again with the same records under
    the same id, nothing is failed or dead-lettered, the checkpoint advances to the end; the try count starts
    over with each batch (3 tries each, never past the limit of 3)."""
    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, [f"record-{i}" for i in range(10)])
    dead: list[str] = []
    config = make_config(kinesalite, zookeeper, stream, "sink-flaky",
                         dead_letter=lambda record, reason: dead.append(record.message_id))
    tries = Tries()

    def flaky(df: Any, batch: Any) -> None:
        tries.see(df, batch)
        if len(tries.by_batch()[batch.id]) < 3:
            raise RuntimeError(f"the sink is busy (try {batch.attempt})")

    pipeline = SpoutPipeline(spark, config, flaky, trigger_interval_s=0.0, max_batch_records=4, **FAST)
    metrics = pipeline.run(until=lambda: pipeline.metrics.acked == 10, timeout_s=90)

    by_batch = tries.by_batch()
    assert len(by_batch) >= 3, f"10 records in batches of at most 4: {by_batch}"
    for batch_id, calls in by_batch.items():
        assert [a for a, _ in calls] == [1, 2, 3], f"batch {batch_id} was tried so: {calls}"
        assert len({m for _, m in calls}) == 1, f"batch {batch_id} was tried with other records: {calls}"
    assert sorted(m for calls in by_batch.values() for m in calls[0][1]) == sorted(ids(placed))
    assert all(set(a) == {1} for _, _, _, a in tries.calls), "no record was failed into the retry queue"
    assert not dead and metrics.acked == 10 and metrics.failed == 0
    assert metrics.failed_batches == 2 * len(by_batch)
    assert checkpoints(config) == {placed[0][0]: placed[-1][1]}


@pytest.mark.parametrize("mode", ["at_least_once", "exactly_once"])
def test_stop_during_the_wait_between_tries_ends_the_run_promptly_without_acking(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, mode: str) -> None:
    from kinesis_spout.state import MemoryBackingMap

    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [f"record-{i}" for i in range(5)])
    dead: list[str] = []
    config = make_config(kinesalite, zookeeper, stream, f"sink-stop-{mode}",
                         dead_letter=lambda record, reason: dead.append(record.message_id))
    failed = threading.Event()
    tries = Tries()

    def broken(df: Any, batch: Any) -> None:
        tries.see(df, batch)
        failed.set()
        raise RuntimeError("the sink is down")

    log = MemoryBackingMap.factory(f"sink-stop-{uuid.uuid4().hex[:10]}") if mode == "exactly_once" else None
    pipeline = SpoutPipeline(spark, config, broken, trigger_interval_s=0.0, batch_retry_limit=3, exactly_once=log,
                             batch_retry_backoff=RetryBackoff(initial_s=60.0, multiplier=1.0, max_s=60.0))
    join = in_background(lambda: pipeline.run(timeout_s=120), timeout_s=150, what="pipeline.run")
    assert failed.wait(60), "process() was never called"
    assert wait_until(lambda: pipeline.metrics.failed_batches == 1, 30)  # the try is over: the wait began
    asked = time.monotonic()
    pipeline.stop()
    metrics = join()  # raises whatever run() raised
    assert time.monotonic() - asked < 10, "stop() did not end the wait between tries"
    assert len(tries.calls) == 1 and metrics.acked == 0 and metrics.failed == 0 and not dead
    assert all(seq is None for seq in checkpoints(config).values()), "nothing of the held batch was checkpointed"


def test_exactly_once_a_txid_that_raises_twice_is_replayed_with_its_records_and_counts_exactly(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, redis: Any) -> None:
    """Each txid writes its counts, then raises, twice; the third try commits. The replays carry the same txid and
    records, so the TransactionalMap on Redis skips what an earlier try wrote: the counts are exact."""
    from pyspark.sql import functions as F

    from kinesis_spout.state import Count, TransactionalMap, persistent_aggregate
    from kinesis_spout.state.redis import RedisBackingMap

    words = [f"w{i % 4}" for i in range(16)]
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, words)
    ns = f"sink-eo-{uuid.uuid4().hex[:10]}"
    counts = TransactionalMap.factory(RedisBackingMap.factory(redis.url, namespace=ns))
    config = make_config(kinesalite, zookeeper, stream, "sink-eo")
    tries = Tries()

    def counted() -> dict[str, int]:
        state = counts.make_state()
        try:
            return dict(zip(sorted(set(words)), state.multi_get([(w,) for w in sorted(set(words))])))
        finally:
            state.close()

    def count_then_raise(df: Any, batch: Any) -> None:
        tries.see(df, batch)
        persistent_aggregate(df.select(F.col("data").cast("string").alias("word")), batch, counts,
                             group_by=["word"], aggregator=Count(), partitions=1)
        if batch.attempt < 3:
            raise RuntimeError(f"the write after the counts failed (try {batch.attempt})")

    pipeline = SpoutPipeline(spark, config, count_then_raise, trigger_interval_s=0.0, max_batch_records=8,
                             exactly_once=RedisBackingMap.factory(redis.url, namespace=f"{ns}-log"), **FAST)
    pipeline.run(until=lambda: sum(n or 0 for n in counted().values()) >= len(words) and
                 pipeline.metrics.acked == len(words), timeout_s=90)
    by_txid = tries.by_batch()
    assert len(by_txid) >= 2
    for txid, calls in by_txid.items():
        assert [a for a, _ in calls] == [1, 2, 3] and len({m for _, m in calls}) == 1, f"txid {txid}: {calls}"
    assert counted() == dict(Counter(words))


def test_exactly_once_a_txid_that_fails_every_try_is_replayed_by_the_next_run(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, redis: Any) -> None:
    """Exactly-once, the sink refuses every try of txid 1: run() ends with BatchFailedError naming txid 1 and
    acks nothing; the next run, its sink fixed, replays txid 1 with the same records and counts each word once."""
    from pyspark.sql import functions as F

    from kinesis_spout.errors import BatchFailedError
    from kinesis_spout.state import Count, TransactionalMap, persistent_aggregate
    from kinesis_spout.state.redis import RedisBackingMap

    words = [f"w{i % 3}" for i in range(9)]
    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, words)
    ns = f"sink-eo-down-{uuid.uuid4().hex[:10]}"
    counts = TransactionalMap.factory(RedisBackingMap.factory(redis.url, namespace=ns))
    log = RedisBackingMap.factory(redis.url, namespace=f"{ns}-log")
    config = make_config(kinesalite, zookeeper, stream, "sink-eo-down")
    tries = Tries()
    sink_up = {"yes": False}

    def count(df: Any, batch: Any) -> None:
        tries.see(df, batch)
        persistent_aggregate(df.select(F.col("data").cast("string").alias("word")), batch, counts,
                             group_by=["word"], aggregator=Count(), partitions=1)
        if not sink_up["yes"]:
            raise RuntimeError("the sink is down")

    pipeline = SpoutPipeline(spark, config, count, trigger_interval_s=0.0, exactly_once=log, **FAST)
    with pytest.raises(BatchFailedError, match=r"txid 1 failed 3 tries .*batch_retry_limit=2.*no record of it was "
                                               r"acked or dead-lettered") as raised:
        pipeline.run(timeout_s=60)
    assert (raised.value.batch_id, raised.value.tries) == (1, 3) and pipeline.metrics.acked == 0
    assert all(seq is None for seq in checkpoints(config).values())
    [(txid, failed_tries)] = tries.by_batch().items()
    assert txid == 1 and [a for a, _ in failed_tries] == [1, 2, 3]

    sink_up["yes"] = True
    pipeline.run(until=lambda: pipeline.metrics.acked == len(words), timeout_s=60)
    replay = tries.by_batch()[1][3:]
    assert replay and all(mids == failed_tries[0][1] for _, mids in replay), "txid 1 replayed with its records"
    state = counts.make_state()
    try:
        assert state.multi_get([("w0",), ("w1",), ("w2",)]) == [3, 3, 3]
    finally:
        state.close()
    assert checkpoints(config) == {placed[0][0]: placed[-1][1]}
