"""A driver-read micro-batch hands its records to the tasks inside the partitions, and Spark warns about every task
over 1000 KiB ("Stage N contains a task of very large size"): on every batch of a busy stream. The kept records
are cut into partitions under that size (a shard's records may span several, in order), and together the
partitions hold every record once, in order."""

from __future__ import annotations

import pickle
from datetime import datetime, timezone

import pyarrow as pa

from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.spark.source.codec import decode_batches
from kinesis_spout.spark.source.driver import kept_partitions

SPARK_WARNS_OVER = 1000 * 1024  # spark.scheduler's TASK_SIZE_TO_WARN_KIB


def record(shard: str, seq: int, size: int) -> Record:
    return Record(shard, str(seq), None, "k", bytes([seq % 251]) * size, datetime.now(timezone.utc),
                  SequenceKey(seq, 0))


def test_kept_records_of_a_busy_batch_travel_in_partitions_under_spark_s_task_size_warning() -> None:
    big = [record("shardId-000000000000", i, 1000) for i in range(2500)]  # about 2.5 MB of one shard
    small = [record("shardId-000000000001", i, 100) for i in range(10)]
    runs = [[("shardId-000000000000", "a", "b", big)], [("shardId-000000000001", "c", "d", small)]]
    partitions = kept_partitions("s", runs)
    sizes = [len(pickle.dumps(p)) for p in partitions]
    assert max(sizes) < SPARK_WARNS_OVER, sizes
    table = pa.Table.from_batches([b for p in partitions for b in decode_batches(p.arrow)])
    got = list(zip(table.column("shard_id").to_pylist(), table.column("sequence_number").to_pylist()))
    assert got == [(r.shard_id, r.sequence_number) for r in big + small]


def test_a_small_batch_stays_one_partition_per_run() -> None:
    runs = [[("shardId-000000000000", "a", "b", [record("shardId-000000000000", i, 10) for i in range(5)]),
             ("shardId-000000000001", "c", "d", [record("shardId-000000000001", i, 10) for i in range(5)])]]
    assert len(kept_partitions("s", runs)) == 1
