"""The per-record tracker of one shard, the reference model of the library's one tracker.

Test support, not library code. :class:`PerRecordTracker` is a port of the original Storm spout's in-flight record
tracker (a linked map of the records in flight, one entry a record): the tracker this library shipped before the span
tracker (:class:`~kinesis_spout.tracking.spans.SpanTracker`, exported as ``kinesis_spout.InflightRecordTracker``)
replaced it. The differential test (``test_spans_differential.py``) holds the span tracker to it, call by call; the
model test (``test_tracker_model.py``) holds both to a plain list of records; the tracker benchmark
(``benchmarks/bench_tracker.py``) runs it as its baseline. Same methods, arguments and answers as the span tracker.

PURE: standard library and the library's pure modules only, no threads, clocks or I/O; time comes in as ``now``.
Keys are taken as :class:`~kinesis_spout.records.SequenceKey` or as ranks (one int, the fast path); keys handed back
are ``SequenceKey``. It is built from :class:`~tests.unit.core.reference_records.InflightRecords` (its base class: the
records in flight in emission order and the safe checkpoint) and the library's
:class:`~kinesis_spout.tracking.retries.RetryQueue`, and adds what happens to a record after its emission: acks,
failures against the retry threshold (``retry_limit``), retries after a backoff, timeouts and dead letters.

Unlike the original Java tracker: ``retry_limit=0`` still tracks and checkpoints (the first failure dead-letters);
an ack of a record waiting for its retry removes it from the queue; acked runs never accumulate.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from typing import Any, cast

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import RetryBackoff
from kinesis_spout.tracking.keys import Key, key_of_rank, rank_of_key
from kinesis_spout.tracking.outcomes import FailOutcome
from kinesis_spout.tracking.retries import RetryQueue

from .reference_records import InflightRecords

__all__ = ["PerRecordTracker"]


class PerRecordTracker(InflightRecords):
    """Tracks the records of one shard from emission until they are done, and derives the safe checkpoint.

    Who calls: the tests and the tracker benchmark, as the spout calls its tracker, from one thread, which owns all
    of the tracker's state. All methods are O(1) amortized
    per record (heap operations O(log r) for the r records in retry). Memory is proportional to the records not
    yet done. Dead-lettered records are collected until the caller takes them with :meth:`take_dead_letters`; they
    stay pending (holding the checkpoint back) until the caller reports them written with
    :meth:`dead_letter_written`. Keys are taken as ``SequenceKey`` or as ranks (the faster path, see the module
    docstring). Emission, the checkpoint and the counts come from :class:`InflightRecords`.
    """

    def __init__(
        self,
        shard_id: str,
        *,
        retry_limit: int = 3,
        backoff: RetryBackoff = RetryBackoff(),  # noqa: B008 - frozen, as the per-record tracker's default was
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
        self._retries = RetryQueue()
        self._letters: list[tuple[SequenceKey, Any, int]] = []  # dead letters not yet taken by the caller
        super().__init__(checkpoint)

    # ------------------------------------------------------------------ completion

    def ack(self, key: Key) -> bool:
        """Mark a record done. Called by the spout when downstream acks it; may advance :attr:`checkpoint`.

        Acking a record waiting in the retry queue removes it from the queue. Unknown or already-done keys, and
        pending dead letters (done once their letter is written), return ``False`` and are counted in
        ``unknown_acks``.
        """
        if key.__class__ is not int:
            key = rank_of_key(key)
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

    def fail(self, key: Key, now: float) -> FailOutcome:
        """Handle the failure of a record in flight. Called by the spout when downstream fails it.

        With retries left (attempt number <= ``retry_limit``) the record is queued for re-emission at
        ``now + backoff.delay(attempt)``: ``RETRY``. Otherwise it becomes a pending dead letter, queued for
        :meth:`take_dead_letters`: ``DEAD_LETTER``; it no longer times out, acks of it are ignored, and it is done
        (so the checkpoint moves on) when :meth:`dead_letter_written` is called. An unknown key, a done key or a key
        already waiting in the retry queue changes nothing and is counted in ``unknown_fails``: ``UNKNOWN``.
        """
        rank = key if key.__class__ is int else rank_of_key(key)
        return self._fail(rank, now)

    def give_up(self, key: Key) -> bool:
        """Dead-letter a record in flight at once, without a retry (e.g. its scheme cannot decode it). Called by the
        spout. The record joins the dead letters of :meth:`take_dead_letters` with its current attempt number, and,
        like any dead letter, is done only once :meth:`dead_letter_written` is called. ``False`` (nothing changed)
        for a key that is not in flight (unknown, done, waiting for its retry, or already a dead letter)."""
        rank = key if key.__class__ is int else rank_of_key(key)
        if rank not in self._pending or rank in self._retries:
            return False
        self._retries.forget(rank)
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
        size = self._dead_lettering.pop(key if key.__class__ is int else rank_of_key(key), None)
        if size is None:
            return False
        self._bytes -= size
        self._stats.dead_lettered += 1
        self._budget -= 1
        if self._budget < 0:
            self._check_compaction()
        return True

    def _fail(self, rank: int, now: float) -> FailOutcome:
        """:meth:`fail` on a rank; also called by :meth:`expire` for each record that timed out."""
        if rank not in self._pending or rank in self._retries:
            self._stats.unknown_fails += 1
            return FailOutcome.UNKNOWN
        self._stats.failed += 1
        attempts = self._attempts
        attempt = attempts.get(rank, 1)
        if attempt <= self.retry_limit:
            attempts[rank] = attempt
            self._retries.schedule(rank, now + self.backoff.delay(attempt))
            return FailOutcome.RETRY
        if attempts:
            attempts.pop(rank, None)
            self._retries.forget(rank)
        self._start_dead_letter(rank, attempt)
        return FailOutcome.DEAD_LETTER

    def _start_dead_letter(self, rank: int, attempt: int) -> None:
        """Turn a record in flight into a pending dead letter: no timeout, no retry, not done."""
        item, size = self._pending.pop(rank)
        self._dead_lettering[rank] = size
        self._letters.append((key_of_rank(rank), item, attempt))

    def _forget_failures(self, rank: int) -> None:
        """A record that failed before is done (acked): forget its attempt, retry and re-emission."""
        del self._attempts[rank]
        self._retries.forget(rank)

    def _shrink_failures(self) -> None:
        """The dicts of pending records and attempts were rebuilt (see :meth:`InflightRecords._check_compaction`):
        rebuild the retry queue's too."""
        self._retries.shrink()

    # ------------------------------------------------------------------ retries and timeouts

    def next_retry(self, now: float) -> tuple[SequenceKey, Any, int] | None:
        """Pop the retry due soonest if it is due (``due <= now``) and put it back in flight.

        Called by the spout before reading new records. Returns ``(key, item, attempt)`` with the attempt number
        incremented; the record counts as emitted again at ``now`` (its message timeout restarts). ``None`` if no
        retry is due.
        """
        rank = self._retries.pop_due(now)
        if rank is None:
            return None
        attempt = self._attempts[rank] + 1
        self._attempts[rank] = attempt
        if self.message_timeout_s is not None:
            self._retries.reemitted(rank, now)
        self._stats.retried += 1
        return key_of_rank(rank), self._pending[rank][0], attempt

    def has_due_retry(self, now: float) -> bool:
        """Whether :meth:`next_retry` would return a record at ``now``. Called by the spout's loop; drops stale
        queue entries, changes nothing else."""
        return self._retries.has_due(now)

    def expire(self, now: float) -> list[tuple[SequenceKey, FailOutcome]]:
        """Fail, as ``fail(key, now)``, every record in flight whose (re-)emission was at least
        ``message_timeout_s`` ago (``emitted_at + message_timeout_s <= now``); records waiting for a retry do not
        time out. Called by the spout's loop; counts ``timed_out``. Returns ``(key, outcome)`` sorted by key;
        empty when the timeout is disabled (``None``).
        """
        timeout = self.message_timeout_s
        if timeout is None:
            return []
        tpos = self._tpos  # the loop calls this often: look at the cursor before calling out for the first emissions
        if tpos < len(self._order) and self._times[tpos] + timeout <= now:
            out = [(rank, self._fail(rank, now)) for rank in self._overdue_first_emissions(now, timeout)]
        else:
            out = []
        if self._attempts:  # re-emitted records are among the records that failed before
            out.extend((rank, self._fail(rank, now)) for rank in self._retries.pop_timed_out(now, timeout))
        if not out:
            return []
        self._stats.timed_out += len(out)
        out.sort()
        return [(key_of_rank(rank), outcome) for rank, outcome in out]

    def next_due(self, now: float) -> float | None:
        """Seconds from ``now`` until the next retry is due or the next message timeout happens, 0.0 if one is
        overdue, ``None`` if nothing is scheduled. Called by an event loop to sleep exactly as long as needed;
        drops stale entries, changes nothing else."""
        times: list[float] = []
        due = self._retries.next_retry_at()
        if due is not None:
            times.append(due)
        timeout = self.message_timeout_s
        if timeout is not None:
            emitted_at = self._first_emission_head()
            if emitted_at is not None:
                times.append(emitted_at + timeout)
            emitted_at = self._retries.next_reemission_at()
            if emitted_at is not None:
                times.append(emitted_at + timeout)
        if not times:
            return None
        return max(0.0, min(times) - now)

    @property
    def retry_queue_len(self) -> int:
        """Records failed and waiting for their re-emission."""
        return len(self._retries) if self._attempts else 0  # the records waiting are among those that failed

    def __repr__(self) -> str:
        return (f"PerRecordTracker({self.shard_id!r}, inflight={self.inflight_count}, "
                f"retry={len(self._retries)})")
