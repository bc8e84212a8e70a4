"""``df.write.format("kinesis_spout")`` on a local[2] session, read back with the spout: every row once, in order per
partition key within a task; aggregated output read back by aws-kinesis-agg and by the spout with the same user
records and keys, each in a shard that serves its hash key; entries refused by Kinesis put again (only they);
bad input refused with an error naming the problem before anything of it is written."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

import pytest

from kinesis_spout.kinesis.aggregation import deaggregate, hash_key
from kinesis_spout.spark import register
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from tests.unit.kinesis.aggregates import theirs

from .support import hash_ranges, raw_records, read_with_spout, user_records_in_range

PTEE = "ProvisionedThroughputExceededException"


def rows(spark: Any, n: int, tasks: int = 2) -> Any:
    """``n`` rows over ``tasks`` partitions: partition key ``k<id % 37>``, data JSON of the id and its partition."""
    return spark.range(0, n, 1, tasks).selectExpr(
        "concat('k', CAST(id % 37 AS STRING)) AS partitionKey",
        "to_json(named_struct('id', id, 'task', spark_partition_id())) AS data")


def save(df: Any, endpoint: KinesisEndpoint | str, stream: str, **options: str) -> None:
    url = endpoint if isinstance(endpoint, str) else endpoint.endpoint_url
    (df.write.format("kinesis_spout").option("streamName", stream).option("endpointUrl", url)
     .option("region", "us-east-1").options(**options).mode("append").save())


def test_a_batch_write_puts_every_row_once_in_order_per_key_within_a_task(kinesalite: KinesisEndpoint,
                                                                         spark: Any) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=3)
    save(rows(spark, 3000, tasks=3), kinesalite, stream)
    got = read_with_spout(kinesalite, stream, 3000)
    ids = Counter(json.loads(r.data)["id"] for r in got)
    assert ids == Counter(range(3000)), "every row once"
    by_key_task: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in got:
        row = json.loads(r.data)
        by_key_task[(r.partition_key, row["task"])].append(row["id"])
    for seen in by_key_task.values():
        assert seen == sorted(seen)


def test_an_aggregated_write_is_read_back_with_the_same_user_records_keys_and_hash_keys(
        kinesalite: KinesisEndpoint, spark: Any) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=4)
    df = spark.range(0, 2000, 1, 2).selectExpr(
        "concat('key-', CAST(id % 101 AS STRING)) AS partitionKey",
        "CAST(concat('row ', CAST(id AS STRING)) AS BINARY) AS data",
        "CASE WHEN id % 7 = 0 THEN concat(CAST(id + 1 AS STRING), repeat('0', 35)) END AS explicitHashKey")
    save(df, kinesalite, stream, aggregate="true")
    expected = Counter((r.partitionKey, r.explicitHashKey, bytes(r.data)) for r in df.collect())
    raw = raw_records(kinesalite, stream)
    assert sum(len(v) for v in raw.values()) < 100, "user records were packed into aggregates"
    delivered = user_records_in_range(kinesalite, stream)
    assert Counter((u.partition_key, u.explicit_hash_key, u.data) for _, u in delivered) == expected
    ranges = hash_ranges(kinesalite, stream)
    their_users = [(ours, their) for records in raw.values() for r in records
                   for ours, their in zip(deaggregate(r["Data"]) or [], theirs(r["Data"]), strict=True)]
    assert len(their_users) == 2000, "aws-kinesis-agg reads every user record"
    for ours, their in their_users:
        assert (their.partition_key, their.data) == (ours.partition_key, ours.data)
        if ours.explicit_hash_key is not None:  # (it hands records without one the previous record's)
            assert their.explicit_hash_key == ours.explicit_hash_key
    for sid, user in delivered:
        low, high = ranges[sid]
        key = hash_key(user.partition_key, user.explicit_hash_key)
        assert key is not None and low <= key <= high
    spout = Counter((r.partition_key, r.data) for r in read_with_spout(kinesalite, stream, 2000))
    assert spout == Counter((pk, data) for pk, _, data in expected)


def test_entries_refused_by_kinesis_are_put_again_alone_and_none_is_lost_or_doubled(
        kinesalite: KinesisEndpoint, spark: Any) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=2)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        proxy.refuse_records({0: PTEE, 7: PTEE, 499: "InternalFailure"}, {1: PTEE}, {0: PTEE})
        save(rows(spark, 1200, tasks=2), proxy.endpoint_url, stream)
        assert proxy.pending() == 0
        assert proxy.injected == {f"PutRecords:{PTEE}": 4, "PutRecords:InternalFailure": 1}
    got = read_with_spout(kinesalite, stream, 1200)
    assert Counter(json.loads(r.data)["id"] for r in got) == Counter(range(1200)), "each row once"


@pytest.mark.parametrize(("select", "problem"), [
    (["'k' AS partitionKey", "CAST(NULL AS STRING) AS data"], r"row 0 of .* its data is null"),
    (["'k' AS partitionKey", "repeat('x', 1048576) AS data"], r"row 0 of .*1048577 bytes .* at most 1 MiB"),
    (["CAST(NULL AS STRING) AS partitionKey", "'x' AS data"], r"row 0 of .*partition key is null or empty"),
])
def test_a_row_kinesis_cannot_take_fails_the_write_naming_it_and_nothing_of_its_batch_is_put(
        kinesalite: KinesisEndpoint, spark: Any, select: list[str], problem: str) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=1)
    good = spark.range(0, 50, 1, 1).selectExpr("'k' AS partitionKey", "CAST(id AS STRING) AS data")
    bad = spark.range(0, 1, 1, 1).selectExpr(*select)
    with pytest.raises(Exception, match=problem):
        save(bad.unionByName(good).coalesce(1), kinesalite, stream)
    assert raw_records(kinesalite, stream) == {kinesalite.shard_ids(stream)[0]: []}


def test_missing_or_mistyped_columns_and_a_missing_stream_fail_before_anything_is_written(
        kinesalite: KinesisEndpoint, spark: Any) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=1)
    df = spark.range(3)
    with pytest.raises(Exception, match=r"needs a column 'data' \(binary or string\).*columns: id bigint"):
        save(df, kinesalite, stream)
    with pytest.raises(Exception, match=r"column 'data' is bigint: .* writes binary or string data"):
        save(df.selectExpr("id AS data", "'k' AS partitionKey"), kinesalite, stream)
    with pytest.raises(Exception, match=r"needs a partition key column 'partitionKey' \(option partitionKeyColumn"):
        save(df.selectExpr("CAST(id AS STRING) AS data"), kinesalite, stream)
    with pytest.raises(Exception, match=r"partition key column 'partitionKey' is bigint: it must be a string"):
        save(df.selectExpr("CAST(id AS STRING) AS data", "id AS partitionKey"), kinesalite, stream)
    with pytest.raises(Exception, match=r"cannot write to stream 'nope': it does not exist .* create it"):
        save(df.selectExpr("CAST(id AS STRING) AS data", "'k' AS partitionKey"), kinesalite, "nope")
    with pytest.raises(Exception, match=r"option 'initialposition' is not an option of the kinesis_spout sink"):
        save(df.selectExpr("CAST(id AS STRING) AS data", "'k' AS partitionKey"), kinesalite, stream,
             initialPosition="LATEST")
    assert raw_records(kinesalite, stream) == {kinesalite.shard_ids(stream)[0]: []}
    # the fixes the errors name work: another key column, or one constant key
    save(df.selectExpr("CAST(id AS STRING) AS data", "CAST(id AS STRING) AS k"), kinesalite, stream,
         partitionKeyColumn="k")
    save(df.selectExpr("CAST(id AS STRING) AS data"), kinesalite, stream, partitionKey="constant")
    keys = Counter(r["PartitionKey"] for records in raw_records(kinesalite, stream).values() for r in records)
    assert keys == Counter({"0": 1, "1": 1, "2": 1, "constant": 3})
