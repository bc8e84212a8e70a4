"""Which save modes a ``kinesis_spout`` write takes on Spark 4.3, and what the refusals say.

Spark itself refuses its default mode (ErrorIfExists) and ``ignore`` for every Python data source with
``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``, before the data source is asked, and its message suggests "Append" or
"Overwrite". A Kinesis stream cannot be overwritten, so the sink refuses ``overwrite`` (and a streaming
``outputMode("complete")``, which Spark hands over as an overwrite): its error must point to what works,
``mode("append")``, and never back to leaving the mode out, which is what Spark just refused. ``mode("append")``
writes, and ``writeStream`` works with its default output mode (append)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.spark import register
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import raw_records


def writer(df: Any, endpoint: KinesisEndpoint, stream: str) -> Any:
    return df.write.format("kinesis_spout").option("streamName", stream).option("endpointUrl", endpoint.endpoint_url)


def stored(endpoint: KinesisEndpoint, stream: str) -> list[bytes]:
    return sorted(r["Data"] for records in raw_records(endpoint, stream).values() for r in records)


def test_spark_refuses_the_default_mode_the_sink_refuses_overwrite_pointing_to_append_and_append_writes(
        kinesalite: KinesisEndpoint, spark: Any) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=1)
    df = spark.range(3).selectExpr("'k' AS partitionKey", "CAST(id AS STRING) AS data")
    for mode in (None, "error", "ignore"):  # Spark's own refusal: the reason every snippet says mode("append")
        w = writer(df, kinesalite, stream)
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            (w if mode is None else w.mode(mode)).save()
    with pytest.raises(Exception, match=r"only appends .*: write with \.mode\(\"append\"\)") as raised:
        writer(df, kinesalite, stream).mode("overwrite").save()
    assert "leave the mode out" not in str(raised.value)
    assert "ErrorIfExists" in str(raised.value), "says why the mode must be given"
    assert stored(kinesalite, stream) == []
    writer(df, kinesalite, stream).mode("append").save()
    assert stored(kinesalite, stream) == [b"0", b"1", b"2"]


def test_a_streaming_write_in_complete_mode_is_refused_pointing_to_append_and_the_default_mode_writes(
        kinesalite: KinesisEndpoint, spark: Any, tmp_path: Path) -> None:
    register(spark)
    stream = kinesalite.create_stream(shards=1)
    events = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 20).load()
    counts = events.groupBy((events.value % 3).alias("k")).count() \
        .selectExpr("CAST(k AS STRING) AS partitionKey", "CAST(count AS STRING) AS data")
    query = (counts.writeStream.format("kinesis_spout").outputMode("complete").option("streamName", stream)
             .option("endpointUrl", kinesalite.endpoint_url).option("checkpointLocation", str(tmp_path / "complete"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"only appends .*outputMode\(\"complete\"\) .*: use outputMode\(\"append\"\)"
                       ) as raised:
        query.awaitTermination(120)
    assert "leave the mode out" not in str(raised.value)
    rows = events.selectExpr("CAST(value % 5 AS STRING) AS partitionKey", "CAST(value AS STRING) AS data")
    query = (rows.writeStream.format("kinesis_spout").option("streamName", stream)
             .option("endpointUrl", kinesalite.endpoint_url).option("checkpointLocation", str(tmp_path / "append"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert stored(kinesalite, stream) == sorted(str(n).encode() for n in range(20))
