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
