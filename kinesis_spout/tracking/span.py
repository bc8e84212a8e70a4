"""One span: a run of one shard's records emitted together, and the state of each of its records.

PURE: standard library only. :class:`Span` is the object the :class:`~kinesis_spout.tracking.spans.SpanTracker` hands
out for a batch; the functions here change one span alone (its state bytes, its counts, its compaction) and are
called by the tracker's modules, from the thread that owns the tracker.

States of a record, one byte each in a span's ``state``: ``FIRST`` (in flight in its first emission), ``FAILED``
(failed at least once and not done: waiting for its retry, or re-emitted), ``DEAD`` (a pending dead letter) and
``DONE`` (0, so that a fresh bytearray reads "done").
"""

from __future__ import annotations

from array import array
from itertools import compress, islice
from operator import lt, or_
from typing import Any, Callable, Sequence, cast

from kinesis_spout.records import SequenceKey
from kinesis_spout.tracking.keys import key_of_rank

__all__ = ["COMPACT_FACTOR", "COMPACT_SLACK", "DEAD", "DONE", "FAILED", "FIRST", "OPEN_SPAN_LIMIT", "Fill", "LazySpan",
           "Span", "compact", "emitted_at", "leave_first", "state_of"]

# Record states, one byte each in a span's ``state`` (DONE is 0 so that a fresh bytearray reads "done").
DONE, FIRST, FAILED, DEAD = 0, 1, 2, 3

# Tuning constants, read at each use as attributes of this module (tests shrink them to exercise compaction). The
# spans are compacted when they hold more than COMPACT_FACTOR * pending + COMPACT_SLACK keys; a compacted span holds
# at most 2 * its pending + 1.
COMPACT_FACTOR = 3
COMPACT_SLACK = 1024
#: Records one-by-one emits (:meth:`SpanTracker.emit`) add to one span before a new one starts, so that a span done
#: in emission order is dropped whole rather than compacted.
OPEN_SPAN_LIMIT = 4096


#: What makes the ranks and sizes of a span emitted by its ends (see :meth:`SpanTracker.emit_span_of_ends
#: <kinesis_spout.tracking.spans.SpanTracker.emit_span_of_ends>`): the ranks, strictly increasing, and the sizes
#: aligned with them (None: every size is 0).
Fill = Callable[[], "tuple[Sequence[int], Sequence[int] | None]"]


class Span:
    """A run of one shard's records emitted together, in emission (= key) order: ONE object for the whole run.

    Handed out by :meth:`SpanTracker.emit_span` as the handle of a batch; its caller passes it back to
    :meth:`SpanTracker.ack_span`. Owned by the tracker that made it and its thread: the caller reads it through
    :attr:`first_key`, :attr:`last_key`, :attr:`pending` and ``len()`` only, and never changes it.
    """

    __slots__ = ("owner", "ranks", "items", "sizes", "times", "at", "before", "state", "head", "hint", "first",
                 "other", "first_bytes", "other_bytes", "low")

    def __init__(self, owner: object, ranks: list[int], at: float, before: int, low: int = 0) -> None:
        self.owner: object | None = owner  # the tracker that made it (compared by identity); None once dropped
        self.ranks = ranks  # the keys as ranks, strictly increasing (after a compaction: pending ones + predecessors)
        self.items: list[Any] | None = None  # aligned with ranks; None: every item is None
        self.sizes: array[int] | None = None  # aligned with ranks; None: every size is 0
        self.times: array[float] | None = None  # first emission times aligned with ranks; None: all are ``at``
        self.at = at
        self.before = before  # the greatest rank emitted before ranks[0] (or the initial checkpoint, or NO_KEY)
        self.state: bytearray | None = None  # one byte a record (DONE/FIRST/FAILED/DEAD); None: all FIRST
        self.head = 0  # every record before ranks[head] is done
        self.hint = 0  # the index after the last record acked alone: where an ack in emission order looks first
        self.first = 0  # records in their first emission (FIRST)
        self.other = 0  # records FAILED or DEAD (not done, not in their first emission)
        self.first_bytes = 0  # sum of the sizes of the FIRST records
        self.other_bytes = 0  # sum of the sizes of the FAILED and DEAD records
        self.low = ranks[0] if ranks else low  # ranks[0] (kept up to date by compact and the open span's first emit)

    def __len__(self) -> int:
        """Keys the span holds (its records, or after a compaction its pending ones and their predecessors)."""
        return len(self.ranks)

    @property
    def first_key(self) -> SequenceKey | None:
        """The key of the span's first record; ``None`` once every record is done (the span is dropped)."""
        return key_of_rank(self.ranks[0]) if self.ranks else None

    @property
    def last_key(self) -> SequenceKey | None:
        """The key of the span's last record; ``None`` once every record is done."""
        return key_of_rank(self.ranks[-1]) if self.ranks else None

    @property
    def pending(self) -> int:
        """Records of the span not done yet (in flight, failed and not done, or pending dead letters)."""
        return self.first + self.other

    def __repr__(self) -> str:
        return f"Span({self.first_key}..{self.last_key}, pending={self.pending}, first_emission={self.first})"


