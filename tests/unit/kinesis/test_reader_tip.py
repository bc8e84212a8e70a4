"""Where a shard reader finds its shard's tip (``tip_of``): an empty reply at the tip, the shard's end, or the first
record that arrived after the cutoff; the key is the last record read before it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from kinesis_spout.kinesis.retrieval.protocol import FetchResult
from kinesis_spout.kinesis.retrieval.reader import ShardTip, tip_of
from kinesis_spout.records import Record, SequenceKey

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def record(seq: int, arrived_s: float | None) -> Record:
    arrived = None if arrived_s is None else T0 + timedelta(seconds=arrived_s)
    return Record("shardId-0", str(seq), None, "pk", b"x", arrived, SequenceKey(seq, 0))


def reply(records: list[Record], millis: int | None = 0, end: bool = False) -> FetchResult:
    return FetchResult(records, millis, end, len(records))


BEFORE = SequenceKey(7, 0)


def test_an_empty_reply_at_the_tip_is_the_tip_after_the_last_record_read() -> None:
    assert tip_of(reply([]), False, BEFORE, None) == ShardTip(BEFORE)
    assert tip_of(reply([], millis=None), False, None, None) == ShardTip(None)  # no record read at all
    assert tip_of(reply([], millis=1500), False, BEFORE, None) is None  # an empty reply behind the tip (trimmed)


def test_a_reply_with_records_is_not_the_tip_even_at_millis_zero() -> None:
    # emulators report 0 for a reply cut by its limit: only an empty reply says there is nothing more
    assert tip_of(reply([record(8, 0)]), False, BEFORE, None) is None
    assert tip_of(FetchResult([], 0, False, 3), False, BEFORE, None) is None  # user records all foreign: not empty


def test_fan_out_needs_an_event_saying_zero() -> None:
    assert tip_of(reply([], millis=None), True, BEFORE, None) is None  # no event yet
    assert tip_of(reply([], millis=0), True, BEFORE, None) == ShardTip(BEFORE)


def test_the_end_of_a_closed_shard_is_its_tip() -> None:
    assert tip_of(reply([record(8, 0), record(9, 0)], millis=5, end=True), False, BEFORE, None) == \
        ShardTip(SequenceKey(9, 0))


def test_a_record_that_arrived_after_the_cutoff_puts_the_tip_before_it() -> None:
    cutoff = T0 + timedelta(seconds=10)
    records = [record(8, 9), record(9, None), record(10, 11), record(11, 12)]
    assert tip_of(reply(records, millis=500), False, BEFORE, cutoff) == ShardTip(SequenceKey(9, 0))
    assert tip_of(reply(records[2:], millis=500), False, BEFORE, cutoff) == ShardTip(BEFORE)
    assert tip_of(reply(records[:2], millis=500), False, BEFORE, cutoff) is None
