"""The pure model of executor reads: planned-batch offsets, recorded ends and where a task cuts its shard; exactly:
where a cut ends at each limit's boundary, what a batch end reads back when a field is missing, and what the errors
of an unreadable offset say."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout import CheckpointError
from kinesis_spout.positions import TRIM_HORIZON, after
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.spark.source.executor_batches import PlannedBatch, ShardEnd, abandoned, cut, split_limit, within
from kinesis_spout.spark.source.offsets import parse_offset

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
START = TRIM_HORIZON


def rec(seq: int, sub: int | None = None, size: int = 10, at: datetime = T0) -> Record:
    return Record("shardId-0", str(seq), sub, "k", b"x" * (size - 1), at, SequenceKey(seq, sub or 0),
                  aggregated=3 if sub is not None else 0)


def test_a_planned_batch_round_trips_and_rejects_a_driver_mode_offset() -> None:
    planned = PlannedBatch("q1", 4, {"b": after("7", 2), "a": START}, 10, 2048, T0)
    doc = planned.encode()
    assert list(doc["shards"]) == ["a", "b"] and doc["shards"]["b"] == "7:2"
    assert PlannedBatch.parse(doc) == planned
    assert PlannedBatch.parse(PlannedBatch("q1", -1, {}).encode()) == PlannedBatch("q1", -1, {})
    with pytest.raises(CheckpointError, match="not an offset of readMode=executors.*new checkpoint location"):
        PlannedBatch.parse({"shardId-0": "42"})
    with pytest.raises(CheckpointError, match="unreadable executor-read offset"):
        PlannedBatch.parse({"query": "q", "batch": "x", "shards": {}})
    with pytest.raises(CheckpointError, match="written with readMode=executors"):
        parse_offset(doc)


def test_idle_shards_round_trip_get_no_task_and_an_offset_without_them_reads_every_shard() -> None:
    planned = PlannedBatch("q1", 5, {"a": START, "b": after("7", 2), "c": after("9")}, idle=frozenset({"b"}))
    doc = planned.encode()
    assert doc["idle"] == ["b"] and PlannedBatch.parse(doc) == planned
    assert planned.tasks() == ["a", "c"]
    older = {k: v for k, v in doc.items() if k != "idle"}  # an offset an earlier version wrote
    assert PlannedBatch.parse(older).tasks() == ["a", "b", "c"]
    with pytest.raises(CheckpointError, match="unreadable executor-read offset.*idle"):
        PlannedBatch.parse({**doc, "idle": "b"})


def test_a_recorded_end_round_trips_and_a_corrupt_one_names_its_node() -> None:
    for end in (ShardEnd(after("9", 1), 5, at_tip=False, past_cutoff=True),
                ShardEnd(after("9", 1), 5, at_tip=True, past_cutoff=False),
                ShardEnd(after("12"), 0, at_tip=True, past_cutoff=True)):
        assert ShardEnd.from_json(end.to_json(), "node") == end
    with pytest.raises(CheckpointError, match="unreadable batch end at ZooKeeper node /x/batches/q/3/s"):
        ShardEnd.from_json(b"{not json", "/x/batches/q/3/s")
    with pytest.raises(CheckpointError, match="/n"):
        ShardEnd.from_json(b'{"end": "garbage"}', "/n")


def test_split_limit_shares_a_batch_limit_and_never_gives_zero() -> None:
    assert split_limit(None, 4) is None
    assert split_limit(100, 4) == 25 and split_limit(3, 4) == 1 and split_limit(10, 0) == 10


def test_cut_by_records_by_bytes_and_always_one_record() -> None:
    records = [rec(1), rec(2), rec(3), rec(4)]
    n, end = cut(records, START, 2, None, None, shard_end=False, reached_tip=True)
    assert n == 2 and end == ShardEnd(after("2"), 2, at_tip=False)
    n, end = cut(records, START, None, 25, None, shard_end=False, reached_tip=True)
    assert n == 2 and end.end == after("2")
    n, end = cut([rec(1, size=500)], START, None, 25, None, shard_end=False, reached_tip=False)
    assert n == 1 and not end.at_tip  # the first record always, even over the byte limit
    n, end = cut(records, START, None, None, None, shard_end=False, reached_tip=True)
    assert n == 4 and end.at_tip and end.end == after("4")
    n, end = cut([], START, 5, None, None, shard_end=False, reached_tip=True)
    assert n == 0 and end == ShardEnd(START, 0, at_tip=True)


def test_cut_inside_an_aggregate_and_at_the_shard_end() -> None:
    records = [rec(5, 0), rec(5, 1), rec(5, 2), rec(8)]
    n, end = cut(records, START, 2, None, None, shard_end=True, reached_tip=True)
    assert n == 2 and end.end == after("5", 1) and not end.end.ended
    n, end = cut(records, START, 3, None, None, shard_end=True, reached_tip=True)
    assert n == 3 and end.end == after("5")
    n, end = cut(records, START, None, None, None, shard_end=True, reached_tip=False)
    assert n == 4 and end.end == after("8").finished() and end.at_tip
    n, end = cut([], after("8"), None, None, None, shard_end=True, reached_tip=False)
    assert end.end.encode() == "SHARD_END:8"


def test_cut_stops_at_the_first_record_after_the_cutoff() -> None:
    late = T0 + timedelta(seconds=5)
    records = [rec(1), rec(2, at=late), rec(3)]
    n, end = cut(records, START, None, None, T0 + timedelta(seconds=1), shard_end=True, reached_tip=True)
    assert n == 1 and end.past_cutoff and not end.at_tip and not end.end.ended


def test_within_keeps_exactly_the_batch_range() -> None:
    records = [rec(5, 0), rec(5, 1), rec(5, 2), rec(8)]
    assert [r.key for r in within(records, after("5", 0), after("5"))] == \
        [SequenceKey(5, 1), SequenceKey(5, 2)]
    assert within(records, START, START) == []


def test_abandoned_queries_are_the_others_quiet_for_longer_than_the_age() -> None:
    beats = {"mine": 0.0, "old": 1000.0, "edge": 1400.0, "young": 1900.0, "future": 2500.0, "older": 10.0}
    assert abandoned(beats, 2000.0, "mine", 600.0) == ["old", "older"]  # sorted; "edge" is exactly 600 s quiet
    assert "mine" not in abandoned(beats, 1e9, "mine", 1.0)  # never the caller's own, however quiet
    assert abandoned(beats, 2000.0, "x", 1e6) == []


# -- exactly, at each boundary -----------------------------------------------------------------------------------


def sized(seq: int, size: int = 10, at: datetime = T0) -> Record:
    """A plain record of ``size`` bytes (data plus its one-byte partition key)."""
    return rec(seq, size=size, at=at)


def test_a_limit_of_one_record_takes_exactly_one() -> None:
    n, end = cut([sized(1), sized(2), sized(3)], START, 1, None, None, shard_end=False, reached_tip=True)
    assert n == 1 and end == ShardEnd(after("1"), 1, at_tip=False, past_cutoff=False)


def test_records_that_fill_the_byte_limit_exactly_are_all_taken() -> None:
    records = [sized(1, 10), sized(2, 10), sized(3, 10)]
    n, end = cut(records, START, None, 20, None, shard_end=False, reached_tip=True)
    assert n == 2 and end.end == after("2")
    n, end = cut(records, START, None, 19, None, shard_end=False, reached_tip=True)
    assert n == 1 and end.end == after("1")


def test_the_second_record_is_left_when_it_would_pass_the_byte_limit() -> None:
    n, end = cut([sized(1, 10), sized(2, 30), sized(3, 10)], START, None, 25, None, shard_end=False, reached_tip=True)
    assert n == 1 and end == ShardEnd(after("1"), 1)


def test_a_cut_of_one_record_ends_after_it() -> None:
    n, end = cut([sized(7, 500), sized(8)], START, None, 25, None, shard_end=False, reached_tip=False)
    assert n == 1 and end.end == after("7")
    n, end = cut([sized(7)], after("6"), None, None, None, shard_end=True, reached_tip=False)
    assert n == 1 and end.end == after("7").finished()


def test_a_cut_stopped_by_a_limit_before_the_cutoff_is_not_past_the_cutoff() -> None:
    late = T0 + timedelta(seconds=5)
    records = [sized(1), sized(2), sized(3, at=late)]
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
