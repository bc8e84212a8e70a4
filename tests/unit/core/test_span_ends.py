"""Spans given by their ends (``SpanTracker.emit_span_of_ends``, the columnar batches' way in): a span acked whole
never makes its records' ranks, one record or many; a span whose ends cannot be ends is refused by name."""

from __future__ import annotations

import pytest

from kinesis_spout.tracking.spans import SpanTracker


def never() -> tuple[list[int], list[int]]:
    raise AssertionError("fill() was called for a span acked whole")


@pytest.mark.parametrize("count, low, high", [(1, 7, 7), (3, 7, 9), (1000, 10, 5000)])
def test_a_span_of_ends_acked_whole_never_makes_its_ranks(count: int, low: int, high: int) -> None:
    tracker = SpanTracker("shardId-000000000000")
    span = tracker.emit_span_of_ends(count, low, high, 0.0, never)
    assert span is not None and tracker.inflight_count == count
    assert tracker.ack_span(span) == count
    assert tracker.inflight_count == 0 and tracker.checkpoint is not None and tracker.checkpoint.rank == high


def test_a_span_of_ends_with_the_wrong_number_of_items_is_refused_by_name() -> None:
    tracker = SpanTracker("shardId-000000000000")
    with pytest.raises(ValueError, match=r"emit_span_of_ends needs as many items as records \(3\), got 2"):
        tracker.emit_span_of_ends(3, 7, 9, 0.0, never, items=["a", "b"])


@pytest.mark.parametrize("count, low, high", [(2, 9, 9), (2, 10, 9), (1, 9, 10)])
def test_ends_that_cannot_be_a_spans_ends_make_the_ranks_at_once(count: int, low: int, high: int) -> None:
    """Two records cannot share an end rank, nor one record have two: the ranks ``fill()`` makes are then what
    counts, so the checkpoint after the span is acked is its real last record's."""
    ranks = [9 + i for i in range(count)]
    tracker = SpanTracker("shardId-000000000000")
    span = tracker.emit_span_of_ends(count, low, high, 0.0, lambda: (ranks, [1] * count))
    assert span is not None and tracker.ack_span(span) == count
    assert tracker.checkpoint is not None and tracker.checkpoint.rank == ranks[-1]


@pytest.mark.parametrize("made, said", [
    ([7, 8, 9], "made 3 ranks from [7] to [9], not the 4 increasing from 7 to 9"),  # one record short
    ([6, 7, 8, 9], "made 4 ranks from [6] to [9], not the 4 increasing from 7 to 9"),  # the first end wrong
    ([7, 8, 8, 9], "made 4 ranks from [7] to [9], not the 4 increasing from 7 to 9"),  # not increasing inside
    ([7, 8, 9, 9], "made 4 ranks from [7] to [9], not the 4 increasing from 7 to 9"),  # nor at the end
])
def test_ranks_made_later_that_do_not_fit_the_ends_are_an_error_naming_both(made: list[int], said: str) -> None:
    """The caller vouches for a span's ends; when the ranks it makes later (a record looked at alone) break that,
    nothing is guessed: the look fails, naming what was made and what the span was emitted with."""
    tracker = SpanTracker("shardId-000000000000")
    assert tracker.emit_span_of_ends(4, 7, 9, 0.0, lambda: (made, None)) is not None
    with pytest.raises(RuntimeError) as caught:
        tracker.ack(8)
    assert str(caught.value) == f"a span emitted by its ends {said} it was emitted with"


def test_ranks_and_sizes_made_later_in_any_sequence_serve_every_record_alone() -> None:
    tracker = SpanTracker("shardId-000000000000")
    tracker.emit_span_of_ends(3, 7, 9, 0.0, lambda: ((7, 8, 9), (10, 20, 40)), nbytes=70)
    assert tracker.inflight_bytes == 70
    assert tracker.ack(8) and tracker.inflight_count == 2 and tracker.inflight_bytes == 50
    assert tracker.ack(7) and tracker.ack(9) and tracker.inflight_count == 0
    assert tracker.checkpoint is not None and tracker.checkpoint.rank == 9
    unsized = SpanTracker("shardId-000000000000")
    unsized.emit_span_of_ends(2, 7, 9, 0.0, lambda: ([7, 9], None))
    assert unsized.ack(9) and unsized.inflight_count == 1 and unsized.inflight_bytes == 0
