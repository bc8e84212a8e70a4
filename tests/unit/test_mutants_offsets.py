"""Offsets of the Structured Streaming source, exactly: a finished position keeps everything it knew. Written
against mutants the other tests let survive."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.coordination.lineage import AT_SEQUENCE_NUMBER, ShardStart
from kinesis_spout.errors import CheckpointError
from kinesis_spout.spark.offsets import (
    AT_TIMESTAMP,
    TRIM_HORIZON,
    ShardPosition,
    as_checkpoint,
    parse_offset,
    parse_source_options,
    start_position_of,
)

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def test_finished_marks_the_end_and_keeps_the_position() -> None:
    pinned = ShardPosition.at_timestamp(T0)
    assert pinned.finished() == ShardPosition(None, AT_TIMESTAMP, T0, ended=True)
    assert ShardPosition.after("42").finished() == ShardPosition("42", TRIM_HORIZON, None, ended=True)


def test_at_timestamp_keeps_an_aware_instant_and_reads_a_naive_time_as_utc() -> None:
    aware = datetime(2026, 11, 22, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert ShardPosition.at_timestamp(aware).timestamp == T0
    assert ShardPosition.at_timestamp(aware).timestamp.utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]
    naive = ShardPosition.at_timestamp(datetime(2026, 11, 22, 12, 0))
    assert naive.timestamp == T0 and naive.timestamp.tzinfo is timezone.utc  # type: ignore[union-attr]


def test_a_limit_of_one_is_accepted() -> None:
    _, limits = parse_source_options({"streamName": "s", "appName": "a", "maxRecordsPerTrigger": "1"})
    assert limits.max_records == 1


def test_parse_names_the_offset_by_default_and_reads_shard_end_exactly() -> None:
    assert ShardPosition.parse("SHARD_END") == ShardPosition(None, TRIM_HORIZON, None, ended=True)
    with pytest.raises(CheckpointError, match=r"^offset: unreadable shard position 'NOW:2026-11-22T12:00:00'"):
        ShardPosition.parse("NOW:2026-11-22T12:00:00")
    with pytest.raises(CheckpointError, match=r"^offset: expected a JSON object of shard positions"):
        parse_offset(["not", "an", "object"])


def test_as_checkpoint_stores_what_the_position_needs_and_nothing_else() -> None:
    assert as_checkpoint("s", ShardPosition.after("42")) == Checkpoint("s", "42", None, shard_end=False)
    assert as_checkpoint("s", ShardPosition.after("42").finished()) == Checkpoint("s", "42", None, shard_end=True)
    assert as_checkpoint("s", ShardPosition.at_timestamp(T0)) == Checkpoint.pinned("s", T0)
    assert as_checkpoint("s", ShardPosition(start=TRIM_HORIZON, timestamp=T0)) is None
    assert as_checkpoint("s", ShardPosition(start=AT_TIMESTAMP)) is None
    assert as_checkpoint("s", ShardPosition()) is None


def test_a_start_inside_an_aggregate_is_refused_with_the_aggregate_named() -> None:
    start = ShardStart(AT_SEQUENCE_NUMBER, "42", 3, reason="checkpoint inside an aggregate")
    with pytest.raises(CheckpointError, match=r"^the checkpoint stands inside KPL aggregate 42 \(after its user "
                                              r"record 3\): the readStream source reads aggregates whole"):
        start_position_of(start)
