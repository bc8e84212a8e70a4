"""Emission: taking records from the shards' readers, putting them in flight and making their tuples.

:class:`Emitter` is called by the spout's facade with the registry's lock held (next_tuple/next_batch on the
consumer's thread); it owns the retry cursor and the poison-record count, both guarded by that lock. The scheme is
called under the lock, on the caller's thread. The new records of one shard taken together go in flight as one span
of its tracker; a batch (:class:`~kinesis_spout.spout.batch.SpoutBatch`) keeps its spans, so that it can be acked
whole.
"""

from __future__ import annotations

import logging
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from kinesis_spout.kinesis.retrieval.wire_columns import record_of
from kinesis_spout.records import RANK_BASE, Record, SpoutTuple, message_id, record_sizes, records_bytes
from kinesis_spout.spout.kpl import note_aggregates
from kinesis_spout.spout.shards import ShardPhase

if TYPE_CHECKING:
    from kinesis_spout.config import TrackingSettings
    from kinesis_spout.records import SequenceKey
    from kinesis_spout.schemes import RecordScheme
    from kinesis_spout.spout.batch import SpoutBatch
    from kinesis_spout.spout.dead_letters import DeadLetterGlue
    from kinesis_spout.spout.registry import ShardRegistry
    from kinesis_spout.spout.shards import ShardLifecycle
    from kinesis_spout.tracking.spans import Span

__all__ = ["NO_BYTE_LIMIT", "TAKE_CHUNK", "Emitter"]

log = logging.getLogger(__name__)

T = TypeVar("T")  # what a caller of Emitter.next_due_retry makes of a retry

_POISON: Any = object()  # what _values returns for a record its scheme refused
NO_BYTE_LIMIT = 1 << 62
TAKE_CHUNK = 100  # a batch takes up to this many records of a shard at a time (then the next shard's turn)
_FINISHING = (ShardPhase.READING, ShardPhase.DRAINING)
_AGGREGATED = itemgetter(7)  # Record.aggregated: 0 for a plain record


