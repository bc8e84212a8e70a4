"""The span tracker of one shard: the in-flight records of one shard kept as spans (runs of records emitted
together), so that reliability costs per batch, not per record.

PURE: standard library only, no threads, clocks or I/O. Time comes in as ``now`` arguments (seconds, from any
monotonic clock, never decreasing between calls). One tracker per shard, called from one thread, which owns all of
its state and the state of the spans it hands out.

:class:`SpanTracker` answers exactly as :class:`~kinesis_spout.tracker.InflightRecordTracker` does (same methods,
same return values, same safe checkpoint, same retry order, same counters) for any sequence of emits, acks, fails,
retries, timeouts and dead letters; it adds :meth:`SpanTracker.emit_span`, which puts a run of records in flight as
ONE :class:`Span` and returns it, :meth:`SpanTracker.ack_span`, which acks a whole span in O(1), and
:meth:`SpanTracker.ack_attempt` and :meth:`SpanTracker.fail_attempt`, which ack or fail one emission of a record (its
attempt), never a later one.

A span holds its records' keys as one list of ranks (see :mod:`kinesis_spout.tracking.keys`), and beside it, only
when needed: the items (one list), the sizes (one array), the emission times (one array; a span emitted in one call
has one time) and the records' states (one bytearray, one byte a record: made on the first record that fails,
times out or is acked alone). Counts and byte sums per state are kept per span, so a whole span's ack needs no
pass over its records. A record that fails or is acked alone
splits its span into the records before it, itself, and the records after it: the span stays one object, its byte
for that record changes, and the records around it remain in their first emission. There is no per-record object:
a record in flight costs 8 bytes of key pointer plus what the caller passes (an item pointer, 8 bytes of size, 8 of
emission time, one state byte).

States of a record: ``FIRST`` (in flight in its first emission), ``FAILED`` (failed at least once and not done:
waiting for its retry, or re-emitted), ``DEAD`` (a pending dead letter) and ``DONE``. Attempts, the retry queue and
the timeouts of re-emitted records are kept per record, by rank, exactly as the per-record tracker keeps them
(:class:`~kinesis_spout.tracking.retries.RetryQueue`): only records that failed pay for them.

The **safe checkpoint** is the greatest emitted key K such that every record emitted at or below K is done. Keys
increase across the spans of a shard, so the first span that is not done holds the first pending record h, and the
checkpoint is the key emitted just before h: the key before it in its span, or, for a span's first record, the
greatest key emitted before the span (kept in the span). Spans whose records are all done are dropped at once;
a span most of whose records are done is compacted: it keeps its pending records, each with the key emitted just
before it, so memory follows what is pending, not what was emitted.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from itertools import compress, islice
from operator import lt, or_
from typing import Any, cast

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import SequenceKey
from kinesis_spout.retry import Delays, RetryPolicy
from kinesis_spout.tracking.keys import NO_KEY, Key, key_of_rank, rank_of_key
from kinesis_spout.tracking.outcomes import FailOutcome, TrackerStats
from kinesis_spout.tracking.retries import RetryQueue

__all__ = ["COMPACT_FACTOR", "COMPACT_SLACK", "OPEN_SPAN_LIMIT", "Span", "SpanTracker"]

# Record states, one byte each in a span's ``state`` (DONE is 0 so that a fresh bytearray reads "done").
DONE, FIRST, FAILED, DEAD = 0, 1, 2, 3
_HOLD = 4  # transient, inside ack_span only: a record in its first emission that the caller excluded
_ACK_FIRST = bytes.maketrans(b"\x01", b"\x00")  # FIRST -> DONE, every other state unchanged
_INTS = {int}  # the types of a list of ranks

# Tuning constants, read at each use (tests shrink them to exercise compaction). The spans are compacted when they
# hold more than COMPACT_FACTOR * pending + COMPACT_SLACK keys; a compacted span holds at most 2 * its pending + 1.
COMPACT_FACTOR = 3
COMPACT_SLACK = 1024
#: Records one-by-one emits (:meth:`SpanTracker.emit`) add to one span before a new one starts, so that a span done
#: in emission order is dropped whole rather than compacted.
OPEN_SPAN_LIMIT = 4096


class Span:
    """A run of one shard's records emitted together, in emission (= key) order: ONE object for the whole run.

    Handed out by :meth:`SpanTracker.emit_span` as the handle of a batch; its caller passes it back to
    :meth:`SpanTracker.ack_span`. Owned by the tracker that made it and its thread: the caller reads it through
    :attr:`first_key`, :attr:`last_key`, :attr:`pending` and ``len()`` only, and never changes it.
    """

    __slots__ = ("owner", "ranks", "items", "sizes", "times", "at", "before", "state", "head", "hint", "first",
                 "other", "first_bytes", "other_bytes", "open")

    def __init__(self, owner: SpanTracker, ranks: list[int], at: float, before: int) -> None:
        self.owner: SpanTracker | None = owner  # None once dropped (every record done)
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
        self.open = False  # one-by-one emits append to it (it then has every array, and state bytes)

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


class SpanTracker:
    """Tracks the records of one shard as spans, from emission until they are done, and derives the safe checkpoint.

    Who calls: the spout (or a Spark reader), from one thread, which owns the tracker, its spans and their state.
    The same methods and answers as :class:`~kinesis_spout.tracker.InflightRecordTracker`, plus :meth:`emit_span`,
    :meth:`ack_span`, :meth:`attempt_of`, :meth:`ack_attempt` and :meth:`fail_attempt`. Costs: :meth:`emit_span` O(n) in
    C (a list copy and an order check), :meth:`ack_span` O(1) for a span none of whose records failed or was acked alone
    (one pass in C over its state bytes otherwise); per-record acks in emission order O(1), other per-record calls two
    bisections (in C); the checkpoint O(1) amortized. ``backoff`` is any :class:`~kinesis_spout.retry.Delays` (a
    :class:`~kinesis_spout.tracker.RetryBackoff`); the default has the delays of ``RetryBackoff()`` (0.1 s, doubling, at
    most 10 s).
    """

    def __init__(
        self,
        shard_id: str,
        *,
        retry_limit: int = 3,
        backoff: Delays | None = None,
        message_timeout_s: float | None = 30.0,
        checkpoint: Key | None = None,
    ) -> None:
        if not isinstance(retry_limit, int) or retry_limit < 0:
            raise ConfigError(f"retry_limit must be an int >= 0, got {retry_limit!r}")
        if message_timeout_s is not None and not message_timeout_s > 0:
            raise ConfigError(f"message_timeout_s must be > 0 or None, got {message_timeout_s!r}")
        self.shard_id = shard_id
        self.retry_limit = retry_limit
        self.backoff: Delays = backoff if backoff is not None else RetryPolicy(0.1, 2.0, 10.0)
        self.message_timeout_s = message_timeout_s
        initial = NO_KEY if checkpoint is None else rank_of_key(checkpoint)
        self._spans: list[Span] = []  # spans with records not done, in emission (= key) order
        self._starts: list[int] = []  # ranks[0] of each span, aligned with _spans, for bisection
        self._tail: Span | None = None  # the open span one-by-one emits append to, while it is the last span
        self._hot = Span(self, [], 0.0, NO_KEY)  # the span of the last record acked alone (its hint: where next)
        self._last = initial  # the greatest rank emitted (or the initial checkpoint)
        self._retries = RetryQueue()
        self._attempts: dict[int, int] = {}  # records FAILED (waiting or re-emitted): current attempt number
        self._letters: list[tuple[SequenceKey, Any, int]] = []  # dead letters not yet taken by the caller
        self._stats = TrackerStats()
        self._emitted = 0
        self._dead = 0  # pending dead letters
        self._budget = COMPACT_SLACK  # records that may be done before the spans' size needs a look
        self._tcur = NO_KEY  # timeout cursor: no record below this rank is in its first emission
        self._checkpoint = (initial, None if checkpoint is None else key_of_rank(initial))

    # ------------------------------------------------------------------ emission

    def emit(self, key: Key, now: float, item: object = None, size: int = 0) -> bool:
        """Put a NEW record in flight (attempt 1), emitted at ``now``; as ``InflightRecordTracker.emit``: a key at
        or below the greatest emitted so far is a replay, ignored, counted in ``duplicates_ignored`` (``False``).
        Called by the spout for a record it emits alone; it joins the open span at the tail (up to
        ``OPEN_SPAN_LIMIT`` records), or starts one."""
        if key.__class__ is not int:
            key = rank_of_key(key)
        if key <= self._last:
            self._stats.duplicates_ignored += 1
            return False
        span = self._tail
        if span is None or len(span.ranks) >= OPEN_SPAN_LIMIT:
            span = self._open_span(key, now)
        span.ranks.append(key)
        span.items.append(item)  # type: ignore[union-attr]
        span.sizes.append(size)  # type: ignore[union-attr]
        span.times.append(now)  # type: ignore[union-attr]
        span.state.append(FIRST)  # type: ignore[union-attr]
        span.first += 1
        if size:
            span.first_bytes += size
        self._last = key
        self._emitted += 1
        return True

    def _open_span(self, key: int, now: float) -> Span:
        """Start the open span at the tail for one-by-one emits, its first key ``key``."""
        span = Span(self, [], now, self._last)
        span.items, span.sizes, span.times, span.state = [], array("q"), array("d"), bytearray()
        span.open = True
        self._spans.append(span)
        self._starts.append(key)
        self._tail = span
        return span

    def emit_span(self, keys: Sequence[Key], now: float, items: Sequence[object] | None = None,
                  sizes: Sequence[int] | None = None) -> Span | None:
        """Put a run of NEW records of this shard in flight as ONE span, emitted at ``now``, and return it (the
        handle for :meth:`ack_span`); ``None`` when every key is a replay. ``keys`` strictly increasing (the
        records of one shard in read order), ``items`` and ``sizes`` as long as ``keys`` (None: no items, size 0).
        Keys at or below the greatest emitted so far are replays, a prefix of ``keys``: ignored and counted in
        ``duplicates_ignored``. Raises ``ValueError`` when the keys do not increase or the lengths differ (nothing
        is emitted then). Called by the spout for one batch of one shard."""
        return self._emit_run(keys, now, items, sizes, "emit_span")[0]

    def emit_many(self, keys: Sequence[Key], now: float, items: Sequence[object] | None = None,
                  sizes: Sequence[int] | None = None) -> int:
        """:meth:`emit_span`, answering as ``InflightRecordTracker.emit_many``: how many leading keys were replays."""
        return self._emit_run(keys, now, items, sizes, "emit_many")[1]

    def _emit_run(self, keys: Sequence[Key], now: float, items: Sequence[object] | None,
                  sizes: Sequence[int] | None, what: str) -> tuple[Span | None, int]:
        n = len(keys)
        if not n:
            return None, 0
        if (items is not None and len(items) != n) or (sizes is not None and len(sizes) != n):
            raise ValueError(f"{what} needs as many items and sizes as keys ({n}), got "
                             f"{None if items is None else len(items)} and {None if sizes is None else len(sizes)}")
        ranks = cast("Sequence[int]", keys)
        if keys[0].__class__ is not int or keys[-1].__class__ is not int:
            ranks = [rank_of_key(key) for key in keys]
        try:
            increasing = all(map(lt, ranks, islice(ranks, 1, None)))
        except TypeError:  # SequenceKeys among ranks
            ranks = [rank_of_key(key) for key in keys]
            increasing = all(map(lt, ranks, islice(ranks, 1, None)))
        if not increasing:
            raise ValueError(f"{what} needs strictly increasing keys (the records of one shard in read order); "
                             "emit them one by one otherwise")
        last = self._last
        skip = bisect_right(ranks, last) if ranks[0] <= last else 0
        if skip:
            self._stats.duplicates_ignored += skip
            if skip == n:
                return None, skip
        run = list(ranks[skip:]) if skip else list(ranks)
        m = len(run)
        span = Span(self, run, now, last)
        if items is not None:
            span.items = list(items[skip:]) if skip else list(items)
        if sizes is not None:
            span.sizes = array("q", sizes[skip:] if skip else sizes)
            span.first_bytes = sum(span.sizes)
        span.first = m
        self._spans.append(span)
        self._starts.append(run[0])
        self._tail = None  # one-by-one emits after it start a new open span
        self._last = run[-1]
        self._emitted += m
        return span, skip

    # ------------------------------------------------------------------ completion

    def ack_span(self, span: Span, exclude: Iterable[Key] = ()) -> int:
        """Ack every record of ``span`` still in its first emission, except the keys in ``exclude``; returns how
        many were acked. Called by the spout when a consumer acks a batch whole (``exclude``: the records it
        failed, or will ack or fail one by one). Records of the span that failed (waiting for their retry,
        re-emitted, dead letters) are NOT acked by it: each is done by its own :meth:`ack` or
        :meth:`dead_letter_written`. O(1) for a span none of whose records failed or was acked alone; otherwise one
        pass in C over the span's state bytes. A span of another tracker, or already done, acks nothing (0)."""
        if span.owner is not self or not span.first:
            return 0
        held: list[int] = []
        held_bytes = 0
        if exclude:
            state = self._state_of(span)
            ranks, sizes = span.ranks, span.sizes
            for key in exclude:
                rank = key if key.__class__ is int else rank_of_key(key)
                j = bisect_left(ranks, rank, span.head)
                if j < len(ranks) and ranks[j] == rank and state[j] == FIRST:
                    state[j] = _HOLD
                    held.append(j)
                    if sizes is not None:
                        held_bytes += sizes[j]
        count = span.first - len(held)
        if span.state is not None:
            acked_state = span.state = span.state.translate(_ACK_FIRST)
            for j in held:
                acked_state[j] = FIRST
        if not count:
            return 0
        span.first = len(held)
        span.first_bytes = held_bytes
        self._done(span, count)
        return count

    def ack(self, key: Key) -> bool:
        """Mark a record done, as ``InflightRecordTracker.ack`` (a record waiting for its retry leaves the queue);
        may advance :attr:`checkpoint`. Unknown or done keys, and pending dead letters, return ``False`` and are
        counted in ``unknown_acks``. Called by the spout for a record acked alone: it splits its span."""
        rank = key if key.__class__ is int else rank_of_key(key)
        span = self._hot  # acks in emission order find their record where the last one left off, with no bisection
        ranks = span.ranks
        j = span.hint
        if j >= len(ranks) or ranks[j] != rank:
            starts = self._starts
            i = len(starts) - 1 if starts and rank >= starts[-1] else bisect_right(starts, rank) - 1
            if i >= 0:
                span = self._hot = self._spans[i]
                ranks = span.ranks
                j = bisect_left(ranks, rank, span.head)
            else:
                j = len(ranks)
        if j < len(ranks) and ranks[j] == rank:
            span.hint = j + 1
            state = span.state if span.state is not None else self._state_of(span)
            code = state[j]
            if code == FIRST:
                state[j] = DONE
                span.first -= 1
                if span.sizes is not None:
                    span.first_bytes -= span.sizes[j]
                if not span.first and not span.other:
                    self._drop(span)
                self._budget -= 1
                if self._budget < 0:
                    self._check_compaction()
                return True
            if code == FAILED:
                state[j] = DONE
                del self._attempts[rank]
                self._retries.forget(rank)
                self._other_done(span, j)
                return True
        self._stats.unknown_acks += 1
        return False

    def ack_many(self, keys: Iterable[Key]) -> int:
        """:meth:`ack` for many keys, in order; returns how many were acked (as ``InflightRecordTracker.ack_many``).
        Called by the spout with keys of one shard acked together that are not a whole span (a consumer's
        ``ack_many`` of message ids).

        Keys given as ranks in emission order cost little: a run of keys that are the next records of one span, all
        in their first emission, is found with one list comparison and acked at once (one slice of state bytes set
        to done, one sum of sizes), as acking each key would. Every other key is acked as by :meth:`ack`."""
        keys = keys if isinstance(keys, list) else list(keys)
        if set(map(type, keys)) != _INTS:  # SequenceKeys (or no keys): one at a time
            return sum(map(self.ack, keys))
        ack = self.ack
        count = i = 0
        n = len(keys)
        while i < n:
            span = self._hot  # the span of the last record acked alone; its hint: the record after it
            j, ranks = span.hint, span.ranks
            m = min(n - i, len(ranks) - j)
            if m < 2 or ranks[j] != keys[i]:
                count += ack(keys[i])  # finds the key's span and makes it the hot one
                i += 1
                continue
            if ranks[j:j + m] != keys[i:i + m]:  # the run ends before one of the lists does
                run = 1
                while ranks[j + run] == keys[i + run]:
                    run += 1
                m = run
            state = span.state
            if state is not None and state.count(FIRST, j, j + m) != m:  # some failed, are dead letters or done
                count += ack(keys[i])
                i += 1
                continue
            if state is None:
                state = self._state_of(span)
            state[j:j + m] = bytes(m)  # DONE
            span.first -= m
            if span.sizes is not None:
                span.first_bytes -= sum(span.sizes[j:j + m])
            span.hint = j + m
            count += m
            i += m
            if not span.first and not span.other:
                self._drop(span)
            self._budget -= m
            if self._budget < 0:
                self._check_compaction()
        return count

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
        if code == FIRST:
            return 1
        if code == FAILED and rank not in self._retries:
            return self._attempts[rank]
        return None

    def ack_attempt(self, key: Key, attempt: int) -> bool:
        """:meth:`ack` of ONE emission of a record: only while the record is in flight at ``attempt`` (see
        :meth:`attempt_of`); ``False`` otherwise, and nothing changes (an emission that is over, failed since or
        out again at a later attempt, is not counted in ``unknown_acks``). Called by the spout when a batch acks a
        retry it handed out, so that it never acks the record's later attempt (which another batch holds, and may
        fail) nor a record that failed since and waits for its retry."""
        rank = key if key.__class__ is int else rank_of_key(key)
        if self.attempt_of(rank) != attempt:
            return False
        return self.ack(rank)

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
        """Handle the failure of a record in flight, as ``InflightRecordTracker.fail``: ``RETRY`` (queued for
        ``now + backoff.delay(attempt)``), ``DEAD_LETTER`` (retries ran out) or ``UNKNOWN`` (not in flight: unknown,
        done, waiting for its retry, or a dead letter; counted in ``unknown_fails``). Called by the spout for a
        record a consumer failed: it splits its span; the records around it stay in their first emission."""
        rank = key if key.__class__ is int else rank_of_key(key)
        found = self._locate(rank)
        if found is not None:
            span, j = found
            code = self._state_of(span)[j]
            if code == FIRST or (code == FAILED and rank not in self._retries):
                return self._fail_at(span, j, rank, now)
        self._stats.unknown_fails += 1
        return FailOutcome.UNKNOWN

    def give_up(self, key: Key) -> bool:
        """Dead-letter a record in flight at once, without a retry, as ``InflightRecordTracker.give_up``.
        ``False`` (nothing changed) for a key not in flight. Called by the spout when its scheme refuses a record."""
        rank = key if key.__class__ is int else rank_of_key(key)
        found = self._locate(rank)
        if found is None:
            return False
        span, j = found
        code = self._state_of(span)[j]
        if code == FIRST:
            self._leave_first(span, j)
        elif code != FAILED or rank in self._retries:
            return False
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
        state = self._state_of(span)
        if state[j] != DEAD:
            return False
        state[j] = DONE
        self._dead -= 1
        self._stats.dead_lettered += 1
        self._other_done(span, j)
        return True

    # ------------------------------------------------------------------ retries and timeouts

    def next_retry(self, now: float) -> tuple[SequenceKey, Any, int] | None:
        """Pop the retry due soonest if it is due and put it back in flight, as ``InflightRecordTracker.next_retry``:
        ``(key, item, attempt)`` with the attempt incremented, or ``None``. Called by the spout before reading."""
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
        """Fail every record in flight whose (re-)emission was at least ``message_timeout_s`` ago, as
        ``InflightRecordTracker.expire``; returns ``(key, outcome)`` sorted by key. A span that times out whole
        fails record by record (each goes its own way: retry or dead letter). Called by the spout's loop."""
        timeout = self.message_timeout_s
        if timeout is None:
            return []
        out: list[tuple[int, FailOutcome]] = []
        found = self._first_emission_head()
        if found is not None and (found[0].at if found[0].times is None else found[0].times[found[1]]) + timeout <= now:
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
                state, times, at, n = span.state, span.times, span.at, len(span.ranks)
                while True:
                    if state is not None:
                        j = state.find(FIRST, j)
                        if j < 0:
                            break
                    elif j >= n:
                        break
                    if (at if times is None else times[j]) + timeout > now:
                        stopped = True
                        self._tcur = span.ranks[j]
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
        overdue, ``None`` if nothing is scheduled), as ``InflightRecordTracker.next_due``. Called by an event loop."""
        times: list[float] = []
        due = self._retries.next_retry_at()
        if due is not None:
            times.append(due)
        timeout = self.message_timeout_s
        if timeout is not None:
            found = self._first_emission_head()
            if found is not None:
                span, j = found
                times.append((span.at if span.times is None else span.times[j]) + timeout)
            emitted_at = self._retries.next_reemission_at()
            if emitted_at is not None:
                times.append(emitted_at + timeout)
        if not times:
            return None
        return max(0.0, min(times) - now)

    # ------------------------------------------------------------------ state for callers

    @property
    def checkpoint(self) -> SequenceKey | None:
        """The safe checkpoint (the greatest emitted key at or below which every record is done; the initial
        checkpoint while none is), as ``InflightRecordTracker.checkpoint``. Never moves backwards. Read by the
        spout after acks to persist it when it advances."""
        spans = self._spans
        if not spans:
            rank = self._last
        else:
            span = spans[0]
            h, state = span.head, span.state
            if state is not None:
                while not state[h]:  # the span has a record not done: the walk stops inside it
                    h += 1
                span.head = h
            rank = span.ranks[h - 1] if h else span.before
        last = self._checkpoint
        if rank != last[0]:
            last = self._checkpoint = (rank, None if rank == NO_KEY else key_of_rank(rank))
        return last[1]

    @property
    def stats(self) -> TrackerStats:
        """The counters, as ``InflightRecordTracker.stats`` (the same object each time, brought up to date)."""
        stats = self._stats
        stats.emitted = self._emitted
        stats.acked = self._emitted - stats.dead_lettered - self.inflight_count
        return stats

    @property
    def inflight_count(self) -> int:
        """Records emitted and not yet done (waiting for a retry and pending dead letters included)."""
        return sum(span.first + span.other for span in self._spans)

    @property
    def inflight_bytes(self) -> int:
        """Sum of the ``size`` of the records counted by :attr:`inflight_count`."""
        return sum(span.first_bytes + span.other_bytes for span in self._spans)

    @property
    def dead_letters_pending(self) -> int:
        """Pending dead letters (retries ran out, letter not written yet); they hold the checkpoint back."""
        return self._dead

    @property
    def retry_queue_len(self) -> int:
        """Records failed and waiting for their re-emission."""
        return len(self._retries)

    @property
    def retained_count(self) -> int:
        """Keys the spans hold: the records not done, plus done ones until their span is dropped or compacted. Once
        records are done, at most ``COMPACT_FACTOR * inflight_count + COMPACT_SLACK`` plus what the last 16 done
        records left (the spans' size is looked at every 16 done records at least). A figure for memory checks."""
        return sum(len(span.ranks) for span in self._spans)

    @property
    def span_count(self) -> int:
        """Spans holding records not done: one per batch in flight, however many records it has."""
        return len(self._spans)

    def __repr__(self) -> str:
        return (f"SpanTracker({self.shard_id!r}, inflight={self.inflight_count}, spans={len(self._spans)}, "
                f"retry={len(self._retries)})")

    # ------------------------------------------------------------------ internals

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

    @staticmethod
    def _state_of(span: Span) -> bytearray:
        """The span's state bytes, made (all FIRST) on the first record that leaves the span's common state."""
        state = span.state
        if state is None:
            state = span.state = bytearray(b"\x01") * len(span.ranks)
        return state

    @staticmethod
    def _leave_first(span: Span, j: int) -> None:
        """Record ``j`` of ``span`` leaves its first emission (fails, times out or is given up) and stays pending."""
        span.first -= 1
        span.other += 1
        if span.sizes is not None:
            size = span.sizes[j]
            span.first_bytes -= size
            span.other_bytes += size

    def _fail_at(self, span: Span, j: int, rank: int, now: float) -> FailOutcome:
        """Fail record ``j`` of ``span`` (FIRST, or FAILED and re-emitted): retry or dead letter. Called by
        :meth:`fail` and :meth:`expire`."""
        state = self._state_of(span)
        if state[j] == FIRST:
            self._leave_first(span, j)
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
        self._state_of(span)[j] = DEAD
        self._dead += 1
        self._letters.append((key_of_rank(rank), None if span.items is None else span.items[j], attempt))

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
        i = 0 if spans[0] is span else bisect_left(starts, span.ranks[0])
        del spans[i]
        del starts[i]
        if span is self._tail:
            self._tail = None
        span.owner = None
        span.ranks, span.items, span.sizes, span.times, span.state = [], None, None, None, None

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
            ranks = span.ranks
            j = bisect_left(ranks, self._tcur, span.head)
            state = span.state
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

    def _check_compaction(self) -> None:
        """Compact every span holding more than twice its pending records (plus one) when all spans together hold
        more than ``COMPACT_FACTOR * pending + COMPACT_SLACK`` keys; then set how many records may be done before
        the next look."""
        factor, slack = COMPACT_FACTOR, COMPACT_SLACK
        live, slots = self.inflight_count, self.retained_count
        if slots > factor * live + slack:
            for i, span in enumerate(self._spans):
                if len(span.ranks) > 2 * (span.first + span.other) + 1:
                    self._compact(span)
                    self._starts[i] = span.ranks[0]
            slots = self.retained_count
        self._budget = max((factor * live + slack - slots) // factor, 16)

    @staticmethod
    def _compact(span: Span) -> None:
        """Keep only the span's pending records, each with the record emitted just before it (the checkpoint if
        everything before it is done). The span stays the same object; its indices change."""
        state = cast(bytearray, span.state)  # a span with done records has state bytes
        keep = list(map(or_, state, islice(state, 1, None)))  # record j or j + 1 is not done
        keep.append(state[-1])
        span.ranks = list(compress(span.ranks, keep))
        if span.items is not None:
            span.items = list(compress(span.items, keep))
        if span.sizes is not None:
            span.sizes = array("q", compress(span.sizes, keep))
        if span.times is not None:
            span.times = array("d", compress(span.times, keep))
        span.state = bytearray(compress(state, keep))
        span.head = span.hint = 0
