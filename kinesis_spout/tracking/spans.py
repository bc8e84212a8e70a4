"""The span tracker of one shard: the in-flight records of one shard kept as spans (runs of records emitted
together), so that reliability costs per batch, not per record.

PURE: standard library only, no threads, clocks or I/O. Time comes in as ``now`` arguments (seconds, from any
monotonic clock, never decreasing between calls). One tracker per shard, called from one thread, which owns all of
its state and the state of the spans it hands out.

:class:`SpanTracker` is the library's one tracker (``kinesis_spout.InflightRecordTracker`` is the same class). It
answers exactly as a per-record tracker (a port of the original Storm spout's, one map entry a record: the tests'
reference model) does (same methods, same return values, same safe checkpoint, same retry order, same counters) for
any sequence of emits, acks, fails, retries, timeouts and dead letters; it adds :meth:`SpanTracker.emit_span`, which
puts a run of records in flight as ONE :class:`Span` and returns it (:meth:`SpanTracker.emit_span_of_ends` by its
first and last ranks alone, the others made if ever needed), :meth:`SpanTracker.ack_span`, which acks a whole
span in O(1), and :meth:`SpanTracker.ack_attempt` and :meth:`SpanTracker.fail_attempt`, which ack or fail one
emission of a record (its attempt), never a later one.

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
from itertools import islice
from operator import lt
from typing import cast

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import SequenceKey
from kinesis_spout.retry import Delays, RetryPolicy
from kinesis_spout.tracking import span as span_mod
from kinesis_spout.tracking.keys import NO_KEY, Key, key_of_rank, rank_of_key
from kinesis_spout.tracking.outcomes import TrackerStats
from kinesis_spout.tracking.span import DONE, FAILED, FIRST, Fill, LazySpan, Span, state_of
from kinesis_spout.tracking.span_failures import SpanFailures

__all__ = ["Span", "SpanTracker"]

_HOLD = 4  # transient, inside ack_span only: a record in its first emission that the caller excluded
_ACK_FIRST = bytes.maketrans(b"\x01", b"\x00")  # FIRST -> DONE, every other state unchanged
_INTS = {int}  # the types of a list of ranks


class SpanTracker(SpanFailures):
    """Tracks the records of one shard as spans, from emission until they are done, and derives the safe checkpoint.

    Who calls: the spout (or a Spark reader), from one thread, which owns the tracker, its spans and their state.
    Also exported as ``kinesis_spout.InflightRecordTracker``. Per-record calls (emit, ack, fail, retries,
    timeouts, dead letters, the checkpoint and the counters) plus :meth:`emit_span`,
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
        initial = NO_KEY if checkpoint is None else rank_of_key(checkpoint)
        super().__init__(initial, retry_limit, backoff if backoff is not None else RetryPolicy(0.1, 2.0, 10.0),
                         message_timeout_s)
        self.shard_id = shard_id
        self._checkpoint = (initial, None if checkpoint is None else key_of_rank(initial))

    # ------------------------------------------------------------------ emission

    def emit(self, key: Key, now: float, item: object = None, size: int = 0) -> bool:
        """Put a NEW record in flight (attempt 1), emitted at ``now``: a key at or below the greatest emitted so
        far (or the initial checkpoint) is a replay after a re-seek, ignored, counted in ``duplicates_ignored``
        (``False``). ``item`` is opaque (handed back by :meth:`next_retry` and with dead letters); ``size`` counts
        into :attr:`inflight_bytes` until the record is done.
        Called by the spout for a record it emits alone; it joins the open span at the tail (up to
        ``OPEN_SPAN_LIMIT`` records), or starts one."""
        if key.__class__ is not int:
            key = rank_of_key(key)
        if key <= self._last:
            self._stats.duplicates_ignored += 1
            return False
        span = self._tail
        if span is None or len(span.ranks) >= span_mod.OPEN_SPAN_LIMIT:
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
        span = Span(self, [], now, self._last, key)
        span.items, span.sizes, span.times, span.state = [], array("q"), array("d"), bytearray()
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

    def emit_span_of_ends(self, count: int, low: int, high: int, now: float, fill: Fill,
                          items: Sequence[object] | None = None, nbytes: int = 0) -> Span | None:
        """:meth:`emit_span` of ``count`` records given by their ends, the ranks ``low`` and ``high``: ``fill()``
        makes their ranks (strictly increasing, ``low`` first and ``high`` last: the caller vouches for the order)
        and sizes (``nbytes`` in all) only when a record of the span is looked at alone (a fail, an ack by key, a
        timeout), never for a span acked whole. Replays (``low`` at or below the greatest rank emitted) are dropped
        as :meth:`emit_span` drops them, the ranks made at once. Called by the spout's columnar batches."""
        if not count:
            return None
        if low <= self._last or (count == 1 and low != high) or (count > 1 and not low < high):
            ranks, sizes = fill()
            return self.emit_span(ranks, now, items, sizes)
        if items is not None and len(items) != count:
            raise ValueError(f"emit_span_of_ends needs as many items as records ({count}), got {len(items)}")
        span = LazySpan(self, now, self._last, low, high, count, fill)
        if items is not None:
            span.items = list(items)
        span.first, span.first_bytes = count, nbytes
        self._spans.append(span)
        self._starts.append(low)
        self._tail = None
        self._last = high
        self._emitted += count
        return span

    def emit_many(self, keys: Sequence[Key], now: float, items: Sequence[object] | None = None,
                  sizes: Sequence[int] | None = None) -> int:
        """:meth:`emit_span`, answering how many leading keys were replays (ignored, counted in
        ``duplicates_ignored``; 0 when every record is new). ``ValueError`` as :meth:`emit_span`."""
        return self._emit_run(keys, now, items, sizes, "emit_many")[1]

    def _emit_run(self, keys: Sequence[Key], now: float, items: Sequence[object] | None,
                  sizes: Sequence[int] | None, what: str) -> tuple[Span | None, int]:
        n = len(keys)
        if not n:
            return None, 0
        if (items is not None and len(items) != n) or (sizes is not None and len(sizes) != n):
            raise ValueError(f"{what} needs as many items and sizes as keys ({n}), got "
                             f"{None if items is None else len(items)} and {None if sizes is None else len(sizes)}")
        # ranks (the spout's batches) are taken as they are: told by their ends, since looking at every key's type
        # would cost as much as the order check; a key inside that is not an int fails that check with TypeError,
        # and every key is converted then
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
            state = state_of(span)
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
        """Mark a record done (a record waiting for its retry leaves the queue);
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
            state = span.state if span.state is not None else state_of(span)
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
        """:meth:`ack` for many keys, in order; returns how many were acked.
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
                state = state_of(span)
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

    # ------------------------------------------------------------------ state for callers

    @property
    def checkpoint(self) -> SequenceKey | None:
        """The safe checkpoint (the greatest emitted key at or below which every record is done; the initial
        checkpoint while none is). Never moves backwards. Read by the
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
        """The counters, for metrics: the same object each time; ``emitted`` and ``acked`` are derived (emitted =
        acked + dead-lettered + in flight) and brought up to date when this property is read."""
        stats = self._stats
        stats.emitted = self._emitted
        stats.acked = self._emitted - stats.dead_lettered - self.inflight_count
        return stats

    def __repr__(self) -> str:
        return (f"SpanTracker({self.shard_id!r}, inflight={self.inflight_count}, spans={len(self._spans)}, "
                f"retry={len(self._retries)})")
