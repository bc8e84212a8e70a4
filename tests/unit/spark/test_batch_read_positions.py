"""A batch read (``spark.read.format("kinesis_spout")``) reads between ``startingTimestamp`` (default: the oldest
record) and ``endingTimestamp`` (default: when the read is planned); a stream read's ``initialPosition`` does not
move it. ``LATEST`` and ``AT_TIMESTAMP`` used to be accepted and ignored, so a batch read "from LATEST" read the
whole stream: they are refused, naming what a batch read uses instead."""

from __future__ import annotations

import pytest

from kinesis_spout import ConfigError
from kinesis_spout.spark.source import parse_batch_options


@pytest.mark.parametrize("name", ["initialPosition", "initialposition"])
def test_a_batch_read_refuses_latest_saying_what_reads_from_now_on(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_batch_options({"streamName": "s", name: "LATEST"})
    text = str(caught.value)
    assert text.startswith(f"option {name!r}='LATEST' is a stream read's"), text
    assert "startingTimestamp" in text and "spark.readStream" in text


def test_a_batch_read_refuses_at_timestamp_naming_starting_timestamp_with_the_user_s_time() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_batch_options({"streamName": "s", "initialPosition": "AT_TIMESTAMP",
                             "initialTimestamp": "2026-11-22T10:00:00Z"})
    text = str(caught.value)
    assert ".option('startingTimestamp', '2026-11-22T10:00:00Z')" in text, text


def test_a_batch_read_accepts_trim_horizon_which_is_what_it_does_anyway() -> None:
    config, start, end = parse_batch_options({"streamName": "s", "initialPosition": "trim_horizon"})
    assert config.stream_name == "s" and start is None and end is None
