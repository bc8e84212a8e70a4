"""Idle shards are polled adaptively by default: the pause after an empty GetRecords starts at
``empty_record_backoff_s`` and doubles while the shard stays idle, up to ``max_empty_record_backoff_s`` (2 s by
default); records start it over. The spout's readers, the Spark source's driver reads and its executor reads'
probes all pace an idle shard with :func:`idle_backoff`."""

from __future__ import annotations

import pytest

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.config.groups import ReadingSettings
from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.retrieval.polling import idle_backoff


def pauses(reading: ReadingSettings, n: int) -> list[float]:
    """The first ``n`` pauses of an idle shard read under ``reading``."""
    idle = idle_backoff(reading.empty_record_backoff_s, reading.max_empty_record_backoff_s)
    return [idle.next_delay() for _ in range(n)]


def test_by_default_an_idle_shard_is_polled_less_often_up_to_two_seconds_and_records_start_it_over() -> None:
    reading = ReadingSettings()
    assert pauses(reading, 4) == [1.0, 2.0, 2.0, 2.0]
    idle = idle_backoff(reading.empty_record_backoff_s, reading.max_empty_record_backoff_s)
    idle.next_delay(), idle.next_delay()
    idle.reset()  # a reply with records
    assert idle.next_delay() == 1.0


def test_the_cap_turned_off_or_below_the_first_pause_keeps_the_pause_steady() -> None:
    assert pauses(ReadingSettings(max_empty_record_backoff_s=None), 3) == [1.0, 1.0, 1.0]
    # a longer first pause than the default cap is no error: the pause just does not grow
    assert pauses(ReadingSettings(empty_record_backoff_s=5.0), 3) == [5.0, 5.0, 5.0]
    assert pauses(ReadingSettings(empty_record_backoff_s=0.2, max_empty_record_backoff_s=0.7), 4) == \
        [0.2, 0.4, 0.7, 0.7]


def test_the_first_pause_is_never_below_what_kinesis_allows() -> None:
    assert idle_backoff(0.0, None).next_delay() == MIN_POLL_INTERVAL_S


@pytest.mark.parametrize("bad", [0.1, -1.0, 7200.0, "2"])
def test_a_cap_out_of_range_is_refused_naming_the_setting(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_empty_record_backoff_s must be a number from 0.2 to 3600"):
        ReadingSettings(max_empty_record_backoff_s=bad)  # type: ignore[arg-type]
