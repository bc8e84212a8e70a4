"""KPL aggregated records through the Structured Streaming source: user-record granularity.

Aggregates made by aws-kinesis-agg come out of ``readStream`` as their user records. A batch may end inside an
aggregate (its offset says ``SEQ:SUB``), ``maxRecordsPerTrigger`` counts user records, a replay reads exactly the
same user records, and a checkpoint the spout left inside an aggregate is where a query starts. The first tests
drive the reader as Spark does, without a session; the last runs a word count on Spark.
"""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout import KinesisSpout, SpoutConfig
from kinesis_spout.spark.source import KinesisSpoutStreamReader, ShardRange
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain

from ..support import aggregate
from .support import collecting_sink, load, read_partition, run_batches, source_options, stored_checkpoints

USERS = [(f"user-{i % 5}", f"event {i}".encode()) for i in range(60)]


def user_ids(placed: list[tuple[str, str]], sizes: list[int]) -> list[str]:
    """The message ids of the user records of Kinesis records ``placed``, ``sizes[i]`` user records each (0 for a
    plain record): ``shard:seq`` for a plain record and for user record 0, ``shard:seq:sub`` after it."""
    out = []
    for (shard, seq), n in zip(placed, sizes):
        out += [f"{shard}:{seq}"] + [f"{shard}:{seq}:{sub}" for sub in range(1, n)] if n else [f"{shard}:{seq}"]
    return out


def put_mixed(endpoint: KinesisEndpoint, stream: str) -> tuple[list[tuple[str, str]], list[int]]:
    """Two aggregates (25 and 35 user records) around a plain record, all on one shard."""
    records = [aggregate(USERS[:25]), ("plain", b"plain record"), aggregate(USERS[25:])]
    placed = endpoint.put(stream, [data for _, data in records], partition_keys=["same"] * 3)
    return placed, [25, 0, 35]


def test_batches_cut_aggregates_by_the_record_limit_and_replays_read_the_same_user_records(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    placed, sizes = put_mixed(kinesalite, stream)
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="7"))
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, reader.initialOffset(), ReadMaxRows(7))
    got = [mid for *_, ids in batches for mid in ids]
    assert got == user_ids(placed, sizes)  # every user record once, in order
    assert all(len(ids) <= 7 for *_, ids in batches) and len(batches) == 9  # 61 user records, 7 a batch
    ends = [end[placed[0][0]] for _, end, _, _ in batches]
    assert ends[0] == f"{placed[0][1]}:6" and ends[3] == f"{placed[2][1]}:1"  # batches end inside aggregates
    assert final == {placed[0][0]: placed[2][1]}  # the last batch took the whole of the last aggregate
    fresh = pickle.loads(pickle.dumps(reader))  # a new process: each batch read again from Kinesis
    for start, end, _, ids in batches:
        parts = fresh.partitions(start, end)
        assert all(isinstance(p, ShardRange) for p in parts)
        assert [mid for p in parts for mid in read_partition(fresh, p)] == ids
    stored = stored_checkpoints(zookeeper, stream)[placed[0][0]]
    assert (stored["sequence_number"], stored.get("sub_sequence_number")) == (placed[2][1], None)
    reader.stop()


def test_a_query_starts_inside_the_aggregate_where_the_spout_left_its_checkpoint(kinesalite: KinesisEndpoint,
                                                                                 zookeeper: Any) -> None:
    """The spout acks 30 user records (all of the first aggregate, the plain record and 4 of the second) and
    stops: a query with the same app name starts in the second aggregate after its user record 3."""
    stream = kinesalite.create_stream(shards=1)
    placed, sizes = put_mixed(kinesalite, stream)
    options = source_options(kinesalite, zookeeper, stream)
    config = SpoutConfig.from_options({k: v for k, v in options.items()})
    with KinesisSpout(config) as spout:
        first = drain(spout, 30, ack=False)
        spout.ack_many(t.message_id for t in first)
        assert spout.flush_checkpoints()
    shard = placed[0][0]
    stored = stored_checkpoints(zookeeper, stream)[shard]
    assert (stored["sequence_number"], stored["sub_sequence_number"]) == (placed[2][1], 3)
    reader = KinesisSpoutStreamReader(options)
    start = reader.initialOffset()
    assert start == {shard: f"{placed[2][1]}:3"}
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, start, ReadMaxRows(1000))
    assert [mid for *_, ids in batches for mid in ids] == user_ids(placed, sizes)[30:]
    assert final == {shard: placed[2][1]}
    replayed = pickle.loads(pickle.dumps(reader))
    parts = replayed.partitions(start, final)
    assert [mid for p in parts for mid in read_partition(replayed, p)] == user_ids(placed, sizes)[30:]
    reader.stop()


def test_deaggregate_false_reads_aggregates_whole(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    placed, _ = put_mixed(kinesalite, stream)
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, deaggregate="false"))
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, reader.initialOffset(), ReadMaxRows(1000))
    assert [mid for *_, ids in batches for mid in ids] == [f"{s}:{q}" for s, q in placed]
    assert all(":" not in pos for _, end, _, _ in batches for pos in end.values())
    reader.stop()


def test_spark_word_count_over_an_aggregated_stream(spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any,
                                                     tmp_path: Path) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    sentences = [f"the quick fox {i % 3} jumps" for i in range(120)]
    records = [aggregate([(f"key-{i}", s.encode()) for i, s in enumerate(sentences[j:j + 40], start=j)])
               for j in range(0, 120, 40)]
    moto_kinesis.put(stream, [data for _, data in records], partition_keys=[f"agg-{i}" for i in range(3)])
    batches: dict[int, list[dict[str, Any]]] = {}
    # aws-kinesis-agg aggregates user records of both shards and puts them nowhere else: keep them all
    df = load(spark, source_options(moto_kinesis, zookeeper, stream, maxRecordsPerTrigger="30",
                                    dropForeignUserRecords="false"))
    query = (df.writeStream.foreachBatch(collecting_sink(batches)).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    assert query.awaitTermination(180), "the AvailableNow query did not stop"
    assert query.exception() is None
    rows = [row for batch in batches.values() for row in batch]
    assert max(len(b) for b in batches.values()) <= 30 and len(rows) == 120
    counts = Counter(word for row in rows for word in row["data"].decode().split())
    assert counts == Counter(word for s in sentences for word in s.split())
    assert sorted(row["sub_sequence_number"] for row in rows) == sorted(list(range(40)) * 3)
    assert {row["partition_key"] for row in rows} == {f"key-{i}" for i in range(120)}
