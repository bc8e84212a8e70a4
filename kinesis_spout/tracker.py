"""The in-flight record tracker of one shard: safe checkpoint, retry queue and message timeouts.

PURE: standard library only, no threads, clocks or I/O. Time comes in as a ``now: float`` argument (seconds,
from any monotonic clock, never decreasing between calls) and an event loop asks :meth:`next_due` how long it
may sleep. One tracker per shard, called by the spout from one thread.

Keys. Every method that takes a key takes a :class:`~kinesis_spout.records.SequenceKey` or its *rank*, the key as
one int (:attr:`SequenceKey.rank`, :func:`~kinesis_spout.records.rank_of`,
:func:`~kinesis_spout.records.parse_message_id_rank`); keys handed back are ``SequenceKey``. Inside, the tracker
works on ranks only: a rank is built from a sequence-number string with one ``int()`` and one multiplication, at
about half the cost of a ``SequenceKey``, and hashes and compares faster than a tuple. Passing ranks is the fast
path; :meth:`InflightRecordTracker.emit_many` and :meth:`InflightRecordTracker.ack_many` take many at once.

The **safe checkpoint** is the greatest emitted key K such that every record emitted at or below K is done
(acked, or dead-lettered after its retries ran out, once its dead letter is written). New keys arrive in
increasing order, so if the smallest pending key is h, the safe checkpoint is the key emitted immediately before h.
The tracker therefore keeps:

- ``_pending``: a dict ``rank -> (item, size)`` of the records in flight or waiting for their retry, in emission
  order; ``_dead_lettering``: ``rank -> size`` of the pending dead letters (retries ran out, letter not written);
- ``_order``: the emitted ranks in emission order, done ones removed lazily, and ``_times``, an array of their first
  emission times, aligned with ``_order``. ``_order[0]`` is the initial checkpoint (-1 for none); compaction keeps
  every pending rank together with the rank emitted just before it, and the last emitted rank, so the rank in front
  of the first pending one (or the last rank) is the checkpoint;
- for records that failed at least once: ``_attempts`` (rank -> current attempt number), ``_due`` (rank -> due
  time, while waiting in the retry queue) and ``_reemitted`` (rank -> re-emission time, once back in flight);
- a heap of ``(due, rank)`` for the retry queue and a heap of ``(emitted_at, rank)`` for the timeouts of
  re-emitted records, both with lazy deletion. Timeouts of first emissions need no extra structure: emission order
  is time order, and a cursor walks ``_order`` forward; it only moves when the record under it may be overdue.

Memory follows what is pending, not what was acked. When ``_order`` grows longer than 2.5 times the pending records
(plus a slack), the ranks no checkpoint can need any more go: the done ones before the first pending rank (a slice),
then, if that is not enough, every done rank but those just before a pending one (a pass). ``_pending`` is rebuilt
when acks left it mostly holes: a dict keeps the room of everything it held until it grows again.

Unlike the original Java tracker: ``retry_limit=0`` still tracks and checkpoints (the first failure dead-letters);
an ack of a record waiting for its retry removes it from the queue; acked runs never accumulate.
"""

from __future__ import annotations

import enum
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from itertools import compress, islice, repeat
from operator import itemgetter, lt, or_
from typing import Any, cast

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import RANK_BASE, SequenceKey
from kinesis_spout.retry import RetryPolicy, check_exponential, exponential_delay

__all__ = ["FailOutcome", "InflightRecordTracker", "RetryBackoff", "TrackerStats"]

# _order is compacted when longer than _COMPACT_FACTOR / 2 * pending + _COMPACT_SLACK (a pass over it costs at most
# _COMPACT_FACTOR / (_COMPACT_FACTOR - 4) element steps per rank it drops, since at most 2 * pending + 1 stay)
_COMPACT_FACTOR = 5
_COMPACT_SLACK = 1024
_DICT_CHECK = 64  # records done between two looks at the size of _pending, at least
_DICT_BYTES = 64  # _pending is rebuilt when it holds more than _DICT_BYTES * pending + _DICT_SLACK bytes
_DICT_SLACK = 16384
_HEAP_SLACK = 64  # stale heap entries tolerated beyond twice the live ones
_NO_KEY = -1  # the rank standing for "no checkpoint": below every rank
_SUB_LIMIT = 1 << 64  # sub-sequence numbers a rank holds: 0 .. 2**64 - 1

