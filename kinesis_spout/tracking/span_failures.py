"""Failures of one shard's records: retries, dead letters and message timeouts, kept per record by rank.

PURE: standard library only; time comes in as ``now``. :class:`SpanFailures` is the part of
:class:`~kinesis_spout.tracking.spans.SpanTracker` that only records which failed pay for: their attempts, the retry
queue (:class:`~kinesis_spout.tracking.retries.RetryQueue`), the dead letters not yet taken, and the cursor of the
oldest record still in its first emission (for timeouts). Called from the thread that owns the tracker.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, cast

from kinesis_spout.records import SequenceKey
from kinesis_spout.retry import Delays
from kinesis_spout.tracking.keys import NO_KEY, Key, key_of_rank, rank_of_key
from kinesis_spout.tracking.outcomes import FailOutcome
from kinesis_spout.tracking.retries import RetryQueue
from kinesis_spout.tracking.span import DEAD, DONE, FAILED, FIRST, Span, emitted_at, leave_first, state_of
from kinesis_spout.tracking.span_list import SpanList

__all__ = ["SpanFailures"]


class SpanFailures(SpanList):
    """Fails, retries, dead letters and timeouts of the records of :class:`SpanList`'s spans."""

    def __init__(self, last: int, retry_limit: int, backoff: Delays, message_timeout_s: float | None) -> None:
        super().__init__(last)
        self.retry_limit = retry_limit
        self.backoff = backoff
        self.message_timeout_s = message_timeout_s
        self._retries = RetryQueue()
        self._attempts: dict[int, int] = {}  # records FAILED (waiting or re-emitted): current attempt number
        self._letters: list[tuple[SequenceKey, Any, int]] = []  # dead letters not yet taken by the caller
        self._dead = 0  # pending dead letters
        self._tcur = NO_KEY  # timeout cursor: no record below this rank is in its first emission

    def attempt_of(self, key: Key) -> int | None:
        """The attempt at which a record is in flight: 1 in its first emission, the attempt of its last re-emission
        after a failure; ``None`` when it is not in flight (unknown, done, waiting for its retry, or a pending dead
        letter). Called through :meth:`ack_attempt`; two bisections (in C)."""
        rank = key if key.__class__ is int else rank_of_key(key)
        found = self._locate(rank)
        if found is None:
            return None
        span, j = found
        code = FIRST if span.state is None else span.state[j]
        if not self._in_flight(code, rank):
            return None
        return 1 if code == FIRST else self._attempts[rank]

    def _in_flight(self, code: int, rank: int) -> bool:
        """Whether a record whose state is ``code`` is in flight: in its first emission, or failed and out again
        (not waiting for its retry). The rule of :meth:`attempt_of`, :meth:`fail` and :meth:`give_up`."""
        return code == FIRST or (code == FAILED and rank not in self._retries)

    def fail_attempt(self, key: Key, attempt: int, now: float) -> FailOutcome:
        """:meth:`fail` of ONE emission of a record: only while the record is in flight at ``attempt``; otherwise
        ``UNKNOWN`` and nothing changes (not counted in ``unknown_fails``: the emission is over). Called by the
        spout when a consumer fails a tuple it names with its attempt, so that a late fail of an emission that is
        over never fails the record's later attempt."""
        rank = key if key.__class__ is int else rank_of_key(key)
        if self.attempt_of(rank) != attempt:
            return FailOutcome.UNKNOWN
        return self.fail(rank, now)

    def fail(self, key: Key, now: float) -> FailOutcome:
        """Handle the failure of a record in flight: ``RETRY`` (attempt <= ``retry_limit``, queued for
        ``now + backoff.delay(attempt)``), ``DEAD_LETTER`` (retries ran out) or ``UNKNOWN`` (not in flight: unknown,
        done, waiting for its retry, or a dead letter; counted in ``unknown_fails``). Called by the spout for a
        record a consumer failed: it splits its span; the records around it stay in their first emission."""
        rank = key if key.__class__ is int else rank_of_key(key)
        found = self._locate(rank)
        if found is not None:
            span, j = found
            if self._in_flight(state_of(span)[j], rank):
                return self._fail_at(span, j, rank, now)
        self._stats.unknown_fails += 1
        return FailOutcome.UNKNOWN

    def give_up(self, key: Key) -> bool:
        """Dead-letter a record in flight at once, without a retry, with its current attempt number; like any dead
        letter it is done once :meth:`dead_letter_written` is called. ``False`` (nothing changed) for a key not in
        flight (unknown, done, waiting for its retry, or already a dead letter). Called by the spout when its scheme
        refuses a record."""
        rank = key if key.__class__ is int else rank_of_key(key)
        found = self._locate(rank)
        if found is None:
            return False
        span, j = found
        code = state_of(span)[j]
        if not self._in_flight(code, rank):
            return False
        if code == FIRST:
            leave_first(span, j)
        self._retries.forget(rank)
        self._start_dead_letter(span, j, rank, self._attempts.pop(rank, 1))
        return True

    def take_dead_letters(self) -> list[tuple[SequenceKey, Any, int]]:
        """Return and forget the records dead-lettered since the last call, as ``(key, item, last attempt)``.
        Called by the spout to hand them to its dead-letter destination; they stay pending until
        :meth:`dead_letter_written`."""
        dead, self._letters = self._letters, []
        return dead

    def dead_letter_written(self, key: Key) -> bool:
        """The dead letter of ``key`` was durably written: the record is done. ``False`` for a key that is not a
        pending dead letter. Called by the spout once its dead-letter destination succeeded."""
        rank = key if key.__class__ is int else rank_of_key(key)
        found = self._locate(rank)
        if found is None:
            return False
        span, j = found
        state = state_of(span)
        if state[j] != DEAD:
            return False
        state[j] = DONE
        self._dead -= 1
        self._stats.dead_lettered += 1
        self._other_done(span, j)
        return True

    def next_retry(self, now: float) -> tuple[SequenceKey, Any, int] | None:
        """Pop the retry due soonest if it is due (``due <= now``) and put it back in flight (its message timeout
        restarts at ``now``): ``(key, item, attempt)`` with the attempt incremented, or ``None``. Called by the spout
        before reading."""
        rank = self._retries.pop_due(now)
        if rank is None:
            return None
        attempt = self._attempts[rank] + 1
        self._attempts[rank] = attempt
        if self.message_timeout_s is not None:
            self._retries.reemitted(rank, now)
        self._stats.retried += 1
        span, j = cast("tuple[Span, int]", self._locate(rank))
        return key_of_rank(rank), None if span.items is None else span.items[j], attempt

    def has_due_retry(self, now: float) -> bool:
        """Whether :meth:`next_retry` would return a record at ``now``. Called by the spout's loop."""
        return self._retries.has_due(now)

    def expire(self, now: float) -> list[tuple[SequenceKey, FailOutcome]]:
        """Fail, as ``fail(key, now)``, every record in flight whose (re-)emission was at least
        ``message_timeout_s`` ago (records waiting for a retry do not time out); counts ``timed_out``; returns
        ``(key, outcome)`` sorted by key (empty when the timeout is ``None``). A span that times out whole
        fails record by record (each goes its own way: retry or dead letter). Called by the spout's loop."""
        timeout = self.message_timeout_s
        if timeout is None:
            return []
        out: list[tuple[int, FailOutcome]] = []
        found = self._first_emission_head()
        if found is not None and emitted_at(*found) + timeout <= now:
            overdue: list[tuple[Span, int]] = []
            span, j = found
            spans = self._spans
            i = spans.index(span)
            stopped = False
            while i < len(spans) and not stopped:
                span = spans[i]
                i += 1
                if not span.first:
                    j = 0
                    continue
                state, times, at, n = span.state, span.times, span.at, len(span)
                while True:
                    if state is not None:
                        j = state.find(FIRST, j)
                        if j < 0:
                            break
                    elif j >= n:
                        break
                    if (at if times is None else times[j]) + timeout > now:
                        stopped = True
                        self._tcur = span.ranks[j] if j else span.low
                        break
                    overdue.append((span, j))
                    j += 1
                j = 0
            if not stopped:
                self._tcur = self._last + 1
            fail_at = self._fail_at
            for span, j in overdue:
                rank = span.ranks[j]
                out.append((rank, fail_at(span, j, rank, now)))
        if self._attempts:
            for rank in self._retries.pop_timed_out(now, timeout):
                span, j = cast("tuple[Span, int]", self._locate(rank))
                out.append((rank, self._fail_at(span, j, rank, now)))
        if not out:
            return []
        self._stats.timed_out += len(out)
        out.sort()
        return [(key_of_rank(rank), outcome) for rank, outcome in out]

    def next_due(self, now: float) -> float | None:
        """Seconds from ``now`` until the next retry is due or the next message timeout happens (0.0 if one is
        overdue, ``None`` if nothing is scheduled). Called by an event loop."""
        times: list[float] = []
        due = self._retries.next_retry_at()
        if due is not None:
            times.append(due)
        timeout = self.message_timeout_s
        if timeout is not None:
            found = self._first_emission_head()
            if found is not None:
                span, j = found
                times.append(emitted_at(span, j) + timeout)
            reemitted = self._retries.next_reemission_at()
            if reemitted is not None:
                times.append(reemitted + timeout)
        if not times:
            return None
        return max(0.0, min(times) - now)

    @property
    def dead_letters_pending(self) -> int:
        """Pending dead letters (retries ran out, letter not written yet); they hold the checkpoint back."""
        return self._dead

    @property
    def retry_queue_len(self) -> int:
        """Records failed and waiting for their re-emission."""
        return len(self._retries)

    def _fail_at(self, span: Span, j: int, rank: int, now: float) -> FailOutcome:
        """Fail record ``j`` of ``span`` (FIRST, or FAILED and re-emitted): retry or dead letter. Called by
        :meth:`fail` and :meth:`expire`."""
        state = state_of(span)
        if state[j] == FIRST:
            leave_first(span, j)
        self._stats.failed += 1
        attempts = self._attempts
        attempt = attempts.get(rank, 1)
        if attempt <= self.retry_limit:
            attempts[rank] = attempt
            state[j] = FAILED
            self._retries.schedule(rank, now + self.backoff.delay(attempt))
            return FailOutcome.RETRY
        if attempts:
            attempts.pop(rank, None)
            self._retries.forget(rank)
        self._start_dead_letter(span, j, rank, attempt)
        return FailOutcome.DEAD_LETTER

    def _start_dead_letter(self, span: Span, j: int, rank: int, attempt: int) -> None:
        """Record ``j`` of ``span`` becomes a pending dead letter: no timeout, no retry, not done."""
        state_of(span)[j] = DEAD
        self._dead += 1
        self._letters.append((key_of_rank(rank), None if span.items is None else span.items[j], attempt))

    def _first_emission_head(self) -> tuple[Span, int] | None:
        """The oldest record still in its first emission, as ``(span, index)``; moves the timeout cursor to it.
        Records passed over are not in their first emission and never will be again."""
        spans = self._spans
        if not spans:
            return None
        i = max(bisect_right(self._starts, self._tcur) - 1, 0)
        while i < len(spans):
            span = spans[i]
            i += 1
            if not span.first:
                continue
            state = span.state
            if state is None and self._tcur <= span.low:  # every record in its first emission: the first one
                self._tcur = span.low  # (a span emitted by its ends keeps no ranks till they are needed)
                return span, 0
            ranks = span.ranks
            j = bisect_left(ranks, self._tcur, span.head)
            if state is not None:
                j = state.find(FIRST, j)
                if j < 0:
                    continue
            elif j >= len(ranks):
                continue
            self._tcur = ranks[j]
            return span, j
        self._tcur = self._last + 1
        return None
