"""The Spark operations on state, on the shared local Spark session with a real Redis and memcached."""

from __future__ import annotations

import re
import uuid

import pytest

from kinesis_spout.state import (
    Count,
    NonTransactionalMap,
    OpaqueMap,
    SpoutKind,
    StatePairError,
    StateRunError,
    Sum,
    TransactionalMap,
    TxBatch,
    partition_persist,
    persistent_aggregate,
    state_query,
)
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap

pytestmark = pytest.mark.slow

WORDS = "the cat and the dog and the bird".split()


def words_df(spark, words=WORDS, parts=3):
    return spark.createDataFrame([(w, len(w)) for w in words], "word string, n long").repartition(parts)


@pytest.fixture
def backing(redis):
    return RedisBackingMap.factory(redis.url, namespace=f"t-{uuid.uuid4().hex[:10]}")


def tx(txid, kind=SpoutKind.TRANSACTIONAL):
    """A batch of this test's run (outside a streaming query a transactional or opaque map needs a named run)."""
    return TxBatch(txid, kind, run="test")


def read(factory, words):
    state = factory.make_state()
    try:
        return dict(zip(words, state.multi_get([(w,) for w in words])))
    finally:
        state.close()


def test_persistent_aggregate_counts_and_a_replayed_txid_counts_once(spark, backing) -> None:
    counts = TransactionalMap.factory(backing)
    df = words_df(spark)
    result = persistent_aggregate(df, tx(1), counts, group_by=["word"], aggregator=Count(), partitions=2)
    assert (result.txid, result.kind, result.keys) == (1, SpoutKind.TRANSACTIONAL, 5)
    assert result.round_trips == 2 * result.partitions  # one bulk read and one bulk write per partition
    persistent_aggregate(df, tx(1), counts, group_by=["word"], aggregator=Count())  # Spark replays batch 1
    assert read(counts, ["the", "and", "cat", "dog", "bird"]) == {"the": 3, "and": 2, "cat": 1, "dog": 1, "bird": 1}
    persistent_aggregate(words_df(spark, ["the"]), tx(2), counts, group_by=["word"], aggregator=Count())
    assert read(counts, ["the"]) == {"the": 4}


def test_opaque_map_recomputes_a_replay_that_differs(spark, backing) -> None:
    counts = OpaqueMap.factory(backing)
    persistent_aggregate(words_df(spark), tx(1, SpoutKind.OPAQUE), counts, group_by=["word"],
                         aggregator=Count())
    persistent_aggregate(words_df(spark, ["the", "cat"]), tx(2, SpoutKind.OPAQUE), counts,
                         group_by=["word"], aggregator=Count())
    # txid 2 replayed with other records: its first attempt no longer counts
    persistent_aggregate(words_df(spark, ["the"]), tx(2, SpoutKind.OPAQUE), counts, group_by=["word"],
                         aggregator=Count())
    assert read(counts, ["the", "cat"]) == {"the": 4, "cat": 2}


def test_sum_a_combiner_of_ones_own_and_a_reducer(spark, backing) -> None:
    class Longest:
        def init(self, row):
            return row["n"]

        def combine(self, a, b):
            return max(a, b)

        def zero(self):
            return 0

    class Joined:
        def init(self):
            return ""

        def reduce(self, value, row):
            return "".join(sorted(value + row["word"][0]))

    from pyspark.sql import functions as F

    df = words_df(spark).withColumn("first", F.substring("word", 1, 1))
    for agg, expected in ((Sum("n"), {"t": 9, "c": 3, "a": 6, "d": 3, "b": 4}),
                          (Longest(), {"t": 3, "c": 3, "a": 3, "d": 3, "b": 4}),
                          (Joined(), {"t": "ttt", "c": "c", "a": "aa", "d": "d", "b": "b"})):
        factory = OpaqueMap.factory(RedisBackingMap.factory(backing.url, namespace=f"{backing.namespace}-{agg!r}"[:60]))
        persistent_aggregate(df, tx(1), factory, group_by=["first"], aggregator=agg)
        assert read(factory, list(expected)) == expected


