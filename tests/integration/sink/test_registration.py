"""A write finds the registered source whatever the JVM thread's session state (Spark looks write sources up in the
thread's *active* session, which a thread can lack)."""

from __future__ import annotations

from typing import Any

from kinesis_spout.spark import register
from kinesis_spout.testing import KinesisEndpoint


def test_a_write_after_register_finds_the_source_when_the_thread_had_no_active_session(
        spark: Any, kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    spark._jvm.org.apache.spark.sql.SparkSession.clearActiveSession()  # the state some failed queries leave
    register(spark)
    (spark.range(3).selectExpr("'k' AS partitionKey", "CAST(id AS STRING) AS data")
     .write.format("kinesis_spout").option("streamName", stream).option("endpointUrl", kinesalite.endpoint_url)
     .mode("append").save())
    shard = kinesalite.shard_ids(stream)[0]
    client = kinesalite.client()
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert sorted(r["Data"] for r in client.get_records(ShardIterator=iterator)["Records"]) == [b"0", b"1", b"2"]
