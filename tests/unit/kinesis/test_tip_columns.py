"""The first record past a reader's tip cutoff, found in a reply's columns (``first_arrived_after``), is the record
path's: the first whose arrival datetime is after the cutoff, to the microsecond, with arrival times sent as seconds
(rounded as ``datetime.fromtimestamp`` rounds them) or made datetimes by a parsed reply."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_spout.kinesis.retrieval.wire_columns import (
    RecordColumns,
    arrival_datetimes,
    first_arrived_after,
    to_records,
)

CUTOFF = datetime(2026, 11, 29, 12, 0, 0, 250_000, tzinfo=timezone.utc)
C = CUTOFF.timestamp()
# seconds around the cutoff: the microsecond below, at and above it, half microseconds that round either way
NEAR = [C - 1e-6, C, C + 1e-6, C + 5e-7, C - 5e-7, C + 1.5e-6, C - 0.5, C + 0.5, C - 10.0, C + 10.0]


def columns(stamps: list[float | None], as_seconds: bool) -> RecordColumns:
    n = len(stamps)
    seqs, keys, data = [str(100 + i) for i in range(n)], ["k"] * n, [b"x"] * n
    cols = RecordColumns("shardId-0", seqs, None, keys, data, stamps, True, None)
    return cols if as_seconds else RecordColumns("shardId-0", seqs, None, keys, data, arrival_datetimes(cols), False,
                                                 None)


def record_path(cols: RecordColumns) -> int | None:
    """The record path's answer: the first record whose arrival datetime is after the cutoff."""
    for i, record in enumerate(to_records(cols)):
        arrived = record.approximate_arrival_timestamp
        if arrived is not None and arrived > CUTOFF:
            return i
    return None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(NEAR), st.floats(C - 2, C + 2)), max_size=12), st.booleans())
def test_the_first_record_after_the_cutoff_is_the_record_paths(stamps: list[float | None], as_seconds: bool) -> None:
    cols = columns(stamps, as_seconds)
    assert first_arrived_after(cols, CUTOFF) == record_path(cols)


def test_a_microsecond_decides() -> None:
    just = (CUTOFF + timedelta(microseconds=1)).timestamp()
    assert first_arrived_after(columns([C - 3, C, None, just], True), CUTOFF) == 3
    assert first_arrived_after(columns([C - 3, C, None], True), CUTOFF) is None
    assert first_arrived_after(columns([], True), CUTOFF) is None
