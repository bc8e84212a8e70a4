"""Two operation calls of one batch attempt on one state namespace: the second would be taken for a replay of the
first (and skip or recompute its keys), so it is refused on the driver, before anything of it is written; a replay
of the batch (a new attempt) and calls on other namespaces go through."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass

import pytest

from kinesis_spout.state import (
    Count,
    NonTransactionalMap,
    OpaqueMap,
    StateSecondWriteError,
    TransactionalMap,
    persistent_aggregate,
)
from kinesis_spout.state.redis import RedisBackingMap

pytestmark = pytest.mark.slow


@dataclass
class Batch:
    """What SpoutPipeline hands its batch function in exactly-once mode: a new object per attempt of a txid."""

    id: int
    kind: str | None = "transactional"
    attempt: int = 1
    run_id: str | None = "log-1"


def words_df(spark, words):
    return spark.createDataFrame([(w,) for w in words], "word string")


def read(factory, words):
    state = factory.make_state()
    try:
        return state.multi_get([(w,) for w in words])
    finally:
        state.close()


@pytest.mark.parametrize("cls", [TransactionalMap, OpaqueMap])
def test_a_second_call_of_one_pipeline_batch_on_one_namespace_is_refused(spark, redis, cls) -> None:
    ns = f"t-{uuid.uuid4().hex[:10]}"
    counts = cls.factory(RedisBackingMap.factory(redis.url, namespace=ns))
    other = cls.factory(RedisBackingMap.factory(redis.url, namespace=f"{ns}-other"))
    batch = Batch(1)
    persistent_aggregate(words_df(spark, ["a", "b"]), batch, counts, group_by=["word"], aggregator=Count())
    persistent_aggregate(words_df(spark, ["a"]), batch, other, group_by=["word"], aggregator=Count())
    with pytest.raises(StateSecondWriteError, match=rf"batch 1 .*namespace {ns!r}.*one call per namespace"):
        persistent_aggregate(words_df(spark, ["a", "c"]), batch, counts, group_by=["word"], aggregator=Count())
    assert read(counts, ["a", "b", "c"]) == [1, 1, None]  # nothing of the refused call was written
    replay = Batch(1, attempt=2)  # the batch's replay: a new attempt, the same txid
    persistent_aggregate(words_df(spark, ["a", "b"]), replay, counts, group_by=["word"], aggregator=Count())
    assert read(counts, ["a", "b"]) == [1, 1]
    persistent_aggregate(words_df(spark, ["a"]), Batch(2), counts, group_by=["word"], aggregator=Count())
    assert read(counts, ["a"]) == [2]


def test_a_second_call_in_one_foreach_batch_is_refused_and_the_restarted_query_replays(spark, redis,
                                                                                        tmp_path) -> None:
    ns = f"t-{uuid.uuid4().hex[:10]}"
    counts = OpaqueMap.factory(RedisBackingMap.factory(redis.url, namespace=ns))
    source = tmp_path / "in"
    source.mkdir()
    (source / "words.json").write_text("\n".join(json.dumps({"word": w}) for w in ["a", "a", "b"]))
    refused: list[BaseException] = []
    fail_once = threading.Event()

    def each(df, batch_id):
        persistent_aggregate(df, batch_id, counts, group_by=["word"], aggregator=Count(), partitions=1)
        try:
            persistent_aggregate(df, batch_id, counts, group_by=["word"], aggregator=Count(), partitions=1)
        except StateSecondWriteError as exc:
            refused.append(exc)
        if not fail_once.is_set():
            fail_once.set()
            raise RuntimeError("the batch fails after its state write: the restarted query replays it")

    def run() -> None:
        query = (spark.readStream.schema("word string").json(str(source)).writeStream.foreachBatch(each)
                 .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        finally:
            query.stop()

    with pytest.raises(Exception, match="replays it"):
        run()
    run()  # the same query (its checkpoint location), a new Spark run: batch 0 again, a replay
    assert len(refused) == 2
    assert read(counts, ["a", "b"]) == [2, 1]


def test_a_non_transactional_map_counts_every_call_of_a_batch(spark, redis) -> None:
    """A NonTransactionalMap stores no txid, so a second call is no replay to confuse: both count."""
    counts = NonTransactionalMap.factory(RedisBackingMap.factory(redis.url, namespace=f"t-{uuid.uuid4().hex[:10]}"))
    batch = Batch(1, kind=None)
    for _ in range(2):
        persistent_aggregate(words_df(spark, ["a"]), batch, counts, group_by=["word"], aggregator=Count())
    assert read(counts, ["a"]) == [2]
