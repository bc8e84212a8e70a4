"""Executor reads, exactly: where a task's cut ends at each limit's boundary, what a batch end reads back when a
field is missing, and what the errors of an unreadable offset say. Written against mutants the other tests let
survive (see benchmarks/results/mutation.md)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import TRIM_HORIZON, after
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.spark.batches import PlannedBatch, ShardEnd, cut, split_limit

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
START = TRIM_HORIZON


def rec(seq: int, size: int = 10, at: datetime = T0) -> Record:
    """A plain record of ``size`` bytes (data plus its one-byte partition key)."""
    return Record("shardId-0", str(seq), None, "k", b"x" * (size - 1), at, SequenceKey(seq), aggregated=0)


def test_a_limit_of_one_record_takes_exactly_one() -> None:
    n, end = cut([rec(1), rec(2), rec(3)], START, 1, None, None, shard_end=False, reached_tip=True)
    assert n == 1 and end == ShardEnd(after("1"), 1, at_tip=False, past_cutoff=False)


def test_records_that_fill_the_byte_limit_exactly_are_all_taken() -> None:
    records = [rec(1, 10), rec(2, 10), rec(3, 10)]
    n, end = cut(records, START, None, 20, None, shard_end=False, reached_tip=True)
    assert n == 2 and end.end == after("2")
    n, end = cut(records, START, None, 19, None, shard_end=False, reached_tip=True)
    assert n == 1 and end.end == after("1")


def test_the_second_record_is_left_when_it_would_pass_the_byte_limit() -> None:
    n, end = cut([rec(1, 10), rec(2, 30), rec(3, 10)], START, None, 25, None, shard_end=False, reached_tip=True)
    assert n == 1 and end == ShardEnd(after("1"), 1)


def test_a_cut_of_one_record_ends_after_it() -> None:
    n, end = cut([rec(7, 500), rec(8)], START, None, 25, None, shard_end=False, reached_tip=False)
    assert n == 1 and end.end == after("7")
    n, end = cut([rec(7)], after("6"), None, None, None, shard_end=True, reached_tip=False)
    assert n == 1 and end.end == after("7").finished()


def test_a_cut_stopped_by_a_limit_before_the_cutoff_is_not_past_the_cutoff() -> None:
    late = T0 + timedelta(seconds=5)
    records = [rec(1), rec(2), rec(3, at=late)]
    cutoff = T0 + timedelta(seconds=1)
    n, end = cut(records, START, 1, None, cutoff, shard_end=False, reached_tip=True)
    assert n == 1 and not end.past_cutoff and not end.at_tip
    n, end = cut(records, START, None, None, cutoff, shard_end=False, reached_tip=True)
    assert n == 2 and end.past_cutoff and not end.at_tip


def test_a_shared_limit_is_a_whole_number_rounded_down() -> None:
    assert split_limit(10, 3) == 3 and isinstance(split_limit(10, 3), int)
    assert split_limit(7, 2) == 3


def test_a_recorded_end_without_its_counters_reads_them_as_zero_and_false() -> None:
    assert ShardEnd.from_json(b'{"end": "42"}', "/n") == ShardEnd(after("42"), 0, False, False)
    full = b'{"end": "42", "records": 3, "at_tip": true, "past_cutoff": true}'
    assert ShardEnd.from_json(full, "/n") == ShardEnd(after("42"), 3, True, True)


def test_an_unreadable_end_position_is_named_by_its_node() -> None:
    with pytest.raises(CheckpointError, match=r"\(/x/batches/q/3/s: unreadable shard position 'garbage'"):
        ShardEnd.from_json(b'{"end": "garbage"}', "/x/batches/q/3/s")


def refused(where: str, doc: object) -> str:
    """The start of the error for ``doc``, which is not an executor-read offset, read at ``where``."""
    return "^" + re.escape(f"{where}: {str(doc)!r} is not an offset of readMode=executors; ")


def test_an_offset_of_another_mode_or_type_is_refused_naming_it_and_showing_it() -> None:
    for doc in ({"shardId-0": "42"}, 7, None, {"query": "q", "batch": 1}):
        with pytest.raises(CheckpointError, match=refused("offset", doc)):
            PlannedBatch.parse(doc)
    with pytest.raises(CheckpointError, match=refused("end offset", {"shards": {}})):
        PlannedBatch.parse({"shards": {}}, "end offset")


def test_an_unreadable_executor_offset_shows_it_and_names_the_shard_or_the_field() -> None:
    doc = {"query": "q", "batch": 1, "shards": []}
    with pytest.raises(CheckpointError, match="^" + re.escape(
            f"offset: unreadable executor-read offset {str(doc)!r} (shards is not an object)") + "$"):
        PlannedBatch.parse(doc)
    with pytest.raises(CheckpointError, match=r"^start offset, shard shardId-1: unreadable shard position 'x'"):
        PlannedBatch.parse({"query": "q", "batch": 1, "shards": {"shardId-1": "x"}}, "start offset")