def test_a_wrong_pair_is_refused_before_anything_is_written(spark, backing) -> None:
    class PipelineBatch:  # a SpoutPipeline batch in its at-least-once mode: no kind
        id = 7

    with pytest.raises(StatePairError, match="use an OpaqueMap"):
        persistent_aggregate(words_df(spark), TxBatch(1, SpoutKind.OPAQUE), TransactionalMap.factory(backing),
                             group_by=["word"], aggregator=Count())
    with pytest.raises(StatePairError, match="exactly_once=True"):
        persistent_aggregate(words_df(spark), PipelineBatch(), OpaqueMap.factory(backing), group_by=["word"],
                             aggregator=Count())
    assert read(OpaqueMap.factory(backing), ["the"]) == {"the": None}
    persistent_aggregate(words_df(spark), PipelineBatch(), NonTransactionalMap.factory(backing), group_by=["word"],
                         aggregator=Count())  # at-least-once by choice: accepted
    assert read(NonTransactionalMap.factory(backing), ["the"]) == {"the": 3}


def test_state_query_joins_each_rows_value(spark, backing) -> None:
    counts = OpaqueMap.factory(backing)
    persistent_aggregate(words_df(spark), tx(1), counts, group_by=["word"], aggregator=Count())
    probe = spark.createDataFrame([("the",), ("bird",), ("zebra",), ("the",)], "word string").repartition(2)
    joined = state_query(probe, counts, key_columns=["word"], result_column="count")
    got = sorted((r["word"], r["count"]) for r in joined.collect())
    assert got == [("bird", 1), ("the", 3), ("the", 3), ("zebra", None)]


def test_partition_persist_with_an_updater_on_memcached(spark, memcached) -> None:
    class LastLength:
        def update_state(self, state, rows):
            keys = sorted({(r["word"],) for r in rows})
            state.multi_put(keys, [len(k[0]) for k in keys])

    factory = TransactionalMap.factory(MemcachedBackingMap.factory(memcached.server,
                                                                   namespace=f"t-{uuid.uuid4().hex[:10]}"))
    result = partition_persist(words_df(spark), tx(1), factory, LastLength(), partition_by=["word"])
    assert result.keys == len(WORDS)
    assert read(factory, ["the", "bird"]) == {"the": 3, "bird": 4}


def test_bad_arguments_are_clear_errors(spark, backing) -> None:
    with pytest.raises(ValueError, match="group_by names columns .*'nope'"):
        persistent_aggregate(words_df(spark), tx(1), OpaqueMap.factory(backing), group_by=["nope"], aggregator=Count())
    with pytest.raises(ValueError, match="combiner .* or a reducer"):
        persistent_aggregate(words_df(spark), tx(1), OpaqueMap.factory(backing), group_by=["word"], aggregator=len)


class Crash(BaseException):
    """Ends a run like a crash would: not an Exception, so the pipeline does not treat it as a failed batch."""


