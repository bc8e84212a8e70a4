"""A write finds the registered source after a failed query (Spark looks write sources up in the JVM thread's
*active* session, which a failed query can leave the thread without)."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_spout.spark import register
from kinesis_spout.testing import KinesisEndpoint


def test_a_write_after_a_failed_query_finds_the_registered_source(
        spark: Any, kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    register(spark)
    with pytest.raises(Exception, match="no-such-stream"):  # a query that fails at load
        (spark.readStream.format("kinesis_spout").option("streamName", "no-such-stream")
         .option("endpointUrl", kinesalite.endpoint_url).option("appName", "t").load())
    register(spark)
    (spark.range(3).selectExpr("'k' AS partitionKey", "CAST(id AS STRING) AS data")
     .write.format("kinesis_spout").option("streamName", stream).option("endpointUrl", kinesalite.endpoint_url)
     .mode("append").save())
    shard = kinesalite.shard_ids(stream)[0]
    client = kinesalite.client()
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert sorted(r["Data"] for r in client.get_records(ShardIterator=iterator)["Records"]) == [b"0", b"1", b"2"]