class Emitter:
    """Takes records for the facade (lock held): due retries first, then new records round-robin across the shards
    that are under their in-flight limits. Also the housekeeping before each take (message timeouts, shard ends).
    ``tracking`` gives the in-flight limits, the message timeout and whether records are acked on emit; ``scheme``
    decodes the records."""

    def __init__(self, registry: ShardRegistry, tracking: TrackingSettings, scheme: RecordScheme,
                 dead_letters: DeadLetterGlue) -> None:
        self.registry = registry
        self.tracking = tracking
        self.scheme = scheme
        self.dead_letters = dead_letters
        self.poison_records = 0
        self._retry_cursor = 0
        self._out: list[SpoutTuple] | None = None  # the tuples of the chunk being emitted (see _emit)
        self._reported = 0  # how many of them were reported decoded to the dead-letter glue

    def maintain(self, now: float) -> None:
        """Fail the records whose message timeout passed, and finish the shards read to their end with nothing in
        flight (their shard ends are offered)."""
        for state in list(self.registry.shards.values()):
            tracker = state.tracker
            if self.tracking.message_timeout_s is not None and tracker.inflight_count:
                expired = tracker.expire(now)
                if expired:
                    log.warning("%d records of %s timed out after %.1f s and were failed", len(expired),
                                state.shard_id, self.tracking.message_timeout_s)
                    self.dead_letters.deliver(state, "timed out")
            if state.phase in _FINISHING and state.reader.ended and state.reader.exhausted \
                    and not tracker.inflight_count:
                self.registry.finish(state)

    def has_retries(self) -> bool:
        """True when any shard has a record queued for a retry."""
        return any(s.tracker.retry_queue_len for s in self.registry.shards.values())

    def next_due(self, now: float) -> float | None:
        """Seconds until the next retry or message timeout of any shard."""
        dues = [d for s in self.registry.shards.values() if (d := s.tracker.next_due(now)) is not None]
        return min(dues, default=None)

    def take(self, now: float, retries: bool, want: int, max_bytes: int,
             into: SpoutBatch | None = None) -> list[SpoutTuple]:
        """A due retry (unless ``retries`` is False: none is queued), or else up to ``want`` new records of one
        shard whose bytes stay under ``max_bytes`` (at least one record). Empty when nothing is ready. ``into``: the
        batch being filled, told of the span (or the retry) taken, so that it can be acked whole."""
        if retries:
            retry = self._next_retry(now, into)
            if retry is not None:
                return [retry]
        room = self.room(max_bytes)
        while True:
            records = self.registry.rr.next_records(room, want)
            if not records:
                return []
            emitted = self._emit(records, now, into)
            if emitted:
                return emitted

    def room(self, max_bytes: int) -> Callable[[str], tuple[int, int]]:
        """What a shard may take now under its in-flight limits, records and bytes (at most ``max_bytes``): the
        round-robin reader's ``room`` (lock held). Used by :meth:`take` and the columnar batches."""
        tracking = self.tracking
        shards = self.registry.shards

        def room(shard_id: str) -> tuple[int, int]:
            state = shards[shard_id]
            if not state.takes_new_records:
                return (0, 0)
            tracker = state.tracker
            return (tracking.max_inflight_records - tracker.inflight_count,
                    min(tracking.max_inflight_bytes - tracker.inflight_bytes, max_bytes))

        return room

    def fill(self, batch: SpoutBatch, now: float, limit: int, byte_limit: int) -> None:
        """Append what is ready to ``batch`` (next_batch), up to ``limit`` tuples and about ``byte_limit`` bytes (at
        least one record), with the spans and retries it takes. An error of a take is raised; the tuples appended
        before it stay in ``batch``."""
        retries = self.has_retries()
        size = 0
        while len(batch) < limit and size < byte_limit:
            taken = self.take(now, retries, min(limit - len(batch), TAKE_CHUNK), byte_limit - size, batch)
            if not taken:
                break
            batch.extend(taken)
            size += records_bytes([t[1] for t in taken])  # t[1]: t.record

    def _next_retry(self, now: float, into: SpoutBatch | None) -> SpoutTuple | None:
        def use(state: ShardLifecycle, key: SequenceKey, item: Any, attempt: int) -> SpoutTuple | None:
            record = record_of(item, key.rank)  # put in flight from columns: made now
            values = self._values(state, record)
            if values is _POISON:
                return None  # the scheme refused it this time: dead-lettered
            mid = message_id(state.shard_id, key)
            if into is not None:
                into.add_single(state, key.rank, mid, attempt)
            return SpoutTuple(mid, record, values, attempt)

        return self.next_due_retry(now, use)

    def next_due_retry(self, now: float, use: Callable[[ShardLifecycle, SequenceKey, Any, int], T | None]) -> T | None:
        """The next due retry of any shard in turn, as ``use(state, key, item, attempt)`` makes it; None when none
        is due. ``use`` answering None has consumed the retry (e.g. dead-lettered it): the shard's next due retry is
        looked at. One cursor for every kind of batch (records or columns), so the shards take turns whichever the
        consumer asks for. Called on the consumer's thread only."""
        states = list(self.registry.shards.values())
        n = len(states)
        for i in range(n):
            state = states[(self._retry_cursor + i) % n]
            if not state.emits_retries:
                continue
            tracker = state.tracker
            while tracker.retry_queue_len and tracker.has_due_retry(now):
                got = tracker.next_retry(now)
                if got is None:
                    break
                used = use(state, *got)
                if used is None:
                    continue
                self._retry_cursor = (self._retry_cursor + i + 1) % n
                return used
        return None

    def _values(self, state: ShardLifecycle, record: Record) -> Any:
        """The scheme's values for a record in flight, or ``_POISON`` when the scheme raised: the record is then a
        poison record, handed to the dead-letter handler with the exception, and done (whatever the exception's
        type: a record that cannot be decoded must neither stop the shard nor vanish)."""
        try:
            return self.scheme(record)
        except Exception as exc:  # noqa: BLE001 - any scheme error makes the record a poison record
            return self._poison(state, record, exc)

    def _poison(self, state: ShardLifecycle, record: Record, exc: Exception) -> Any:
        """Dead-letter ``record``, which the scheme refused with ``exc`` (after reporting the records decoded before
        it); returns ``_POISON``."""
        self.poison_records += 1
        if self._out is not None:  # the records decoded before this one end the run of dead letters first
            self.dead_letters.decoded(len(self._out) - self._reported)
            self._reported = len(self._out)
        reason = f"poison record: {exc}" if isinstance(exc, ValueError) else \
            f"poison record: the scheme raised {type(exc).__name__}: {exc}"
        self.dead_letters.give_up(state, record, reason)
        return _POISON

    def put_in_flight(self, records: list[Record], now: float,
                      into: SpoutBatch | None) -> tuple[ShardLifecycle, list[Record], Span | None]:
        """Put records of one shard (in read order) in flight as one span (lock held): returns the shard, the records
        put in flight (replays of records already emitted are dropped) and the span (None when they went one by
        one). ``into`` (the batch being filled) keeps the span when the spout is reliable. Called by :meth:`_emit`
        and by the columnar batches, which make no tuples."""
        state = self.registry.shards[records[0].shard_id]
        tracker = state.tracker
        if any(map(_AGGREGATED, records)):  # user records of KPL aggregates among them (in C: no pass for plain ones)
            note_aggregates(state.aggregates, records)
        sizes = record_sizes(records)
        reliable = self.tracking.reliable
        try:
            span = tracker.emit_span([k[0] * RANK_BASE + k[1] for k in [r[6] for r in records]], now, records,
                                     sizes)  # the records' ranks (Record.rank, inlined)
        except ValueError:  # not in increasing order (never seen from one reader): one at a time, as emit decides
            span = None
            pairs = [(r, n) for r, n in zip(records, sizes) if tracker.emit(r.rank, now, r, n)]
            kept = [r for r, _n in pairs]
            state.emitted_bytes += sum([n for _r, n in pairs])
            if into is not None and reliable:
                for r in kept:
                    into.add_single(state, r.rank, r.message_id, 1)
        else:
            skip = len(records) - len(span.ranks) if span is not None else len(records)
            kept = records[skip:] if skip else records  # the records put in flight (replays skipped)
            state.emitted_bytes += sum(sizes[skip:]) if skip else sum(sizes)
            if span is not None and into is not None and reliable:
                into.add_span(state, span)
        return state, kept, span

    def _emit(self, records: list[Record], now: float, into: SpoutBatch | None) -> list[SpoutTuple]:
        """Put records of one shard (in read order) in flight as one span and make their tuples; ``into`` (the batch
        being filled) keeps the span. Replays of records already emitted are dropped, and so are records the scheme
        refused (dead-lettered). Without reliability the span is acked whole at once."""
        state, kept, span = self.put_in_flight(records, now, into)
        tracker = state.tracker
        reliable = self.tracking.reliable
        out: list[SpoutTuple] = []
        append = out.append
        self._out, self._reported = out, 0  # records decoded are reported before each poison one, in read order
        new = tuple.__new__  # a SpoutTuple with every field given, without its named-tuple __new__
        scheme = self.scheme
        shard_id = state.shard_id
        ack_each = not reliable and span is None
        for record in kept:
            try:
                values = scheme(record)
            except Exception as exc:  # noqa: BLE001 - any scheme error makes the record a poison record
                self._poison(state, record, exc)
                continue
            if ack_each:
                tracker.ack(record.rank)
            # the message id (Record.message_id, inlined): "shard:seq", plus ":sub" for a user record but the first
            sub = record[2]
            append(new(SpoutTuple, (f"{shard_id}:{record[1]}:{sub}" if sub else f"{shard_id}:{record[1]}", record,
                                    values, 1)))
        if not reliable and kept:
            if span is not None:
                tracker.ack_span(span)  # every record but those the scheme refused (pending dead letters)
            self.registry.offer_checkpoint(state)
        self.dead_letters.decoded(len(out) - self._reported)  # ends a run of dead letters in a row
        self._out = None
        return out