def test_pipeline_exactly_once_replays_a_txid_with_the_same_records(spark, kinesalite, zookeeper, redis) -> None:
    """A failed record replays its batch under the same txid; a run cut short after the state write (before the
    commit) is replayed by the next run with exactly the same records, and committed records are never
    processed again; the OpaqueMap counts stay exact."""
    from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig
    from kinesis_spout.spark import SpoutPipeline

    stream = kinesalite.create_stream(shards=2)
    words = [f"w{i % 5}" for i in range(60)] + ["w7"]
    kinesalite.put(stream, [w.encode() for w in words])
    ns = f"t-{uuid.uuid4().hex[:10]}"
    counts = OpaqueMap.factory(RedisBackingMap.factory(redis.url, namespace=ns))
    log_map = RedisBackingMap.factory(redis.url, namespace=f"{ns}-log")
    seen: list[tuple[int, int, str, tuple[str, ...]]] = []
    crash_at = {"txid": 2}

    def process(df, batch):
        rows = df.select("message_id", F.col("data").cast("string").alias("word")).collect()
        seen.append((batch.id, batch.attempt, batch.kind, tuple(sorted(r.message_id for r in rows))))
        persistent_aggregate(df.select(F.col("data").cast("string").alias("word")), batch, counts,
                             group_by=["word"], aggregator=Count(), partitions=1)
        if batch.id == crash_at["txid"]:
            crash_at["txid"] = None
            raise Crash()
        return [r.message_id for r in rows if r.word == "w7" and batch.attempt == 1]

    from pyspark.sql import functions as F

    config = SpoutConfig(stream_name=stream, app_name="eo", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=kinesalite.endpoint_url, region="us-east-1",
                         initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2,
                         retry_backoff=RetryBackoff(initial_s=0.01, max_s=0.05))
    pipeline = SpoutPipeline(spark, config, process, trigger_interval_s=0.0, max_batch_records=20,
                             exactly_once=log_map)
    with pytest.raises(Crash):
        pipeline.run(timeout_s=60)
    crashed = seen[-1]
    assert crashed[0] == 2 and [s[0] for s in seen] == [1, 2]
    total = {"n": 0}

    def all_counted() -> bool:
        state = counts.make_state()
        try:
            total["n"] = sum(v or 0 for v in state.multi_get([(f"w{i}",) for i in (0, 1, 2, 3, 4, 7)]))
        finally:
            state.close()
        return total["n"] >= len(words)

    # counted is not enough: an OpaqueMap shows a failed attempt's write until its replay, and the replay of w7's
    # batch (attempt 2) must be part of the run
    pipeline.run(until=lambda: all_counted() and any(s[1] == 2 for s in seen), timeout_s=60)
    assert seen[2][0] == 2 and seen[2][3] == crashed[3], "the replay of txid 2 must hold the same records"
    assert all(kind == "transactional" for _, _, kind, _ in seen)
    txids = [s[0] for s in seen[2:]]
    assert all(b - a in (0, 1) for a, b in zip(txids, txids[1:])), f"txids in order, each replayed in place: {txids}"
    by_txid: dict[int, set[tuple[str, ...]]] = {}
    for txid, _, _, mids in seen:
        by_txid.setdefault(txid, set()).add(mids)
    assert all(len(v) == 1 for v in by_txid.values()), "every attempt of a txid holds the same records"
    assert any(attempt == 2 for _, attempt, _, _ in seen), "the failed w7 record replayed its batch"
    per_txid = [mid for v in by_txid.values() for mid in next(iter(v))]
    assert len(per_txid) == len(set(per_txid)) == len(words), "each record in exactly one txid"
    assert read(counts, [f"w{i}" for i in (0, 1, 2, 3, 4, 7)]) == {"w0": 12, "w1": 12, "w2": 12, "w3": 12,
                                                                   "w4": 12, "w7": 1}


def row_by_row():
    """A StateUpdater that updates the state row by row, as Trident state updaters may (made in a function, so
    that it is pickled by value for the Python workers)."""

    class RowByRow:
        def update_state(self, state, rows):
            for r in rows:
                state.multi_update([(r["word"],)], [lambda stored: (stored or 0) + 1])

    return RowByRow()


@pytest.mark.parametrize("cls", [TransactionalMap, OpaqueMap])
def test_partition_persist_row_by_row_counts_every_row(spark, backing, cls) -> None:
    counts = cls.factory(backing)
    df = words_df(spark, ["a", "a", "a", "b"], parts=1)
    partition_persist(df, tx(1), counts, row_by_row(), partition_by=["word"], partitions=2)
    partition_persist(df, tx(1), counts, row_by_row(), partition_by=["word"], partitions=2)  # Spark replays batch 1
    assert read(counts, ["a", "b"]) == {"a": 3, "b": 1}


def test_partition_persist_a_key_in_two_partitions(spark, backing) -> None:
    """Without partition_by the rows of 'a' sit in two partitions: the OpaqueMap adds both partitions' updates
    (and a replay recomputes them); the TransactionalMap, which could not replay that, is refused up front."""
    df = spark.sparkContext.parallelize([("a",), ("a",), ("a",), ("b",)], 2).toDF("word string")
    assert [sorted(r.word for r in p) for p in df.rdd.glom().collect()] == [["a", "a"], ["a", "b"]]
    counts = OpaqueMap.factory(backing)
    for _ in range(2):  # the batch and its replay
        partition_persist(df, tx(1, SpoutKind.OPAQUE), counts, row_by_row(), partitions=2)
        assert read(counts, ["a", "b"]) == {"a": 3, "b": 1}
    with pytest.raises(ValueError, match="TransactionalMap needs partition_by"):
        partition_persist(df, tx(1), TransactionalMap.factory(backing), row_by_row())


