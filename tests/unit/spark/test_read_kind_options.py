"""Options that belong to one kind of read: a stream read (``spark.readStream``) refuses the batch read's
``startingTimestamp`` and ``endingTimestamp`` naming its own way to start at a time, and needs ``appName``; the data
source refuses ``metricsPort``, which neither kind of read serves, saying where a stream read's figures are."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kinesis_spout import ConfigError
from kinesis_spout.spark.source import KinesisSpoutDataSource, parse_batch_options
from kinesis_spout.spark.source.datasource import RefusedStreamReader
from kinesis_spout.spark.source.offsets import parse_source_options

STREAM = {"streamName": "s", "appName": "a", "zookeeper": "127.0.0.1:2181"}


@pytest.mark.parametrize("name", ["startingTimestamp", "startingtimestamp"])  # Spark hands the names lower-cased
def test_a_stream_read_refuses_starting_timestamp_naming_its_own_way_to_start_at_a_time(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_source_options({**STREAM, name: "2026-11-22T10:00:00Z"})
    text = str(caught.value)
    assert text.startswith(f"option {name!r} is an option of batch reads (spark.read)"), text
    assert "initialPosition" in text and "AT_TIMESTAMP" in text and "initialTimestamp" in text
    assert "2026-11-22T10:00:00Z" in text  # the fix, with the user's own time
    assert "did you mean" not in text


def test_a_stream_read_refuses_ending_timestamp_saying_how_a_stream_read_ends() -> None:
    with pytest.raises(ConfigError, match=r"^option 'endingTimestamp' is an option of batch reads \(spark.read\).*"
                                          r"a stream read has no end.*availableNow"):
        parse_source_options({**STREAM, "endingTimestamp": "2026-11-22T10:00:00Z"})


def test_a_stream_read_without_app_name_says_what_it_names_and_how_to_give_it() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_source_options({"streamName": "s", "zookeeper": "127.0.0.1:2181"})
    text = str(caught.value)
    assert text.startswith("option 'appName' is required by a stream read (spark.readStream)"), text
    assert ".option('appName'" in text and "ZooKeeper" in text


def test_a_batch_read_takes_its_times_and_needs_no_app_name() -> None:
    config, start, end = parse_batch_options({"streamName": "s", "startingtimestamp": "2026-11-22T10:00:00Z",
                                              "endingTimestamp": "2026-11-22T11:00:00Z"})
    assert config.stream_name == "s" and start is not None and end is not None and start < end


@pytest.mark.parametrize("parse", [parse_source_options, parse_batch_options])
def test_metrics_port_is_refused_saying_where_a_stream_reads_figures_are(parse: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse({**STREAM, "metricsport": "9108"})  # type: ignore[operator]
    text = str(caught.value)
    assert text.startswith("option 'metricsport' is not served by the kinesis_spout Spark source"), text
    assert "lastProgress" in text and "spark.sql.streaming.metricsEnabled" in text
    assert "docs/guides/metrics.md" in text


def test_metrics_port_none_is_no_port_and_is_accepted() -> None:
    parse_source_options({**STREAM, "metricsPort": "none"})


def test_load_refuses_a_batch_reads_time_next_to_a_stream_reads_options_saying_what_each_kind_would_do() -> None:
    source = KinesisSpoutDataSource({"streamname": "s", "appname": "a", "readmode": "driver",
                                     "startingtimestamp": "2026-11-22T10:00:00Z"})
    with pytest.raises(ConfigError) as caught:
        source.schema()  # what Spark runs at load()
    text = str(caught.value)
    assert "option 'startingtimestamp' is an option of batch reads" in text and "'initialTimestamp'" in text
    assert "(If this is a batch read, spark.read, leave out 'appname', 'readmode':" in text, text


def test_load_refuses_a_stream_read_without_app_name_when_its_options_show_a_stream_read() -> None:
    with pytest.raises(ConfigError, match=r"^option 'appName' is required by a stream read.*leave out 'zookeeper'"):
        KinesisSpoutDataSource({"streamname": "s", "zookeeper": "127.0.0.1:2181"}).schema()


def test_a_stream_read_load_could_not_tell_from_a_batch_read_is_refused_by_the_readers_first_call() -> None:
    source = KinesisSpoutDataSource({"streamname": "s", "startingtimestamp": "2026-11-22T10:00:00Z"})
    reader = source.streamReader(None)  # Spark, at start(): raising here would be buried by PySpark
    assert isinstance(reader, RefusedStreamReader)
    for call in (reader.initialOffset, reader.getDefaultReadLimit, reader.prepareForTriggerAvailableNow,
                 lambda: reader.latestOffset({}, ReadAllAvailable())):
        with pytest.raises(ConfigError, match="option 'startingtimestamp' is an option of batch reads"):
            call()
    reader.stop()
