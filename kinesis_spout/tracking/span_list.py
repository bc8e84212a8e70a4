"""The spans of one shard's tracker, in emission order: where a record is, what is done, and the memory they hold.

PURE: standard library only. :class:`SpanList` is the base of :class:`~kinesis_spout.tracking.spans.SpanTracker`: it
keeps the spans with records not done (and the first rank of each, for bisection), the greatest rank emitted and the
counters, finds a record's span, drops spans whose records are all done and compacts the others when they hold far
more keys than pending records. Every method is called by the tracker's own methods, from the thread that owns the
tracker, which owns all of this state.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from kinesis_spout.tracking import span as span_mod
from kinesis_spout.tracking.keys import NO_KEY
from kinesis_spout.tracking.outcomes import TrackerStats
from kinesis_spout.tracking.span import Span, compact

__all__ = ["SpanList"]


class SpanList:
    """The spans of one shard, in emission (= key) order, and the bookkeeping shared by emission, acks and failures.

    ``last``: the greatest rank emitted before (the initial checkpoint's, or ``NO_KEY``)."""

    def __init__(self, last: int) -> None:
        self._spans: list[Span] = []  # spans with records not done, in emission (= key) order
        self._starts: list[int] = []  # ranks[0] of each span, aligned with _spans, for bisection
        self._tail: Span | None = None  # the open span one-by-one emits append to, while it is the last span
        self._hot = Span(self, [], 0.0, NO_KEY)  # the span of the last record acked alone (its hint: where next)
        self._last = last  # the greatest rank emitted (or the initial checkpoint)
        self._stats = TrackerStats()
        self._emitted = 0
        self._budget = span_mod.COMPACT_SLACK  # records that may be done before the spans' size needs a look

    @property
    def inflight_count(self) -> int:
        """Records emitted and not yet done (waiting for a retry and pending dead letters included)."""
        return sum(span.first + span.other for span in self._spans)

    @property
    def inflight_bytes(self) -> int:
        """Sum of the ``size`` of the records counted by :attr:`inflight_count`."""
        return sum(span.first_bytes + span.other_bytes for span in self._spans)

    @property
    def retained_count(self) -> int:
        """Keys the spans hold: the records not done, plus done ones until their span is dropped or compacted. Once
        records are done, at most ``COMPACT_FACTOR * inflight_count + COMPACT_SLACK`` plus what the last 16 done
        records left (the spans' size is looked at every 16 done records at least). A figure for memory checks."""
        return sum(map(len, self._spans))

    @property
    def span_count(self) -> int:
        """Spans holding records not done: one per batch in flight, however many records it has."""
        return len(self._spans)

    def _locate(self, rank: int) -> tuple[Span, int] | None:
        """The span holding ``rank`` and its index there; ``None`` for a rank no span holds (unknown or done)."""
        i = bisect_right(self._starts, rank) - 1
        if i < 0:
            return None
        span = self._spans[i]
        ranks = span.ranks
        j = bisect_left(ranks, rank, span.head)
        if j < len(ranks) and ranks[j] == rank:
            return span, j
        return None

    def _other_done(self, span: Span, j: int) -> None:
        """Record ``j`` of ``span``, FAILED or DEAD, was just marked done."""
        span.other -= 1
        if span.sizes is not None:
            span.other_bytes -= span.sizes[j]
        self._done(span, 1)

    def _done(self, span: Span, count: int) -> None:
        """``count`` records of ``span`` just became done: drop the span when none is left, and look at the spans'
        size once enough records were done since the last look."""
        if not span.first and not span.other:
            self._drop(span)
        self._budget -= count
        if self._budget < 0:
            self._check_compaction()

    def _drop(self, span: Span) -> None:
        """Take a span whose records are all done out of the tracker and free its arrays (its caller may still hold
        it: it then acks nothing)."""
        spans, starts = self._spans, self._starts
        i = 0 if spans[0] is span else bisect_left(starts, span.low)
        del spans[i]
        del starts[i]
        if span is self._tail:
            self._tail = None
        span.owner = None
        span.ranks, span.items, span.sizes, span.times, span.state = [], None, None, None, None

    def _check_compaction(self) -> None:
        """Compact every span holding more than twice its pending records (plus one) when all spans together hold
        more than ``COMPACT_FACTOR * pending + COMPACT_SLACK`` keys; then set how many records may be done before
        the next look."""
        factor, slack = span_mod.COMPACT_FACTOR, span_mod.COMPACT_SLACK
        live, slots = self.inflight_count, self.retained_count
        if slots > factor * live + slack:
            for i, span in enumerate(self._spans):
                if len(span) > 2 * (span.first + span.other) + 1:
                    compact(span)
                    self._starts[i] = span.ranks[0]
            slots = self.retained_count
        self._budget = max((factor * live + slack - slots) // factor, 16)