@pytest.mark.parametrize("cls", [TransactionalMap, OpaqueMap])
def test_a_loop_of_bare_batch_ids_is_refused_and_a_named_run_counts_right(spark, backing, cls) -> None:
    """A user's own loop passing 0, 1 as batches, run twice: the second run's ids would be taken for replays of
    the first and its counts silently lost. Refused before anything is written; a named run (TxBatch with run)
    counts, replays and goes on counting in its namespace, and another run is refused there."""
    counts = cls.factory(backing)
    batches = [["b", "c"], ["a", "a", "d"]]
    words = ["a", "b", "c", "d"]

    def loop(batch_of, first=0):
        for txid, batch_words in enumerate(batches, start=first):
            persistent_aggregate(words_df(spark, batch_words), batch_of(txid), counts, group_by=["word"],
                                 aggregator=Count())

    refused = []
    for _ in range(2):  # the loop, run twice
        try:
            loop(lambda txid: txid)
        except StateRunError as exc:
            refused.append(str(exc))
    assert read(counts, words) == dict.fromkeys(words)  # nothing of either run written
    assert len(refused) == 2
    assert re.search(r"batch 0 is a bare batch id outside a streaming query.*"
                     r"TxBatch\(0, SpoutKind\.TRANSACTIONAL, run=", refused[0])
    with pytest.raises(StateRunError, match=r"TxBatch without a run.*run="):
        persistent_aggregate(words_df(spark), TxBatch(0, SpoutKind.TRANSACTIONAL), counts, group_by=["word"],
                             aggregator=Count())
    with pytest.raises(StateRunError, match="bare batch id"):
        partition_persist(words_df(spark), 0, counts, row_by_row(), partition_by=["word"])

    nightly = lambda txid: TxBatch(txid, SpoutKind.TRANSACTIONAL, run="nightly")  # noqa: E731
    loop(nightly)
    persistent_aggregate(words_df(spark, batches[1]), nightly(1), counts, group_by=["word"],
                         aggregator=Count())  # a replay of txid 1 (after a crash, say): counted once
    assert read(counts, words) == {"a": 2, "b": 1, "c": 1, "d": 1}
    loop(nightly, first=2)  # the run goes on in its namespace with the txids after its last
    assert read(counts, words) == {"a": 4, "b": 2, "c": 2, "d": 2}
    with pytest.raises(StateRunError, match="belongs to run 'nightly'"):
        loop(lambda txid: TxBatch(txid, SpoutKind.TRANSACTIONAL, run="another"))
    assert read(counts, words) == {"a": 4, "b": 2, "c": 2, "d": 2}
    persistent_aggregate(words_df(spark, ["x"]), 0, NonTransactionalMap.factory(
        RedisBackingMap.factory(backing.url, namespace=f"{backing.namespace}-plain")), group_by=["word"],
        aggregator=Count())  # at-least-once, no txids: a bare id is accepted


def test_state_query_in_a_batch_reads_the_value_before_the_batch(spark, backing) -> None:
    """Trident's stateQuery reads in the batch: a replay of batch 1 reads what was there before batch 1 (its earlier
    attempt's counts are not seen); batch 2 reads batch 1's counts; without a batch, the latest values."""
    counts = OpaqueMap.factory(backing)
    first = TxBatch(1, SpoutKind.TRANSACTIONAL, run="r")
    persistent_aggregate(words_df(spark, ["the", "cat", "the"]), first, counts, group_by=["word"], aggregator=Count())
    probe = spark.createDataFrame([("the",), ("cat",), ("dog",)], "word string").repartition(2)

    def query(batch):
        joined = state_query(probe, counts, key_columns=["word"], result_column="count", batch=batch)
        return {r["word"]: r["count"] for r in joined.collect()}

    assert query(first) == {"the": None, "cat": None, "dog": None}
    assert query(TxBatch(2, SpoutKind.TRANSACTIONAL, run="r")) == {"the": 2, "cat": 1, "dog": None}
    assert query(None) == {"the": 2, "cat": 1, "dog": None}
    with pytest.raises(StateRunError, match="bare batch id"):
        query(1)
