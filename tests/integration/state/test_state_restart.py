"""A readStream query restarted without its checkpoint location numbers its batches from 0 again: its batch ids
must not be taken for replays of the earlier query's (local Spark, real Redis). Restarted from its checkpoint
location, the same query replays and continues exactly."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kinesis_spout.state import Count, OpaqueMap, TransactionalMap, persistent_aggregate
from kinesis_spout.state.redis import RedisBackingMap

pytestmark = pytest.mark.slow
WORDS = ["a", "b", "c", "d"]


def files(folder: Path, batches: list[list[str]]) -> str:
    """One text file per batch (a word a line), oldest first: the file source reads one file per batch."""
    folder.mkdir()
    for i, words in enumerate(batches):
        path = folder / f"part-{i}.txt"
        path.write_text("".join(f"{w}\n" for w in words))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return str(folder)


class Counts:
    """A TransactionalMap and an OpaqueMap of word counts in one fresh Redis namespace each."""

    def __init__(self, redis_url: str) -> None:
        ns = f"t-{uuid.uuid4().hex[:10]}"
        self.maps = {name: cls.factory(RedisBackingMap.factory(redis_url, namespace=f"{ns}-{name}"))
                     for name, cls in (("tx", TransactionalMap), ("opaque", OpaqueMap))}

    def write(self, df, batch_id) -> None:
        for factory in self.maps.values():
            persistent_aggregate(df.withColumnRenamed("value", "word"), batch_id, factory, group_by=["word"],
                                 aggregator=Count())

    def read(self) -> dict[str, dict[str, int]]:
        out = {}
        for name, factory in self.maps.items():
            state = factory.make_state()
            try:
                out[name] = {w: n for w, n in zip(WORDS, state.multi_get([(w,) for w in WORDS])) if n is not None}
            finally:
                state.close()
        return out


def run_query(spark, source: str, checkpoint: Path, process) -> Exception | None:
    """Run a query over ``source`` to its end (one file per batch); the error it ended with, if any."""
    query = (spark.readStream.schema("value string").option("maxFilesPerTrigger", 1).text(source)
             .writeStream.foreachBatch(process).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    except Exception as exc:  # noqa: BLE001 - the query's failure is what the tests look at
        return exc
    finally:
        query.stop()
    return query.exception()


def test_a_query_restarted_without_its_checkpoint_location_is_refused(spark, redis, tmp_path: Path) -> None:
    counts = Counts(redis.url)
    first = files(tmp_path / "first", [["b", "c"]])
    assert run_query(spark, first, tmp_path / "checkpoint-1", counts.write) is None
    assert counts.read() == {"tx": {"b": 1, "c": 1}, "opaque": {"b": 1, "c": 1}}
    # the query starts again with a new checkpoint location: its batch ids start at 0 again
    later = files(tmp_path / "later", [["b", "b", "c"], ["a", "a", "a", "d"]])
    error = run_query(spark, later, tmp_path / "checkpoint-2", counts.write)
    assert error is not None, (f"the new query's batches were taken for replays: {counts.read()}, where every record "
                               f"counted once is {{'a': 3, 'b': 3, 'c': 2, 'd': 1}}")
    assert "StateRunError" in str(error) and "checkpointLocation" in str(error) and "namespace" in str(error)
    assert counts.read() == {"tx": {"b": 1, "c": 1}, "opaque": {"b": 1, "c": 1}}, "nothing of the batch written"


@pytest.fixture
def shuffle_partitions_kept(spark):
    """Spark's adaptive execution merges the small shuffle partitions of these batches into one: keep them apart,
    so that a batch's keys are written by several tasks."""
    name = "spark.sql.adaptive.coalescePartitions.enabled"
    before = spark.conf.get(name)
    spark.conf.set(name, "false")
    yield
    spark.conf.set(name, before)


def test_a_refused_run_writes_none_of_its_new_keys_either(spark, redis, tmp_path: Path,
                                                          shuffle_partitions_kept) -> None:
    """The refusal comes before the batch's Spark job: keys the earlier query never wrote (in partitions without
    any of its keys) are not written by the new query either, so restoring the checkpoint location later works."""
    counts = Counts(redis.url)
    assert run_query(spark, files(tmp_path / "first", [["b"]]), tmp_path / "checkpoint-1", counts.write) is None
    many = [f"n{i}" for i in range(12)]
    error = run_query(spark, files(tmp_path / "later", [["b", *many]]), tmp_path / "checkpoint-2", counts.write)
    assert "StateRunError" in str(error)
    for factory in counts.maps.values():
        state = factory.make_state()
        try:
            assert state.multi_get([(w,) for w in many]) == [None] * len(many)
        finally:
            state.close()
    # the first query, restarted from its checkpoint location, goes on
    more = tmp_path / "first" / "part-1.txt"
    more.write_text("b\nn1\n")
    os.utime(more, (1_700_000_001, 1_700_000_001))
    assert run_query(spark, str(tmp_path / "first"), tmp_path / "checkpoint-1", counts.write) is None
    assert counts.read() == {"tx": {"b": 2}, "opaque": {"b": 2}}


def test_a_query_restarted_from_its_checkpoint_location_replays_and_continues(spark, redis, tmp_path: Path) -> None:
    counts = Counts(redis.url)
    source = files(tmp_path / "words", [["b", "c"], ["b", "b", "c"]])
    checkpoint = tmp_path / "checkpoint"
    failed = []

    def fail_once_after_writing(df, batch_id) -> None:
        counts.write(df, batch_id)
        if batch_id == 1 and not failed:
            failed.append(batch_id)
            raise RuntimeError("the batch fails after its state was written")

    assert "after its state was written" in str(run_query(spark, source, checkpoint, fail_once_after_writing))
    assert run_query(spark, source, checkpoint, fail_once_after_writing) is None  # replays batch 1
    extra = tmp_path / "words" / "part-2.txt"
    extra.write_text("a\na\na\nd\n")
    os.utime(extra, (1_700_000_002, 1_700_000_002))
    assert run_query(spark, source, checkpoint, counts.write) is None
    expected = {"a": 3, "b": 3, "c": 2, "d": 1}
    assert counts.read() == {"tx": expected, "opaque": expected}
