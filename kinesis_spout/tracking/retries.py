"""The retry queue of one shard's tracker, and the message timeouts of re-emitted records.

PURE: no threads, clocks or I/O; times come in as ``now`` arguments. Owned by the tracker that holds it (one
:class:`~kinesis_spout.tracking.spans.SpanTracker`, called from one thread); only that tracker calls it, and
only for records that failed at least once, never on the path of a record that never fails.

Records are ranks (see :mod:`kinesis_spout.tracking.keys`). Two heaps with lazy deletion: ``(due, rank)`` for the
records waiting for their retry, and ``(re-emitted at, rank)`` for the timeouts of records back in flight; an
entry is live only while the dict beside its heap (``rank -> due``, ``rank -> re-emitted at``) says the same.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

__all__ = ["HEAP_SLACK", "RetryQueue"]

#: Stale heap entries tolerated beyond twice the live ones before a heap is rebuilt. A tuning constant, read at
#: each use (tests shrink it to exercise the rebuild).
HEAP_SLACK = 64


class RetryQueue:
    """Failed records of one shard waiting for their retry, and the re-emission times of retried records still in
    flight (for their message timeout).

    Who calls: the tracker that owns it, from its one thread. The tracker keeps the attempt numbers; this class
    only knows when each waiting record is due and when each retried record was re-emitted.
    """

    __slots__ = ("_due", "_reemitted", "_retry_heap", "_reemit_heap")

    def __init__(self) -> None:
        self._due: dict[int, float] = {}  # records waiting in the queue: when their retry is due
        self._reemitted: dict[int, float] = {}  # records back in flight after a retry: when (if timeouts are on)
        self._retry_heap: list[tuple[float, int]] = []  # (due, rank); stale unless the rank is in _due
        self._reemit_heap: list[tuple[float, int]] = []  # (re-emitted at, rank), for timeouts

    def __len__(self) -> int:
        """Records waiting in the queue."""
        return len(self._due)

    def __contains__(self, rank: object) -> bool:
        """Whether ``rank`` is waiting in the queue."""
        return rank in self._due

    # ------------------------------------------------------------------ the queue

    def schedule(self, rank: int, due: float) -> None:
        """Queue a failed record for its retry at ``due``. Called by the tracker when a record fails with retries
        left; it is no longer counted as re-emitted."""
        self._reemitted.pop(rank, None)
        self._due[rank] = due
        heap = self._retry_heap
        heappush(heap, (due, rank))
        if len(heap) > 2 * len(self._due) + HEAP_SLACK:
            waiting = self._due
            self._retry_heap = [e for e in heap if e[1] in waiting]
            heapify(self._retry_heap)

    def pop_due(self, now: float) -> int | None:
        """Take the record due soonest out of the queue if it is due (``due <= now``); ``None`` if none is.
        Called by the tracker's ``next_retry``."""
        heap = self._retry_heap
        if not self._prune_retry_heap() or heap[0][0] > now:
            return None
        rank = heappop(heap)[1]
        del self._due[rank]
        return rank

    def has_due(self, now: float) -> bool:
        """Whether :meth:`pop_due` would return a record at ``now``. Drops stale entries, changes nothing else."""
        return self._prune_retry_heap() and self._retry_heap[0][0] <= now

    def next_retry_at(self) -> float | None:
        """When the record due soonest is due; ``None`` if the queue is empty. Drops stale entries."""
        return self._retry_heap[0][0] if self._prune_retry_heap() else None

    def forget(self, rank: int) -> None:
        """A record that failed before is done or dead-lettered: drop it from the queue and from the re-emitted
        records (its heap entries go stale)."""
        self._due.pop(rank, None)
        self._reemitted.pop(rank, None)

    # ------------------------------------------------------------------ timeouts of re-emitted records

    def reemitted(self, rank: int, now: float) -> None:
        """A record taken from the queue is back in flight since ``now``: its message timeout runs from there.
        Called by the tracker's ``next_retry`` when timeouts are on."""
        self._reemitted[rank] = now
        heappush(self._reemit_heap, (now, rank))
        if len(self._reemit_heap) > 2 * len(self._reemitted) + HEAP_SLACK:
            self._reemit_heap = [e for e in self._reemit_heap if self._is_reemitted_at(e)]
            heapify(self._reemit_heap)

    def pop_timed_out(self, now: float, timeout: float) -> list[int]:
        """Take out the re-emitted records whose re-emission was at least ``timeout`` ago (``at + timeout <=
        now``), in heap order; they are no longer counted as re-emitted. Called by the tracker's ``expire``, which
        fails each."""
        heap, reemitted = self._reemit_heap, self._reemitted
        out: list[int] = []
        while heap:
            entry = heap[0]
            if not self._is_reemitted_at(entry):
                heappop(heap)
            elif entry[0] + timeout > now:
                break
            else:
                heappop(heap)
                del reemitted[entry[1]]
                out.append(entry[1])
        return out

    def next_reemission_at(self) -> float | None:
        """The re-emission time of the oldest retried record in flight; ``None`` if there is none. Drops stale
        entries."""
        heap = self._reemit_heap
        while heap and not self._is_reemitted_at(heap[0]):
            heappop(heap)
        return heap[0][0] if heap else None

    def shrink(self) -> None:
        """Rebuild the dicts sized for what they hold (a dict keeps the room of everything it ever held). Called
        by the tracker when it rebuilds its own dict of pending records."""
        self._due, self._reemitted = dict(self._due), dict(self._reemitted)

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
