"""A misspelled readStream option suggests the nearest name; Kafka's option names are refused with the option that
does the job here."""

from __future__ import annotations

import pytest

from kinesis_spout import ConfigError, SpoutConfig
from kinesis_spout.spark.source.offsets import parse_source_options

BASE = {"streamName": "s", "appName": "a"}


@pytest.mark.parametrize("typed, meant", [
    ("initalPosition", "initialPosition"),
    ("initialposition2", "initialPosition"),  # Spark hands the names lower-cased
    ("maxrecordspertriger", "maxRecordsPerTrigger"),
    ("checkpointInterval", "checkpointIntervalS"),
    ("endpoint_url2", "endpointUrl"),
])
def test_a_misspelled_option_suggests_the_nearest_name(typed: str, meant: str) -> None:
    with pytest.raises(ConfigError, match=rf"^unknown option '{typed}': did you mean '{meant}'\?"):
        parse_source_options({**BASE, typed: "1"})


def test_a_name_like_none_says_where_the_names_are() -> None:
    with pytest.raises(ConfigError) as caught:
        SpoutConfig.from_options({**BASE, "zzzzzz": "1"})
    text = str(caught.value)
    assert "did you mean" not in text and "known options:" in text and "streamName" in text


@pytest.mark.parametrize("kafka, ours", [
    ("startingOffsets", "initialPosition"),
    ("startingoffsets", "initialPosition"),
    ("maxOffsetsPerTrigger", "maxRecordsPerTrigger"),
    ("subscribe", "streamName"),
    ("kafka.bootstrap.servers", "endpointUrl"),
    ("failOnDataLoss", "an error"),
])
def test_kafka_option_names_say_which_option_does_it_here(kafka: str, ours: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_source_options({**BASE, kafka: "earliest"})
    text = str(caught.value)
    assert text.startswith(f"option {kafka!r} is Kafka's")
    assert ours in text


def test_starting_offsets_says_which_initial_position_its_values_are() -> None:
    with pytest.raises(ConfigError, match=r"earliest.*TRIM_HORIZON.*latest.*LATEST"):
        parse_source_options({**BASE, "startingOffsets": "earliest"})
