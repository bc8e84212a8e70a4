"""ReaderPool: a few threads poll many shard readers, each at its own pace.

A worker owning hundreds of shards should not run hundreds of threads, most of them asleep on idle shards. The
pool keeps one schedule of readers ordered by when each may poll next (at most 5 GetRecords calls a second per
shard, an idle shard once per ``empty_record_backoff_s``, a throttled one after its backoff). A pool thread takes
the reader that is due first, makes its one call, and puts it back with its next due time. Nobody sleeps on an
idle shard: a thread with nothing due waits on the schedule until the next due time or until a reader is added.

A reader whose buffer is full is parked (out of the schedule, using no thread) until its consumer takes records
and wakes it. Threads start as readers arrive, up to ``threads``; they are daemons.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Protocol

log = logging.getLogger(__name__)

#: What a reader's ``poll()`` returns to be parked until :meth:`ReaderPool.wake` (its buffer is full).
PARK = -1.0


class Pollable(Protocol):
    """What the pool drives (a :class:`~kinesis_spout.kinesis.retrieval.reader.BufferedShardReader`)."""

    shard_id: str
    parked: bool

    def poll(self) -> float | None:
        """Make at most one call; return the monotonic time of the next one, ``PARK``, or None when done."""

    def has_room(self) -> bool:
        """True when the buffer can take more records."""


class ReaderPool:
    """Polls shard readers on at most ``threads`` threads (see the module docstring).

    Thread-safety: the schedule, the thread list, the timer and every reader's ``parked`` flag are guarded by
    ``_cond``. A reader is in the schedule at most once and is taken out before it is polled, so one reader is never
    polled by two threads at once. ``close()`` stops the threads (after their current call) and is idempotent.
    """

    def __init__(self, threads: int = 8, name: str = "kinesis-readers") -> None:
        if threads < 1:
            raise ValueError(f"a reader pool needs at least one thread, got {threads}")
        self.size = threads
        self.name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Pollable]] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._readers = 0  # readers added and not finished: no more threads than this
        self._idle = 0  # threads waiting for a due reader
        self._closed = False
        self._timer: object | None = None  # the token of the thread waiting for the first reader's due time
        self._timer_due = 0.0  # that time
        self.polls = 0  # poll() calls made
        self.wakeups = 0  # times an idle thread woke up (for a due reader, a notification or a timeout)
        self.parks = 0  # times a reader was parked with a full buffer

    @property
    def threads(self) -> int:
        """Threads started so far (at most ``size``)."""
        return len(self._threads)

    def add(self, reader: Pollable) -> None:
        """Schedule a reader's first poll now."""
        with self._cond:
            if self._closed:
                return
            self._readers += 1
            self._push(reader, 0.0)
            if self._idle == 0 and len(self._threads) < min(self.size, self._readers):
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()

    def wake(self, reader: Pollable) -> None:
        """A parked reader has room again: schedule it now (nothing happens if it is not parked)."""
        with self._cond:
            if reader.parked and not self._closed:
                reader.parked = False
                self._push(reader, 0.0)

    def _push(self, reader: Pollable, due: float) -> None:  # _cond held
        heapq.heappush(self._heap, (due, next(self._seq), reader))
        if self._timer is None or due < self._timer_due:  # nobody waits for it: wake a thread to take it or time it
            self._cond.notify()

    def _next(self) -> Pollable | None:
        """Wait for the reader due first; None once the pool is closed.

        One idle thread (the *timer*) waits until the first reader is due; the others wait without a timeout until
        they are notified, so a pool at rest wakes about two threads per poll, not all of them. Whoever takes a
        due reader wakes another thread to time the next one; a reader pushed ahead of the timer's time wakes one.
        """
        with self._cond:
            while not self._closed:
                wait: float | None = None
                mine: object | None = None
                if self._heap:
                    due = self._heap[0][0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        reader = heapq.heappop(self._heap)[2]
                        if self._heap and self._timer is None:
                            self._cond.notify()  # someone must time the next reader
                        return reader
                    if self._timer is None or due < self._timer_due:
                        mine = self._timer = object()
                        self._timer_due = due
                    else:
                        wait = None  # the timer waits for an earlier or the same time
                self._idle += 1
                try:
                    self._cond.wait(wait)
                finally:
                    self._idle -= 1
                    self.wakeups += 1
                    if mine is not None and self._timer is mine:
                        self._timer = None
            return None

    def _work(self) -> None:
        while True:
            reader = self._next()
            if reader is None:
                return
            try:
                due = reader.poll()
            except BaseException:  # noqa: BLE001 - poll() keeps its own errors; this is a bug: stop the reader
                log.exception("reader of %s failed inside the pool", reader.shard_id)
                due = None
            with self._cond:
                self.polls += 1
                if due is None:
                    self._readers -= 1
                elif due == PARK:
                    self.parks += 1
                    reader.parked = True  # before the room check: a take() after it sees the flag and wakes it
                    if reader.has_room():
                        reader.parked = False
                        self._push(reader, 0.0)
                else:
                    self._push(reader, due)

    def close(self, timeout_s: float = 35.0) -> None:
        """Stop the threads once their current call returns (waits up to ``timeout_s`` in all)."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
