"""Offsets of the Structured Streaming source, exactly: a finished position keeps everything it knew. Written
against mutants the other tests let survive."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.errors import CheckpointError, ConfigError
from kinesis_spout.positions import SHARD_END, TRIM_HORIZON, Kind, Position, after, at_timestamp, shard_end
from kinesis_spout.records import WHOLE, SequenceKey
from kinesis_spout.spark.offsets import (
    as_checkpoint,
    checkpoint_position,
    consumed,
    end_after,
    in_range,
    parse_offset,
    parse_source_options,
)

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def test_finished_marks_the_end_and_keeps_the_position() -> None:
    pinned = at_timestamp(T0)
    assert pinned.finished() == SHARD_END  # followed: TRIM_HORIZON down
    assert after("42").finished() == shard_end(SequenceKey(42, WHOLE))


def test_at_timestamp_keeps_an_aware_instant_and_reads_a_naive_time_as_utc() -> None:
    aware = datetime(2026, 11, 22, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert at_timestamp(aware).timestamp == T0
    assert at_timestamp(aware).timestamp.utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]
    naive = at_timestamp(datetime(2026, 11, 22, 12, 0))
    assert naive.timestamp == T0 and naive.timestamp.tzinfo is timezone.utc


def test_a_limit_of_one_is_accepted() -> None:
    _, limits = parse_source_options({"streamName": "s", "appName": "a", "maxRecordsPerTrigger": "1"})
    assert limits.max_records == 1


def test_parse_names_the_offset_by_default_and_reads_shard_end_exactly() -> None:
    assert Position.parse("SHARD_END") == SHARD_END
    with pytest.raises(CheckpointError, match=r"^offset: unreadable shard position 'NOW:2026-11-22T12:00:00'"):
        Position.parse("NOW:2026-11-22T12:00:00")
    with pytest.raises(CheckpointError, match=r"^offset: expected a JSON object of shard positions"):
        parse_offset(["not", "an", "object"])


def test_as_checkpoint_stores_what_the_position_needs_and_nothing_else() -> None:
    assert as_checkpoint("s", after("42")) == Checkpoint("s", "42", None, shard_end=False)
    assert as_checkpoint("s", after("42").finished()) == Checkpoint("s", "42", None, shard_end=True)
    assert as_checkpoint("s", at_timestamp(T0)) == Checkpoint.pinned("s", T0)
    assert as_checkpoint("s", TRIM_HORIZON) is None
    with pytest.raises(ValueError):  # no position is TRIM_HORIZON with a time, or AT_TIMESTAMP without one
        Position(Kind.TRIM_HORIZON, timestamp=T0)
    with pytest.raises(ValueError):
        Position(Kind.AT_TIMESTAMP)


def test_a_start_inside_an_aggregate_becomes_a_position_inside_it_and_back_to_the_same_checkpoint() -> None:
    position = checkpoint_position(Checkpoint("s", "42", 3))
    assert position == after("42", 3) and position.inside_aggregate
    assert position.encode() == "42:3" and Position.parse("42:3") == position
    assert as_checkpoint("s", position) == Checkpoint("s", "42", 3)
    assert checkpoint_position(Checkpoint("s", "42", 0)).encode() == "42:0"


def test_positions_inside_an_aggregate_order_user_records_by_sub_sequence() -> None:
    inside, whole = after("42", 3), after("42")
    assert whole.is_beyond(inside) and not inside.is_beyond(whole)
    assert after("42", 4).is_beyond(inside) and not inside.is_beyond(after("42", 4))
    assert after("41").is_beyond(TRIM_HORIZON) and inside.is_beyond(after("41"))
    assert consumed(SequenceKey(42, 3), inside) and not consumed(SequenceKey(42, 4), inside)
    assert consumed(SequenceKey(42, 99), whole) and not consumed(SequenceKey(43, 0), whole)
    assert not consumed(SequenceKey(1, 0), TRIM_HORIZON)
    assert in_range(SequenceKey(42, 4), inside, whole) and not in_range(SequenceKey(42, 3), inside, whole)
    assert in_range(SequenceKey(42, 0), after("41"), inside)
    assert not in_range(SequenceKey(42, 4), after("41"), inside)
    ended = after("42", 3).finished()
    assert ended.encode() == "SHARD_END:42" and ended.key == SequenceKey(42, WHOLE) and not ended.inside_aggregate
    assert as_checkpoint("s", ended) == Checkpoint("s", "42", None, shard_end=True)


def test_a_batch_ends_inside_an_aggregate_only_when_part_of_it_is_left() -> None:
    start = TRIM_HORIZON
    keys = [SequenceKey(7, 0), SequenceKey(9, 0), SequenceKey(9, 1)]
    assert end_after([], SequenceKey(7, 0), start) == start
    assert end_after(keys[:2], SequenceKey(9, 1), start) == after("9", 0)
    assert end_after(keys, None, start) == after("9")
    assert end_after(keys, SequenceKey(10, 0), start) == after("9")
    assert end_after(keys[:1], SequenceKey(9, 0), start) == after("7")


def test_read_mode_is_read_whatever_its_case_and_spacing_and_defaults_to_driver() -> None:
    options = {"streamName": "s", "appName": "a"}
    assert parse_source_options(options)[1].read_mode == "driver"
    assert parse_source_options({**options, "readMode": " Executors "})[1].read_mode == "executors"
    assert parse_source_options({**options, "readmode": "DRIVER"})[1].read_mode == "driver"
    with pytest.raises(ConfigError, match=r"^option 'readMode' must be one of driver, executors, got 'both'$"):
        parse_source_options({**options, "readMode": "both"})


def test_a_shard_end_with_its_last_record_reads_back_as_that_end() -> None:
    ended = after("42").finished()
    assert Position.parse("SHARD_END:42") == ended == shard_end(SequenceKey(42, WHOLE))
    assert Position.parse(ended.encode()) == ended
    with pytest.raises(CheckpointError, match=r"^offset: unreadable shard position 'LATEST:42'"):
        Position.parse("LATEST:42")


def test_an_ended_position_checkpoints_the_whole_record_whatever_sub_sequence_it_carries() -> None:
    ended_inside = shard_end(SequenceKey(42, 3))
    assert ended_inside.key == SequenceKey(42, WHOLE)
    assert as_checkpoint("s", ended_inside) == Checkpoint("s", "42", None, shard_end=True)


def test_a_batch_ending_inside_an_aggregate_holds_the_user_record_it_ends_at() -> None:
    inside = after("42", 3)
    assert in_range(SequenceKey(42, 3), after("41"), inside)
    assert in_range(SequenceKey(42, 3), after("42", 2), inside)
    assert not in_range(SequenceKey(42, 3), inside, after("42", 5))  # consumed by the batch before
    assert in_range(SequenceKey(43, 0), after("42"), after("43", 0))
