"""The in-flight record tracker of one shard: safe checkpoint, retry queue and message timeouts.

PURE: standard library only, no threads, clocks or I/O. Time comes in as a ``now: float`` argument (seconds,
from any monotonic clock, never decreasing between calls) and an event loop asks :meth:`next_due` how long it
may sleep. One tracker per shard, called by the spout from one thread.

The **safe checkpoint** is the greatest emitted key K such that every record emitted at or below K is done
(acked, or dead-lettered after its retries ran out, once its dead letter is written). New keys arrive in
increasing order, so if the smallest pending key is h, the safe checkpoint is the key emitted immediately before h.
The tracker therefore keeps:

- ``_pending``: a dict ``key -> (item, size, emitted_at)`` of records not yet done, in emission order;
  ``emitted_at`` is ``None`` while the record waits in the retry queue;
- ``_order``: the emitted keys in emission order, with done keys removed lazily. ``_order[0]`` is the initial
  checkpoint; compaction keeps every pending key together with the key emitted just before it, and the last
  emitted key, so the key in front of the first pending one (or the last key) is the checkpoint. Compaction runs
  when done keys outnumber twice the pending ones, so memory follows what is pending, not what was acked;
- a heap of ``(due, key)`` for the retry queue and a heap of ``(emitted_at, key)`` for the timeouts of
  re-emitted records, both with lazy deletion. Timeouts of first emissions need no extra structure: emission order
  is time order, and a cursor walks ``_order`` forward.

Unlike the original Java tracker: ``retry_limit=0`` still tracks and checkpoints (the first failure dead-letters);
an ack of a record waiting for its retry removes it from the queue; acked runs never accumulate.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from itertools import compress, islice
from operator import or_
from typing import Any, cast

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import SequenceKey

__all__ = ["FailOutcome", "InflightRecordTracker", "RetryBackoff", "TrackerStats"]

_COMPACT_FACTOR = 3  # _order is compacted when longer than _COMPACT_FACTOR * pending + _COMPACT_SLACK
_COMPACT_SLACK = 1024
_HEAP_SLACK = 64  # stale heap entries tolerated beyond twice the live ones


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """Exponential backoff between the failure of a record and its re-emission.

    ``delay(1) == initial_s``, ``delay(n) == initial_s * multiplier ** (n - 1)``, never more than ``max_s``.
    """

    initial_s: float = 0.1
    multiplier: float = 2.0
    max_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.initial_s >= 0:
            raise ConfigError(f"RetryBackoff.initial_s must be >= 0, got {self.initial_s!r}")
        if not self.multiplier >= 1:
            raise ConfigError(f"RetryBackoff.multiplier must be >= 1, got {self.multiplier!r}")
        if not self.max_s >= self.initial_s:
            raise ConfigError(f"RetryBackoff.max_s must be >= initial_s ({self.initial_s!r}), got {self.max_s!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before re-emitting a record whose attempt number ``attempt`` (1 = first) just failed."""
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt!r}")
        try:
            d = self.initial_s * self.multiplier ** (attempt - 1)
        except OverflowError:
            return self.max_s
        return d if d < self.max_s else self.max_s


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
    """

    def __init__(
        self,
        shard_id: str,
        *,
        retry_limit: int = 3,
        backoff: RetryBackoff = RetryBackoff(),
        message_timeout_s: float | None = 30.0,
        checkpoint: SequenceKey | None = None,
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
        self._last: SequenceKey | None = checkpoint  # greatest key emitted (or the initial checkpoint)
        self._pending: dict[SequenceKey, tuple[Any, int, float | None]] = {}
        self._order: list[SequenceKey | None] = [checkpoint]
        self._lo = 1  # every key in _order[1:_lo] is done
        self._tpos = 1  # keys in _order[:_tpos] need no first-emission timeout
        self._attempts: dict[SequenceKey, int] = {}  # pending records that failed once: current attempt number
        self._retry_heap: list[tuple[float, SequenceKey]] = []  # (due, key); stale unless the key is waiting
        self._waiting = 0  # live entries of _retry_heap
        self._reemit_heap: list[tuple[float, SequenceKey]] = []  # (re-emitted at, key), for timeouts
        self._bytes = 0
        self._dead: list[tuple[SequenceKey, Any, int]] = []  # dead letters not yet taken by the caller
        self._dead_lettering: dict[SequenceKey, int] = {}  # pending dead letters (not written yet) -> attempt
        self._dropped = 0  # keys dropped from _order by compactions: emitted = _dropped + len(_order) - 1
        self._budget = 0  # acks left before _order may need compacting
        self._check_compaction()

    # ------------------------------------------------------------------ emission and completion

    def emit(self, key: SequenceKey, now: float, item: object = None, size: int = 0) -> bool:
        """Put a NEW record in flight (attempt 1), emitted at ``now``. Called by the spout before emitting it.

        Keys of new records arrive in increasing order: a key at or below the greatest key emitted so far (or the
        initial checkpoint) is a replay after a re-seek; it is ignored, counted in ``duplicates_ignored``, and
        ``False`` is returned. ``item`` is opaque (returned by :meth:`next_retry` and with dead letters);
        ``size`` counts into :attr:`inflight_bytes` until the record is done.
        """
        last = self._last
        if last is not None and key <= last:
            self._stats.duplicates_ignored += 1
            return False
        self._last = key
        self._pending[key] = (item, size, now)
        self._order.append(key)
        self._bytes += size
        return True

    def ack(self, key: SequenceKey) -> bool:
        """Mark a record done. Called by the spout when downstream acks it; may advance :attr:`checkpoint`.

        Acking a record waiting in the retry queue removes it from the queue. Unknown or already-done keys
        return ``False`` and are counted in ``unknown_acks``.
        """
        if self._dead_lettering and key in self._dead_lettering:
            self._stats.unknown_acks += 1  # its retries ran out: it is done when its dead letter is written
            return False
        entry = self._pending.pop(key, None)
        if entry is None:
            self._stats.unknown_acks += 1
            return False
        self._bytes -= entry[1]
        if self._attempts and self._attempts.pop(key, None) is not None and entry[2] is None:
            self._waiting -= 1
        self._budget -= 1
        if self._budget < 0:
            self._check_compaction()
        return True

    def fail(self, key: SequenceKey, now: float) -> FailOutcome:
        """Handle the failure of a record in flight. Called by the spout when downstream fails it.

        With retries left (attempt number <= ``retry_limit``) the record is queued for re-emission at
        ``now + backoff.delay(attempt)``: ``RETRY``. Otherwise it becomes a pending dead letter, queued for
        :meth:`take_dead_letters`: ``DEAD_LETTER``; it no longer times out, acks of it are ignored, and it is done
        (so the checkpoint moves on) when :meth:`dead_letter_written` is called. An unknown key, a done key or a key
        already waiting in the retry queue changes nothing and is counted in ``unknown_fails``: ``UNKNOWN``.
        """
        entry = self._pending.get(key)
        if entry is None or entry[2] is None:
            self._stats.unknown_fails += 1
            return FailOutcome.UNKNOWN
        self._stats.failed += 1
        attempt = self._attempts.get(key, 1)
        if attempt <= self.retry_limit:
            self._pending[key] = (entry[0], entry[1], None)
            self._attempts[key] = attempt
            heappush(self._retry_heap, (now + self.backoff.delay(attempt), key))
            self._waiting += 1
            if len(self._retry_heap) > 2 * self._waiting + _HEAP_SLACK:
                self._retry_heap = [e for e in self._retry_heap if self._is_waiting(e[1])]
                heapify(self._retry_heap)
            return FailOutcome.RETRY
        self._attempts.pop(key, None)
        self._start_dead_letter(key, entry, attempt)
        return FailOutcome.DEAD_LETTER

    def give_up(self, key: SequenceKey) -> bool:
        """Dead-letter a record in flight at once, without a retry (e.g. its scheme cannot decode it). Called by the
        spout. The record joins the dead letters of :meth:`take_dead_letters` with its current attempt number, and,
        like any dead letter, is done only once :meth:`dead_letter_written` is called. ``False`` (nothing changed)
        for a key that is not in flight (unknown, done, waiting for its retry, or already a dead letter)."""
        entry = self._pending.get(key)
        if entry is None or entry[2] is None:
            return False
        self._start_dead_letter(key, entry, self._attempts.pop(key, 1))
        return True

    def take_dead_letters(self) -> list[tuple[SequenceKey, Any, int]]:
        """Return and forget the records dead-lettered since the last call, as ``(key, item, last attempt)``.

        Called by the spout after :meth:`fail` or :meth:`expire` reported ``DEAD_LETTER`` (or after
        :meth:`give_up`), to hand the items to its dead-letter destination. The records stay pending (they hold the
        checkpoint back) until the spout reports each one written with :meth:`dead_letter_written`.
        """
        dead, self._dead = self._dead, []
        return dead

    def dead_letter_written(self, key: SequenceKey) -> bool:
        """The dead letter of ``key`` was durably written: the record is done, and the checkpoint may move past it.
        Called by the spout once its dead-letter destination succeeded. ``False`` (nothing changed) for a key that
        is not a pending dead letter."""
        if self._dead_lettering.pop(key, None) is None:
            return False
        entry = self._pending.pop(key)
        self._bytes -= entry[1]
        self._stats.dead_lettered += 1
        self._budget -= 1
        if self._budget < 0:
            self._check_compaction()
        return True

    def _start_dead_letter(self, key: SequenceKey, entry: tuple[Any, int, float | None], attempt: int) -> None:
        """Turn a record in flight into a pending dead letter: no timeout, no retry, not done."""
        self._pending[key] = (entry[0], entry[1], None)
        self._dead_lettering[key] = attempt
        self._dead.append((key, entry[0], attempt))

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
        key = heappop(heap)[1]
        self._waiting -= 1
        item, size, _ = self._pending[key]
        attempt = self._attempts[key] + 1
        self._attempts[key] = attempt
        self._pending[key] = (item, size, now)
        if self.message_timeout_s is not None:
            heappush(self._reemit_heap, (now, key))
            if len(self._reemit_heap) > 2 * len(self._attempts) + _HEAP_SLACK:
                self._reemit_heap = [e for e in self._reemit_heap if self._is_reemitted_at(e)]
                heapify(self._reemit_heap)
        self._stats.retried += 1
        return key, item, attempt

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
        out: list[tuple[SequenceKey, FailOutcome]] = []
        while True:  # first emissions: in time order along _order
            emitted_at = self._first_emission_head()
            if emitted_at is None or emitted_at + timeout > now:
                break
            key = self._order[self._tpos]
            out.append((key, self.fail(key, now)))  # type: ignore[arg-type]
        heap = self._reemit_heap
        while heap:  # re-emissions
            entry = heap[0]
            if not self._is_reemitted_at(entry):
                heappop(heap)
            elif entry[0] + timeout > now:
                break
            else:
                heappop(heap)
                out.append((entry[1], self.fail(entry[1], now)))
        self._stats.timed_out += len(out)
        out.sort()
        return out

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
        order, pending, lo = self._order, self._pending, self._lo
        if not pending:  # everything done: the last emitted key (or the initial checkpoint)
            return order[-1]
        n = len(order)
        while lo < n and order[lo] not in pending:
            lo += 1
        self._lo = lo
        return order[lo - 1]

    @property
    def stats(self) -> TrackerStats:
        """The counters, for metrics. The same object each time; ``emitted`` and ``acked`` are derived (emitted =
        acked + dead-lettered + in flight) and brought up to date when this property is read, so that the hot
        paths count nothing."""
        stats = self._stats
        stats.emitted = self._dropped + len(self._order) - 1
        stats.acked = stats.emitted - stats.dead_lettered - len(self._pending)
        return stats

    @property
    def inflight_count(self) -> int:
        """Records emitted and not yet done, those waiting in the retry queue included."""
        return len(self._pending)

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
        return self._waiting

    def __repr__(self) -> str:
        return f"InflightRecordTracker({self.shard_id!r}, inflight={len(self._pending)}, retry={self._waiting})"

    # ------------------------------------------------------------------ internals

    def _is_waiting(self, key: SequenceKey) -> bool:
        entry = self._pending.get(key)
        return entry is not None and entry[2] is None and key not in self._dead_lettering

    def _is_reemitted_at(self, heap_entry: tuple[float, SequenceKey]) -> bool:
        """Whether a re-emission heap entry is the record's current emission (not acked, failed or re-emitted)."""
        entry = self._pending.get(heap_entry[1])
        return entry is not None and entry[2] is not None and entry[2] == heap_entry[0]

    def _prune_retry_heap(self) -> bool:
        """Drop stale entries (records acked while waiting) from the top of the retry heap; True if one is left."""
        heap = self._retry_heap
        while heap and not self._is_waiting(heap[0][1]):
            heappop(heap)
        return bool(heap)

    def _first_emission_head(self) -> float | None:
        """Move the timeout cursor to the oldest record still in its first emission; return its emission time.

        Keys passed over are done or have failed once, and never need a first-emission timeout again.
        """
        order, pending, attempts = self._order, self._pending, self._attempts
        i, n = self._tpos, len(order)
        while i < n:
            key = order[i]
            entry = pending.get(key)  # type: ignore[arg-type]
            if entry is not None and entry[2] is not None and key not in attempts:
                self._tpos = i
                return entry[2]
            i += 1
        self._tpos = n
        return None

    def _check_compaction(self) -> None:
        """Compact ``_order`` if it is longer than ``_COMPACT_FACTOR * pending + _COMPACT_SLACK``, then set the
        number of acks that can follow before that can be true again (an emit grows both sides)."""
        if len(self._order) > _COMPACT_FACTOR * len(self._pending) + _COMPACT_SLACK:
            self._compact()
        self._budget = (_COMPACT_FACTOR * len(self._pending) + _COMPACT_SLACK - len(self._order)) // _COMPACT_FACTOR

    def _compact(self) -> None:
        """Rebuild ``_order`` with only the pending keys, each preceded by the key emitted just before it, and the
        last emitted key."""
        order, pending = self._order, self._pending
        tkey = order[self._tpos] if self._tpos < len(order) else None
        if not pending:  # everything done: only the checkpoint is left
            new = [order[-1]]
        else:  # everything before the smallest pending key is done: drop it without hashing keys
            keys = cast("list[SequenceKey]", order)  # only _order[0] may be None, and lo >= 1 skips it
            seq = order[bisect_left(keys, next(iter(pending)), self._lo) - 1 :]  # seq[0]: the candidate, done
            if len(seq) - 1 == len(pending):  # no done key after the head (in-order acks)
                new = seq
            else:  # keep seq[j] if it or seq[j + 1] is pending, and the last key; C-speed passes
                flags = list(map(pending.__contains__, seq))
                keep = list(map(or_, flags, islice(flags, 1, None)))
                keep.append(True)
                new = list(compress(seq, keep))
        self._dropped += len(order) - len(new)
        self._order, self._lo = new, 1
        self._tpos = len(new) if tkey is None else bisect_left(cast("list[SequenceKey]", new), tkey, 1)