_RANKS, _SIZES = Span.__dict__["ranks"], Span.__dict__["sizes"]  # the slots, under LazySpan's properties


class LazySpan(Span):
    """A :class:`Span` emitted by its ends (:meth:`SpanTracker.emit_span_of_ends
    <kinesis_spout.tracking.spans.SpanTracker.emit_span_of_ends>`): it knows its first and last ranks and its count,
    and makes its ranks and sizes with ``fill`` the first time they are read (a record of it looked at alone: a
    fail, an ack by key, a timeout), checked against its ends then. A span acked whole never makes them. Plain spans
    keep plain slots, so that this costs nothing to the others."""

    __slots__ = ("_fill", "_count", "_high")

    def __init__(self, owner: object, at: float, before: int, low: int, high: int, count: int, fill: Fill) -> None:
        super().__init__(owner, [], at, before, low)
        self._fill: Fill | None = fill
        self._count = count
        self._high = high

    @property
    def ranks(self) -> list[int]:
        """The records' ranks (made now on the first read)."""
        if self._fill is not None:
            self._filled()
        return cast("list[int]", _RANKS.__get__(self, LazySpan))

    @ranks.setter
    def ranks(self, value: list[int]) -> None:
        _RANKS.__set__(self, value)
        self._fill = None

    @property
    def sizes(self) -> array[int] | None:
        """The records' sizes, aligned with :attr:`ranks` (made now on the first read); None: every size is 0."""
        if self._fill is not None:
            self._filled()
        return cast("array[int] | None", _SIZES.__get__(self, LazySpan))

    @sizes.setter
    def sizes(self, value: array[int] | None) -> None:
        _SIZES.__set__(self, value)

    def _filled(self) -> None:
        """Make the ranks and sizes, checked against the ends and count the span was emitted with."""
        fill = cast("Fill", self._fill)
        ranks, sizes = fill()
        n, low, high = self._count, self.low, self._high
        if len(ranks) != n or (n and (ranks[0] != low or ranks[-1] != high)) or \
                not all(map(lt, ranks, islice(ranks, 1, None))):
            raise RuntimeError(f"a span emitted by its ends made {len(ranks)} ranks from {ranks[:1]} to {ranks[-1:]}, "
                               f"not the {n} increasing from {low} to {high} it was emitted with")
        self._fill = None
        _RANKS.__set__(self, ranks if ranks.__class__ is list else list(ranks))
        _SIZES.__set__(self, None if sizes is None else array("q", sizes))

    def __len__(self) -> int:
        return self._count if self._fill is not None else len(_RANKS.__get__(self, LazySpan))

    @property
    def first_key(self) -> SequenceKey | None:
        return key_of_rank(self.low) if self._fill is not None else Span.first_key.fget(self)  # type: ignore[attr-defined]

    @property
    def last_key(self) -> SequenceKey | None:
        return key_of_rank(self._high) if self._fill is not None else Span.last_key.fget(self)  # type: ignore[attr-defined]


def state_of(span: Span) -> bytearray:
    """The span's state bytes, made (all FIRST) on the first record that leaves the span's common state."""
    state = span.state
    if state is None:
        state = span.state = bytearray(b"\x01") * len(span.ranks)
    return state


def emitted_at(span: Span, j: int) -> float:
    """When record ``j`` of ``span`` was first emitted."""
    return span.at if span.times is None else span.times[j]


def leave_first(span: Span, j: int) -> None:
    """Record ``j`` of ``span`` leaves its first emission (fails, times out or is given up) and stays pending."""
    span.first -= 1
    span.other += 1
    if span.sizes is not None:
        size = span.sizes[j]
        span.first_bytes -= size
        span.other_bytes += size


def compact(span: Span) -> None:
    """Keep only the span's pending records, each with the record emitted just before it (the checkpoint if
    everything before it is done). The span stays the same object; its indices change."""
    state = cast(bytearray, span.state)  # a span with done records has state bytes
    keep = list(map(or_, state, islice(state, 1, None)))  # record j or j + 1 is not done
    keep.append(state[-1])
    span.ranks = list(compress(span.ranks, keep))
    span.low = span.ranks[0]
    if span.items is not None:
        span.items = list(compress(span.items, keep))
    if span.sizes is not None:
        span.sizes = array("q", compress(span.sizes, keep))
    if span.times is not None:
        span.times = array("d", compress(span.times, keep))
    span.state = bytearray(compress(state, keep))
    span.head = span.hint = 0