Key = SequenceKey | int


def _rank(key: Key) -> int:
    """The rank of a key given as a ``SequenceKey`` (or any ``(sequence, sub-sequence)`` pair of ints), or as a
    rank. ``TypeError`` for anything else, ``ValueError`` for a pair that has no rank."""
    if key.__class__ is SequenceKey or (isinstance(key, tuple) and len(key) == 2):
        sequence, sub = key
        if sequence.__class__ is int and sub.__class__ is int and sequence >= 0 and 0 <= sub < _SUB_LIMIT:
            return sequence * RANK_BASE + sub
        return SequenceKey(sequence, sub).rank  # raises the error naming the bad part
    if isinstance(key, int):
        return int(key)
    raise TypeError(f"a key is a SequenceKey or its rank (an int), got {key!r}")


def _key(rank: int) -> SequenceKey:
    sequence, sub = divmod(rank, RANK_BASE)
    return SequenceKey(sequence, sub)


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """Exponential backoff between the failure of a record and its re-emission.

    ``delay(1) == initial_s``, ``delay(n) == initial_s * multiplier ** (n - 1)``, never more than ``max_s``: the
    delays of a :class:`~kinesis_spout.retry.RetryPolicy` without jitter or limits (:meth:`policy`).
    """

    initial_s: float = 0.1
    multiplier: float = 2.0
    max_s: float = 10.0

    def __post_init__(self) -> None:
        check_exponential("RetryBackoff", self.initial_s, self.multiplier, self.max_s)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before re-emitting a record whose attempt number ``attempt`` (1 = first) just failed."""
        return exponential_delay(self.initial_s, self.multiplier, self.max_s, attempt)

    def policy(self) -> RetryPolicy:
        """The same delays as a :class:`~kinesis_spout.retry.RetryPolicy` (no jitter, no limit of tries)."""
        return RetryPolicy(initial_s=self.initial_s, multiplier=self.multiplier, max_s=self.max_s)


class FailOutcome(enum.Enum):
    """What :meth:`InflightRecordTracker.fail` did with a failed record."""

    RETRY = "retry"  # queued for re-emission after a backoff
    DEAD_LETTER = "dead_letter"  # retries exhausted: a pending dead letter, done once its write succeeded
    UNKNOWN = "unknown"  # not in flight (unknown, already done, or already waiting for its retry): ignored


@dataclass(slots=True)
class TrackerStats:
    """Counters of one tracker, for metrics, read through :attr:`InflightRecordTracker.stats`. Only the tracker
    writes them.

    ``emitted`` counts new records (not re-emissions, which are ``retried``); ``acked`` counts successful acks;
    ``dead_lettered`` counts dead letters written (:meth:`InflightRecordTracker.dead_letter_written`);
    ``failed`` counts every failure that was acted upon, timeouts included (``timed_out`` is the part caused by the
    message timeout); ``unknown_*`` count acks and fails that changed nothing.
    """

    emitted: int = 0
    duplicates_ignored: int = 0
    acked: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    timed_out: int = 0
    unknown_acks: int = 0
    unknown_fails: int = 0


class InflightRecordTracker:
    """Tracks the records of one shard from emission until they are done, and derives the safe checkpoint.

    Who calls: the spout, from one thread. All methods are O(1) amortized per record (heap operations
    O(log r) for the r records in retry). Memory is proportional to the records not yet done.
    Dead-lettered records are collected until the caller takes them with :meth:`take_dead_letters`; they stay
    pending (holding the checkpoint back) until the caller reports them written with :meth:`dead_letter_written`.
    Keys are taken as ``SequenceKey`` or as ranks (the faster path, see the module docstring).
    """

    def __init__(
        self,
        shard_id: str,
        *,
        retry_limit: int = 3,
        backoff: RetryBackoff = RetryBackoff(),
        message_timeout_s: float | None = 30.0,
        checkpoint: Key | None = None,
    ) -> None:
        if not isinstance(retry_limit, int) or retry_limit < 0:
            raise ConfigError(f"retry_limit must be an int >= 0, got {retry_limit!r}")
        if message_timeout_s is not None and not message_timeout_s > 0:
            raise ConfigError(f"message_timeout_s must be > 0 or None, got {message_timeout_s!r}")
        self.shard_id = shard_id
        self.retry_limit = retry_limit
        self.backoff = backoff
        self.message_timeout_s = message_timeout_s
        self._stats = TrackerStats()
        initial = _NO_KEY if checkpoint is None else _rank(checkpoint)
        self._pending: dict[int, tuple[Any, int]] = {}
        self._dead_lettering: dict[int, int] = {}  # pending dead letters (not written yet) -> size
        self._order: list[int] = [initial]  # _order[-1]: the greatest rank emitted (or the initial checkpoint)
        self._times = array("d", [0.0])  # first emission time of each rank of _order (_times[0] is unused)
        self._lo = 1  # every rank in _order[1:_lo] is done
        self._tpos = 1  # ranks in _order[:_tpos] need no first-emission timeout
        self._attempts: dict[int, int] = {}  # pending records that failed once: current attempt number
        self._due: dict[int, float] = {}  # records waiting in the retry queue: when their retry is due
        self._reemitted: dict[int, float] = {}  # records back in flight after a retry: when (if timeouts are on)
        self._retry_heap: list[tuple[float, int]] = []  # (due, rank); stale unless the rank is in _due
        self._reemit_heap: list[tuple[float, int]] = []  # (re-emitted at, rank), for timeouts
        self._bytes = 0
        self._letters: list[tuple[SequenceKey, Any, int]] = []  # dead letters not yet taken by the caller
        self._dropped = 0  # ranks dropped from _order by compactions: emitted = _dropped + len(_order) - 1
        self._budget = 0  # records that may be done before _order and _pending need a look (_check_compaction)
        self._checkpoint = (initial, None if checkpoint is None else _key(initial))  # last rank read, its key
        self._check_compaction()

    # ------------------------------------------------------------------ emission and completion

    def emit(self, key: Key, now: float, item: object = None, size: int = 0) -> bool:
        """Put a NEW record in flight (attempt 1), emitted at ``now``. Called by the spout before emitting it.

        Keys of new records arrive in increasing order: a key at or below the greatest key emitted so far (or the
        initial checkpoint) is a replay after a re-seek; it is ignored, counted in ``duplicates_ignored``, and
        ``False`` is returned. ``item`` is opaque (returned by :meth:`next_retry` and with dead letters);
        ``size`` counts into :attr:`inflight_bytes` until the record is done.
        """
        if key.__class__ is not int:
            key = _rank(key)
        order = self._order
        if key <= order[-1]:
            self._stats.duplicates_ignored += 1
            return False
        self._pending[key] = (item, size)
        order.append(key)
        self._times.append(now)
        self._bytes += size
        return True

    def ack(self, key: Key) -> bool:
        """Mark a record done. Called by the spout when downstream acks it; may advance :attr:`checkpoint`.

        Acking a record waiting in the retry queue removes it from the queue. Unknown or already-done keys, and
        pending dead letters (done once their letter is written), return ``False`` and are counted in
        ``unknown_acks``.
        """
        if key.__class__ is not int:
            key = _rank(key)
        entry = self._pending.pop(key, None)
        if entry is None:
            self._stats.unknown_acks += 1
            return False
        self._bytes -= entry[1]
        if self._attempts and key in self._attempts:
            self._forget_failures(key)
        self._budget -= 1
        if self._budget < 0:
            self._check_compaction()
        return True

    def fail(self, key: Key, now: float) -> FailOutcome:
        """Handle the failure of a record in flight. Called by the spout when downstream fails it.

        With retries left (attempt number <= ``retry_limit``) the record is queued for re-emission at
        ``now + backoff.delay(attempt)``: ``RETRY``. Otherwise it becomes a pending dead letter, queued for
        :meth:`take_dead_letters`: ``DEAD_LETTER``; it no longer times out, acks of it are ignored, and it is done
        (so the checkpoint moves on) when :meth:`dead_letter_written` is called. An unknown key, a done key or a key
        already waiting in the retry queue changes nothing and is counted in ``unknown_fails``: ``UNKNOWN``.
        """
        rank = key if key.__class__ is int else _rank(key)
        return self._fail(rank, now)

    def emit_many(self, keys: Sequence[Key], now: float, items: Sequence[object] | None = None,
                  sizes: Sequence[int] | None = None) -> int:
        """:meth:`emit` for a run of new records of this shard, in one call: ``keys`` strictly increasing (as
        records of one shard are read), ``items`` and ``sizes`` as long as ``keys`` (None: no items, size 0).
        Called by the spout for records it takes together. Keys at or below the greatest key emitted so far are
        replays, ignored and counted as :meth:`emit` does: they can only be a prefix of ``keys``, whose length is
        returned (0 when every record is new). Raises ``ValueError`` when the keys do not increase or the lengths
        differ (nothing is emitted then)."""
        n = len(keys)
        if not n:
            return 0
        if (items is not None and len(items) != n) or (sizes is not None and len(sizes) != n):
            raise ValueError(f"emit_many needs as many items and sizes as keys ({n}), got "
                             f"{None if items is None else len(items)} and {None if sizes is None else len(sizes)}")
        ranks = cast("Sequence[int]", keys)
        if keys[0].__class__ is not int or keys[-1].__class__ is not int:
            ranks = [_rank(key) for key in keys]
        try:
            increasing = all(map(lt, ranks, islice(ranks, 1, None)))
        except TypeError:  # SequenceKeys among ranks
            ranks = [_rank(key) for key in keys]
            increasing = all(map(lt, ranks, islice(ranks, 1, None)))
        if not increasing:
            raise ValueError("emit_many needs strictly increasing keys (the records of one shard in read order); "
                             "emit them one by one otherwise")
        order = self._order
        skip = bisect_right(ranks, order[-1]) if ranks[0] <= order[-1] else 0
        if skip:
            self._stats.duplicates_ignored += skip
            if skip == n:
                return skip
            ranks = ranks[skip:]
            items = None if items is None else items[skip:]
            sizes = None if sizes is None else sizes[skip:]
        self._pending.update(zip(ranks, zip(repeat(None) if items is None else items,
                                            repeat(0) if sizes is None else sizes)))
        order.extend(ranks)
        self._times.extend(array("d", (now,)) * len(ranks))
        if sizes is not None:
            self._bytes += sum(sizes)
        return skip

    def ack_many(self, keys: Iterable[Key]) -> int:
        """:meth:`ack` for many keys, in order, in one call; returns how many were acked. Called by the spout with
        the keys of one shard that a consumer acked together."""
        keys = keys if isinstance(keys, list) else list(keys)
        entries: list[tuple[Any, int] | None] = list(map(self._pending.pop, keys, repeat(None)))
        acked = cast("list[tuple[Any, int]]", [e for e in entries if e is not None] if None in entries else entries)
        if acked:
            self._bytes -= sum(map(itemgetter(1), acked))
            attempts, pending = self._attempts, self._pending
            if attempts:  # records acked here that failed before (attempts holds only pending records)
                done = [k for k in attempts if k not in pending] if len(attempts) < len(keys) else \
                    [k for k in keys if k in attempts]
                for key in done:
                    if key in attempts:  # a key acked twice in keys is listed twice
                        self._forget_failures(key)
            self._budget -= len(acked)
            if self._budget < 0:
                self._check_compaction()
        count = len(acked)
        if len(acked) < len(entries):  # unknown keys, repeated ones, or keys given as SequenceKey: one at a time
            for key, entry in zip(keys, entries):
                if entry is None:
                    count += self.ack(key)
        return count

    def give_up(self, key: Key) -> bool:
        """Dead-letter a record in flight at once, without a retry (e.g. its scheme cannot decode it). Called by the
        spout. The record joins the dead letters of :meth:`take_dead_letters` with its current attempt number, and,
        like any dead letter, is done only once :meth:`dead_letter_written` is called. ``False`` (nothing changed)
        for a key that is not in flight (unknown, done, waiting for its retry, or already a dead letter)."""
        rank = key if key.__class__ is int else _rank(key)
        if rank not in self._pending or rank in self._due:
            return False
        self._reemitted.pop(rank, None)
        self._start_dead_letter(rank, self._attempts.pop(rank, 1))
        return True

    def take_dead_letters(self) -> list[tuple[SequenceKey, Any, int]]:
        """Return and forget the records dead-lettered since the last call, as ``(key, item, last attempt)``.

        Called by the spout after :meth:`fail` or :meth:`expire` reported ``DEAD_LETTER`` (or after
        :meth:`give_up`), to hand the items to its dead-letter destination. The records stay pending (they hold the
        checkpoint back) until the spout reports each one written with :meth:`dead_letter_written`.
        """
        dead, self._letters = self._letters, []
        return dead

    def dead_letter_written(self, key: Key) -> bool:
        """The dead letter of ``key`` was durably written: the record is done, and the checkpoint may move past it.
        Called by the spout once its dead-letter destination succeeded. ``False`` (nothing changed) for a key that
        is not a pending dead letter."""
        size = self._dead_lettering.pop(key if key.__class__ is int else _rank(key), None)
        if size is None:
            return False
        self._bytes -= size
        self._stats.dead_lettered += 1
        self._budget -= 1
        if self._budget < 0:
            self._check_compaction()
        return True

    def _fail(self, rank: int, now: float) -> FailOutcome:
        if rank not in self._pending or rank in self._due:
            self._stats.unknown_fails += 1
            return FailOutcome.UNKNOWN
        self._stats.failed += 1
        attempts = self._attempts
        attempt = attempts.get(rank, 1)
        if attempts:
            self._reemitted.pop(rank, None)
        if attempt <= self.retry_limit:
            attempts[rank] = attempt
            due = now + self.backoff.delay(attempt)
            self._due[rank] = due
            heap = self._retry_heap
            heappush(heap, (due, rank))
            if len(heap) > 2 * len(self._due) + _HEAP_SLACK:
                waiting = self._due
                self._retry_heap = [e for e in heap if e[1] in waiting]
                heapify(self._retry_heap)
            return FailOutcome.RETRY
        attempts.pop(rank, None)
        self._start_dead_letter(rank, attempt)
        return FailOutcome.DEAD_LETTER

    def _start_dead_letter(self, rank: int, attempt: int) -> None:
        """Turn a record in flight into a pending dead letter: no timeout, no retry, not done."""
        item, size = self._pending.pop(rank)
        self._dead_lettering[rank] = size
        self._letters.append((_key(rank), item, attempt))

    def _forget_failures(self, rank: int) -> None:
        """A record that failed before is done (acked): forget its attempt, retry and re-emission."""
        del self._attempts[rank]
        self._due.pop(rank, None)
        self._reemitted.pop(rank, None)

    # ------------------------------------------------------------------ retries and timeouts

    def next_retry(self, now: float) -> tuple[SequenceKey, Any, int] | None:
        """Pop the retry due soonest if it is due (``due <= now``) and put it back in flight.

        Called by the spout before reading new records. Returns ``(key, item, attempt)`` with the attempt number
        incremented; the record counts as emitted again at ``now`` (its message timeout restarts). ``None`` if no
        retry is due.
        """
        heap = self._retry_heap
        if not self._prune_retry_heap() or heap[0][0] > now:
            return None
        rank = heappop(heap)[1]
        del self._due[rank]
        attempt = self._attempts[rank] + 1
        self._attempts[rank] = attempt
        if self.message_timeout_s is not None:
            self._reemitted[rank] = now
            heappush(self._reemit_heap, (now, rank))
            if len(self._reemit_heap) > 2 * len(self._reemitted) + _HEAP_SLACK:
                self._reemit_heap = [e for e in self._reemit_heap if self._is_reemitted_at(e)]
                heapify(self._reemit_heap)
        self._stats.retried += 1
        return _key(rank), self._pending[rank][0], attempt

    def has_due_retry(self, now: float) -> bool:
        """Whether :meth:`next_retry` would return a record at ``now``. Called by the spout's loop; drops stale
        queue entries, changes nothing else."""
        return self._prune_retry_heap() and self._retry_heap[0][0] <= now

    def expire(self, now: float) -> list[tuple[SequenceKey, FailOutcome]]:
        """Fail, as ``fail(key, now)``, every record in flight whose (re-)emission was at least
        ``message_timeout_s`` ago (``emitted_at + message_timeout_s <= now``); records waiting for a retry do not
        time out. Called by the spout's loop; counts ``timed_out``. Returns ``(key, outcome)`` sorted by key;
        empty when the timeout is disabled (``None``).
        """
        timeout = self.message_timeout_s
        if timeout is None:
            return []
        out: list[tuple[int, FailOutcome]] = []
        order, times, tpos = self._order, self._times, self._tpos
        n = len(order)
        # First emissions, in time order along _order. _times[_tpos] is a lower bound of the emission times of the
        # records in their first emission, so nothing is overdue (and the cursor stays) while it is recent.
        if tpos < n and times[tpos] + timeout <= now:
            if len(self._pending) == len(self._attempts):  # every pending record failed once: none is in its first
                tpos = n
            pending, attempts = self._pending, self._attempts
            while tpos < n and times[tpos] + timeout <= now:
                rank = order[tpos]
                if rank in pending and rank not in attempts:
                    out.append((rank, self._fail(rank, now)))
                tpos += 1
            self._tpos = tpos
        heap = self._reemit_heap
        while heap:  # re-emissions
            entry = heap[0]
            if not self._is_reemitted_at(entry):
                heappop(heap)
            elif entry[0] + timeout > now:
                break
            else:
                heappop(heap)
                out.append((entry[1], self._fail(entry[1], now)))
        if not out:
            return []
        self._stats.timed_out += len(out)
        out.sort()
        return [(_key(rank), outcome) for rank, outcome in out]

    def next_due(self, now: float) -> float | None:
        """Seconds from ``now`` until the next retry is due or the next message timeout happens, 0.0 if one is
        overdue, ``None`` if nothing is scheduled. Called by an event loop to sleep exactly as long as needed;
        drops stale entries, changes nothing else."""
        times: list[float] = []
        if self._prune_retry_heap():
            times.append(self._retry_heap[0][0])
        timeout = self.message_timeout_s
        if timeout is not None:
            emitted_at = self._first_emission_head()
            if emitted_at is not None:
                times.append(emitted_at + timeout)
            heap = self._reemit_heap
            while heap and not self._is_reemitted_at(heap[0]):
                heappop(heap)
            if heap:
                times.append(heap[0][0] + timeout)
        if not times:
            return None
        return max(0.0, min(times) - now)

    # ------------------------------------------------------------------ state for callers

    @property
    def checkpoint(self) -> SequenceKey | None:
        """The safe checkpoint: the greatest emitted key at or below which every record is done; the initial
        checkpoint while none is. Never moves backwards. Read by the spout to persist it when it advances."""
        order, pending, dead = self._order, self._pending, self._dead_lettering
        if not pending and not dead:  # everything done: the last emitted key (or the initial checkpoint)
            rank = order[-1]
        else:
            lo, n = self._lo, len(order)
            if dead:
                while lo < n and order[lo] not in pending and order[lo] not in dead:
                    lo += 1
            else:
                while lo < n and order[lo] not in pending:
                    lo += 1
            self._lo = lo
            rank = order[lo - 1]
        last = self._checkpoint
        if rank != last[0]:
            last = self._checkpoint = (rank, None if rank == _NO_KEY else _key(rank))
        return last[1]

    @property
    def stats(self) -> TrackerStats:
        """The counters, for metrics. The same object each time; ``emitted`` and ``acked`` are derived (emitted =
        acked + dead-lettered + in flight) and brought up to date when this property is read, so that the hot
        paths count nothing."""
        stats = self._stats
        stats.emitted = self._dropped + len(self._order) - 1
        stats.acked = stats.emitted - stats.dead_lettered - len(self._pending) - len(self._dead_lettering)
        return stats

    @property
    def inflight_count(self) -> int:
        """Records emitted and not yet done, those waiting in the retry queue and the pending dead letters
        included."""
        return len(self._pending) + len(self._dead_lettering)

    @property
    def inflight_bytes(self) -> int:
        """Sum of the ``size`` of the records counted by :attr:`inflight_count`."""
        return self._bytes

    @property
    def dead_letters_pending(self) -> int:
        """Records whose retries ran out (or that were given up) and whose dead letter is not written yet; they are
        counted in :attr:`inflight_count` and hold the checkpoint back."""
        return len(self._dead_lettering)

    @property
    def retry_queue_len(self) -> int:
        """Records failed and waiting for their re-emission."""
        return len(self._due)

    def __repr__(self) -> str:
        return f"InflightRecordTracker({self.shard_id!r}, inflight={self.inflight_count}, retry={len(self._due)})"

    # ------------------------------------------------------------------ internals

    def _is_reemitted_at(self, heap_entry: tuple[float, int]) -> bool:
        """Whether a re-emission heap entry is the record's current emission (not acked, failed or re-emitted)."""
        emitted_at = self._reemitted.get(heap_entry[1])
        return emitted_at is not None and emitted_at == heap_entry[0]

    def _prune_retry_heap(self) -> bool:
        """Drop stale entries (records acked while waiting) from the top of the retry heap; True if one is left."""
        heap, waiting = self._retry_heap, self._due
        while heap and heap[0][1] not in waiting:
            heappop(heap)
        return bool(heap)

    def _first_emission_head(self) -> float | None:
        """Move the timeout cursor to the oldest record still in its first emission; return its emission time.

        Ranks passed over are done or have failed once, and never need a first-emission timeout again.
        """
        order, pending, attempts = self._order, self._pending, self._attempts
        i, n = self._tpos, len(order)
        if len(pending) > len(attempts):  # some pending record is in its first emission (attempts <= pending)
            while i < n:
                rank = order[i]
                if rank in pending and rank not in attempts:
                    self._tpos = i
                    return self._times[i]
                i += 1
        self._tpos = n
        return None

    def _check_compaction(self) -> None:
        """Compact ``_order`` if it is longer than ``_COMPACT_FACTOR / 2 * pending + _COMPACT_SLACK``, rebuild
        ``_pending`` if acks left it mostly holes (a dict keeps the room of all it ever held until it grows again),
        then set how many records may be done before either can be needed (an emit only makes it later)."""
        order, pending = self._order, self._pending
        live = len(pending) + len(self._dead_lettering)
        factor, slack = _COMPACT_FACTOR, _COMPACT_SLACK
        if 2 * len(order) > factor * live + 2 * slack:
            self._compact(live)
            order = self._order
        if sys.getsizeof(pending) > _DICT_BYTES * live + _DICT_SLACK:
            self._pending = dict(pending)  # sized for what it holds
            if self._attempts:
                self._attempts, self._due, self._reemitted = (dict(self._attempts), dict(self._due),
                                                              dict(self._reemitted))
        # k more done records leave live - k pending: compaction is due once 2 * len > factor * (live - k) + 2 * slack
        self._budget = min((factor * live + 2 * slack - 2 * len(order)) // factor, max(live // 8, _DICT_CHECK))

    def _compact(self, live: int) -> None:
        """Drop from ``_order`` (and ``_times``) the ranks no checkpoint can need any more. Everything before the
        rank emitted just before the smallest pending one goes (a slice, no hashing); if what is left is still too
        long, a pass keeps only the pending ranks, each preceded by the rank emitted just before it, and the last
        emitted rank."""
        order, times, pending, dead = self._order, self._times, self._pending, self._dead_lettering
        tpos = self._tpos
        trank = order[tpos] if tpos < len(order) else None
        if not live:  # everything done: only the checkpoint is left
            new, new_times = order[-1:], times[-1:]
        else:
            first = next(iter(pending)) if pending else min(dead)  # dicts keep insertion (= emission) order
            if pending and dead:
                first = min(first, min(dead))
            start = bisect_left(order, first, self._lo) - 1  # order[start]: the candidate, done (or no key)
            new, new_times = order[start:], times[start:]
            if 2 * len(new) > _COMPACT_FACTOR * live + 2 * _COMPACT_SLACK:  # many done ranks among the pending ones
                if dead:
                    flags = [rank in pending or rank in dead for rank in new]
                else:
                    flags = list(map(pending.__contains__, new))
                keep = list(map(or_, flags, islice(flags, 1, None)))  # keep new[j] if it or new[j + 1] is pending
                keep.append(True)
                new, new_times = list(compress(new, keep)), array("d", compress(new_times, keep))
                if dead:
                    self._dead_lettering = dict(dead)
        self._dropped += len(order) - len(new)
        self._order, self._times, self._lo = new, new_times, 1
        self._tpos = len(new) if trank is None else bisect_left(new, trank, 1)
