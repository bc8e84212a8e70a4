"""Option errors of the Structured Streaming source on a real Spark session: when they come, and what they say.

At ``load()`` Spark runs only the data source's constructor and ``schema()``, with the same options for
``spark.read`` and ``spark.readStream``: nothing tells the source which kind of read it serves. So a stream read's
errors come at ``load()`` whenever its options show it is a stream read (``appName``, ``zookeeper``,
``initialPosition``, ``readMode``, a trigger limit...), which every documented stream read does; options that
could be a batch read's fail at ``start()``, with the same message and without PySpark's ``UnboundLocalError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import load, source_options

WHEN = "2026-11-22T10:00:00+00:00"


def test_a_stream_read_given_a_batch_reads_start_time_fails_at_load_naming_its_own_way_to_start_at_a_time(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    options = {k: v for k, v in source_options(moto_kinesis, zookeeper, stream).items() if k != "initialPosition"}
    with pytest.raises(Exception) as caught:
        load(spark, {**options, "startingTimestamp": WHEN})
    text = str(caught.value)
    assert "option 'startingtimestamp' is an option of batch reads (spark.read)" in text, text
    assert f".option('initialPosition', 'AT_TIMESTAMP').option('initialTimestamp', '{WHEN}')" in text
    assert "did you mean" not in text and "UnboundLocalError" not in text


def test_a_stream_read_without_app_name_fails_at_load_saying_how_to_give_it(spark: Any, moto_kinesis: KinesisEndpoint,
                                                                           zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    options = {k: v for k, v in source_options(moto_kinesis, zookeeper, stream).items() if k != "appName"}
    with pytest.raises(Exception, match=r"option 'appName' is required by a stream read \(spark.readStream\).*"
                                        r"\.option\('appName', "):
        load(spark, options)


def test_metrics_port_fails_at_load_saying_where_a_stream_reads_figures_are(spark: Any, moto_kinesis: KinesisEndpoint,
                                                                           zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    with pytest.raises(Exception, match=r"option 'metricsport' is not served by the kinesis_spout Spark source.*"
                                        r"lastProgress.*spark.sql.streaming.metricsEnabled"):
        load(spark, source_options(moto_kinesis, zookeeper, stream, metricsPort="9108"))


@pytest.mark.parametrize("extra, message", [
    ({"startingTimestamp": WHEN}, "option 'startingtimestamp' is an option of batch reads"),
    ({}, "option 'appName' is required by a stream read"),
])
def test_a_stream_read_whose_options_could_be_a_batch_reads_fails_at_start_with_the_same_message(
        spark: Any, moto_kinesis: KinesisEndpoint, tmp_path: Path, extra: dict[str, str], message: str) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    options = {"streamName": stream, "endpointUrl": moto_kinesis.endpoint_url, "region": moto_kinesis.region, **extra}
    df = load(spark, options)  # a batch read could have these options (no appName): load() cannot refuse them
    query = (df.writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.awaitTermination(120)
    except Exception:  # noqa: BLE001 - the failed query: its exception is looked at below
        pass
    assert not query.isActive
    text = str(query.exception())
    assert message in text, text[-3000:]
    assert "UnboundLocalError" not in text and "did you mean" not in text, text[-3000:]
