"""The reference model's records of one shard in flight, in emission order, and the safe checkpoint they allow.

Test support, not library code: :class:`InflightRecords` is the base class of
:class:`~tests.unit.core.reference_tracker.PerRecordTracker`, the per-record tracker (a port of the original Storm
spout's linked map of records in flight) that the differential and model tests hold the library's one tracker,
:class:`~kinesis_spout.tracking.spans.SpanTracker`, to, and that the tracker benchmark runs as its baseline. The
per-record hot paths (``emit``, ``emit_many``, the checkpoint, the counts) are its own methods. Its state is owned by
the one thread that calls the tracker; the attributes below are shared with that subclass, which adds acks,
failures, retries and dead letters, and nobody else touches them.

The **safe checkpoint** is the greatest emitted key K such that every record emitted at or below K is done
(acked, or dead-lettered after its retries ran out, once its dead letter is written). New keys arrive in
increasing order, so if the smallest pending key is h, the safe checkpoint is the key emitted immediately before h.
The state, all on ranks (see :mod:`kinesis_spout.tracking.keys`):

- ``_pending``: a dict ``rank -> (item, size)`` of the records in flight or waiting for their retry, in emission
  order; ``_dead_lettering``: ``rank -> size`` of the pending dead letters (retries ran out, letter not written);
- ``_order``: the emitted ranks in emission order, done ones removed lazily, and ``_times``, an array of their first
  emission times, aligned with ``_order``. ``_order[0]`` is the initial checkpoint (-1 for none); compaction keeps
  every pending rank together with the rank emitted just before it, and the last emitted rank, so the rank in front
  of the first pending one (or the last rank) is the checkpoint;
- ``_attempts``: rank -> current attempt number of the pending records that failed at least once (written by the
  subclass's failure paths; read here to tell records in their first emission from re-emitted ones).

Timeouts of first emissions need no extra structure: emission order is time order, and a cursor (``_tpos``) walks
``_order`` forward; it only moves when the record under it may be overdue. Re-emitted records time out through the
:class:`~kinesis_spout.tracking.retries.RetryQueue`.

Memory follows what is pending, not what was acked. When ``_order`` grows longer than 2.5 times the pending records
(plus a slack), the ranks no checkpoint can need any more go: the done ones before the first pending rank (a slice),
then, if that is not enough, every done rank but those just before a pending one (a pass). ``_pending`` is rebuilt
when acks left it mostly holes: a dict keeps the room of everything it held until it grows again.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import compress, islice, repeat
from operator import lt, or_
from typing import Any, cast

from kinesis_spout.records import SequenceKey
from kinesis_spout.tracking.keys import NO_KEY, Key, key_of_rank, rank_of_key
from kinesis_spout.tracking.outcomes import TrackerStats

__all__ = ["COMPACT_FACTOR", "COMPACT_SLACK", "DICT_BYTES", "DICT_CHECK", "DICT_SLACK", "InflightRecords"]

# Tuning constants, read at each use (tests shrink them to exercise compaction). _order is compacted when longer
# than COMPACT_FACTOR / 2 * pending + COMPACT_SLACK (a pass over it costs at most COMPACT_FACTOR / (COMPACT_FACTOR
# - 4) element steps per rank it drops, since at most 2 * pending + 1 stay).
COMPACT_FACTOR = 5
COMPACT_SLACK = 1024
DICT_CHECK = 64  # records done between two looks at the size of _pending, at least
DICT_BYTES = 64  # _pending is rebuilt when it holds more than DICT_BYTES * pending + DICT_SLACK bytes
DICT_SLACK = 16384


class InflightRecords:
    """The records of one shard from emission until they are done, in emission order, and the safe checkpoint.

    Who calls: the tests and the tracker benchmark, through :class:`PerRecordTracker` (this class's only
    subclass), from one thread. O(1) amortized per record; memory proportional to the records not yet done.
    """

    def __init__(self, checkpoint: Key | None) -> None:
        self._stats = TrackerStats()
        initial = NO_KEY if checkpoint is None else rank_of_key(checkpoint)
        self._pending: dict[int, tuple[Any, int]] = {}
        self._dead_lettering: dict[int, int] = {}  # pending dead letters (not written yet) -> size
        self._order: list[int] = [initial]  # _order[-1]: the greatest rank emitted (or the initial checkpoint)
        self._times = array("d", [0.0])  # first emission time of each rank of _order (_times[0] is unused)
        self._lo = 1  # every rank in _order[1:_lo] is done
        self._tpos = 1  # ranks in _order[:_tpos] need no first-emission timeout
        self._attempts: dict[int, int] = {}  # pending records that failed once: current attempt number
        self._bytes = 0
        self._dropped = 0  # ranks dropped from _order by compactions: emitted = _dropped + len(_order) - 1
        self._budget = 0  # records that may be done before _order and _pending need a look (_check_compaction)
        self._checkpoint = (initial, None if checkpoint is None else key_of_rank(initial))  # last rank read, its key
        self._check_compaction()

    # ------------------------------------------------------------------ emission

    def emit(self, key: Key, now: float, item: object = None, size: int = 0) -> bool:
        """Put a NEW record in flight (attempt 1), emitted at ``now``. Called by the spout before emitting it.

        Keys of new records arrive in increasing order: a key at or below the greatest key emitted so far (or the
        initial checkpoint) is a replay after a re-seek; it is ignored, counted in ``duplicates_ignored``, and
        ``False`` is returned. ``item`` is opaque (returned by ``next_retry`` and with dead letters);
        ``size`` counts into :attr:`inflight_bytes` until the record is done.
        """
        if key.__class__ is not int:
            key = rank_of_key(key)
        order = self._order
        if key <= order[-1]:
            self._stats.duplicates_ignored += 1
            return False
        self._pending[key] = (item, size)
        order.append(key)
        self._times.append(now)
        self._bytes += size
        return True

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
            ranks = [rank_of_key(key) for key in keys]
        try:
            increasing = all(map(lt, ranks, islice(ranks, 1, None)))
        except TypeError:  # SequenceKeys among ranks
            ranks = [rank_of_key(key) for key in keys]
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
            last = self._checkpoint = (rank, None if rank == NO_KEY else key_of_rank(rank))
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
    def retained_count(self) -> int:
        """How many emitted keys the tracker still holds in emission order for the checkpoint, done ones included
        until a compaction drops them (16 bytes each, beside the records in flight). After every record done it is
        at most ``COMPACT_FACTOR / 2 * inflight_count + COMPACT_SLACK + 1``: memory follows what is pending, not
        what was acked. A figure for metrics and memory checks; changes nothing."""
        return len(self._order)

    @property
    def dead_letters_pending(self) -> int:
        """Records whose retries ran out (or that were given up) and whose dead letter is not written yet; they are
        counted in :attr:`inflight_count` and hold the checkpoint back."""
        return len(self._dead_lettering)

    # ------------------------------------------------------------------ first-emission timeouts

    def _overdue_first_emissions(self, now: float, timeout: float) -> list[int]:
        """The ranks of the pending records in their first emission whose emission was at least ``timeout`` ago,
        in emission order; the timeout cursor moves past them (the subclass's ``expire`` fails each, which takes
        them out of their first emission)."""
        order, times, tpos = self._order, self._times, self._tpos
        n = len(order)
        out: list[int] = []
        # _times[_tpos] is a lower bound of the emission times of the records in their first emission, so nothing
        # is overdue (and the cursor stays) while it is recent.
        if tpos < n and times[tpos] + timeout <= now:
            if len(self._pending) == len(self._attempts):  # every pending record failed once: none is in its first
                tpos = n
            pending, attempts = self._pending, self._attempts
            while tpos < n and times[tpos] + timeout <= now:
                rank = order[tpos]
                if rank in pending and rank not in attempts:
                    out.append(rank)
                tpos += 1
            self._tpos = tpos
        return out

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

    # ------------------------------------------------------------------ memory

    def _shrink_failures(self) -> None:
        """Hook: the dicts of pending records and attempts were just rebuilt; the subclass rebuilds the dicts of
        its retry queue likewise. Called by :meth:`_check_compaction` only while some record has failed."""

    def _check_compaction(self) -> None:
        """Compact ``_order`` if it is longer than ``COMPACT_FACTOR / 2 * pending + COMPACT_SLACK``, rebuild
        ``_pending`` if acks left it mostly holes (a dict keeps the room of all it ever held until it grows again),
        then set how many records may be done before either can be needed (an emit only makes it later). Called
        by the subclass once its ``_budget`` of done records runs out."""
        order, pending = self._order, self._pending
        live = len(pending) + len(self._dead_lettering)
        factor, slack = COMPACT_FACTOR, COMPACT_SLACK
        if 2 * len(order) > factor * live + 2 * slack:
            self._compact(live)
            order = self._order
        if sys.getsizeof(pending) > DICT_BYTES * live + DICT_SLACK:
            self._pending = dict(pending)  # sized for what it holds
            if self._attempts:
                self._attempts = dict(self._attempts)
                self._shrink_failures()
        # k more done records leave live - k pending: compaction is due once 2 * len > factor * (live - k) + 2 * slack
        self._budget = min((factor * live + 2 * slack - 2 * len(order)) // factor, max(live // 8, DICT_CHECK))

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
            if 2 * len(new) > COMPACT_FACTOR * live + 2 * COMPACT_SLACK:  # many done ranks among the pending ones
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
