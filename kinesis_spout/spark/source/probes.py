"""Probes of shards at their tip for ``readMode=executors``, made off the planning path, each on its shard's schedule.

A shard whose last task reached its tip gets a task again only once a ``GetRecords(Limit=1)`` after its end (a
*probe*) saw something new. :class:`ProbeSchedule` is the pure part: when each shard is due (a shard just moved by
a batch at once; an idle one after its idle backoff, doubling up to ``max_empty_record_backoff_s``), what each probe
saw. :class:`ShardProber` makes the due probes on a few threads of the driver, so a batch's planning reads the
schedule instead of probing every idle shard one by one: its cost no longer grows with the idle shards, and an
idle shard is still probed at least every ``max_empty_record_backoff_s`` (plus a probe's round trip).

Who calls: :class:`~kinesis_spout.spark.source.executor_planner.ExecutorPlanner`, from Spark's planning thread.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Collection, Generic, Mapping, TypeVar

from kinesis_spout.positions import Position
from kinesis_spout.retry import Backoff

__all__ = ["BUSY_STREAK", "PROBE_ERROR", "PROBE_FOUND", "PROBE_IDLE", "PROBE_PASSED", "PROBE_THREADS", "ProbeSchedule",
           "ReadStreaks", "ShardProber", "Sighting"]

log = logging.getLogger(__name__)

#: What a probe saw: a record to read (or the shard's end); only records whose user records were all dropped;
#: nothing; a retriable error (tried again after ``retry_s``, the shard counts as probed and idle meanwhile).
PROBE_FOUND, PROBE_PASSED, PROBE_IDLE, PROBE_ERROR = "found", "passed", "idle", "error"
#: Probes in flight at most (each a GetRecords call on the driver's Kinesis client).
PROBE_THREADS = 16

#: A shard whose tasks read records in this many batches in a row is read on without a probe (known busy).
BUSY_STREAK = 2

G = TypeVar("G")


class ReadStreaks:
    """In how many batches in a row each shard's task read records (pure). A shard is *known busy* after
    ``BUSY_STREAK`` of them up to the last completed batch: records keep coming, so the next batch reads it without
    waiting for a probe; a batch in which it had no task, or its task read nothing, ends the streak (it is probed
    again), so a shard going quiet costs one task that reads nothing, and a shard that gets a record now and then
    none. Who calls: the planner, once or more per completed batch (idempotent)."""

    def __init__(self) -> None:
        self._streaks: dict[str, tuple[int, int]] = {}  # shard -> (the last batch its task read records in, streak)

    def batch_read(self, batch: int, read: set[str]) -> None:
        """Batch ``batch`` completed; its tasks read records in ``read``'s shards."""
        for shard_id in read:
            last, streak = self._streaks.get(shard_id, (None, 0))
            if last != batch:
                self._streaks[shard_id] = (batch, streak + 1 if last == batch - 1 else 1)
        for shard_id in [s for s, (last, _) in self._streaks.items() if last < batch and s not in read]:
            del self._streaks[shard_id]

    def known_busy(self, shard_id: str, batch: int) -> bool:
        """Whether ``shard_id``'s tasks read records in the last ``BUSY_STREAK`` batches up to ``batch``."""
        last, streak = self._streaks.get(shard_id, (None, 0))
        return last == batch and streak >= BUSY_STREAK


@dataclass
class _Shard(Generic[G]):
    """One tracked shard: where its probes start, what reads it (opaque here), when it is due, what was seen."""

    position: Position
    getter: G
    backoff: Backoff
    due: float
    seen: str | None = None  # the last probe's outcome at this position; None: not probed at it yet
    flying: bool = False


@dataclass(frozen=True)
class Sighting:
    """What the probes know now of the tracked shards: something new (``found``), dropped user records only in the
    last probe (``passing``), nothing yet in the last probe (``idle``), not probed at their position yet
    (``unprobed``; probes in flight included)."""

    found: frozenset[str]
    passing: frozenset[str]
    idle: frozenset[str]
    unprobed: frozenset[str]


class ProbeSchedule(Generic[G]):
    """When each tracked shard is probed next, and what its probes saw (pure: no I/O, no thread, no clock).

    A shard tracked at a new position is due at once and starts its idle pauses again; a probe that saw nothing
    makes it due after the next pause of its backoff (``backoff()`` makes one per shard and position); one that
    passed dropped user records, or failed, after ``retry_s``; one that found something is not probed again at that
    position (the next batch reads it). Not thread-safe: :class:`ShardProber` calls it under its lock.
    """

    def __init__(self, backoff: Callable[[], Backoff], retry_s: float) -> None:
        self.backoff = backoff
        self.retry_s = retry_s
        self._shards: dict[str, _Shard[G]] = {}

    def track(self, positions: Mapping[str, Position], getter: Callable[[str, Position], G], now: float,
              renew: Collection[str] = ()) -> None:
        """Probe exactly ``positions``' shards from now on, each after its position: a shard new to the schedule, at
        another position than before, or in ``renew`` (a batch's task read it, maybe finding nothing where a probe
        found something) is due at ``now`` with a fresh ``getter(shard, position)``; the others keep their
        schedule; shards left out are forgotten (a probe of theirs in flight is ignored when done)."""
        for shard_id in [s for s in self._shards if s not in positions]:
            del self._shards[shard_id]
        for shard_id, position in positions.items():
            known = self._shards.get(shard_id)
            if known is None or known.position != position or shard_id in renew:
                self._shards[shard_id] = _Shard(position, getter(shard_id, position), self.backoff(), now)

    def take_due(self, now: float, most: int) -> list[tuple[str, Position, G]]:
        """Up to ``most`` shards due at ``now`` with no probe in flight and nothing found yet, marked in flight: the
        caller probes each and calls :meth:`done`. Shards not probed at their position yet come first (a batch's
        planning waits for them), then the others, earliest due first."""
        due = sorted((s.seen is not None, s.due, shard_id) for shard_id, s in self._shards.items()
                     if not s.flying and s.seen != PROBE_FOUND and s.due <= now)
        out = []
        for _, _, shard_id in due[:max(0, most)]:
            shard = self._shards[shard_id]
            shard.flying = True
            out.append((shard_id, shard.position, shard.getter))
        return out

    def done(self, shard_id: str, position: Position, seen: str, now: float) -> None:
        """A probe of ``shard_id`` after ``position`` saw ``seen`` (a ``PROBE_*``) at ``now``; ignored when the shard
        was forgotten or moved meanwhile."""
        shard = self._shards.get(shard_id)
        if shard is None or shard.position != position:
            return
        shard.flying = False
        shard.seen = seen
        if seen == PROBE_IDLE:
            shard.due = now + shard.backoff.next_delay()
        elif seen == PROBE_PASSED:
            shard.backoff.reset()
            shard.due = now + self.retry_s
        elif seen == PROBE_ERROR:
            shard.due = now + self.retry_s

    def next_due(self) -> float | None:
        """When the next probe is due (None: none is to be made: nothing tracked, all in flight or found)."""
        return min((s.due for s in self._shards.values() if not s.flying and s.seen != PROBE_FOUND), default=None)

    def in_flight(self) -> int:
        """Probes taken and not done."""
        return sum(1 for s in self._shards.values() if s.flying)

    def sighting(self) -> Sighting:
        """What the probes saw so far (see :class:`Sighting`)."""
        by: dict[str | None, set[str]] = {}
        for shard_id, shard in self._shards.items():
            by.setdefault(shard.seen, set()).add(shard_id)
        return Sighting(frozenset(by.get(PROBE_FOUND, ())), frozenset(by.get(PROBE_PASSED, ())),
                        frozenset(by.get(PROBE_IDLE, set()) | by.get(PROBE_ERROR, set())),
                        frozenset(by.get(None, ())))


class ShardProber(Generic[G]):
    """Makes a :class:`ProbeSchedule`'s probes when due, on up to ``threads`` threads of its own.

    ``probe(shard, position, getter)`` makes one probe and returns a ``PROBE_*``; it raises only what must stop the
    query (the first such error is raised to the planning thread by :meth:`wait`). The threads start with the first
    :meth:`track` and stop at :meth:`close` (idempotent). Who calls: the planner, from Spark's planning thread; the
    schedule is shared with the probe threads under one condition variable.
    """

    def __init__(self, schedule: ProbeSchedule[G], probe: Callable[[str, Position, G], str],
                 threads: int = PROBE_THREADS, clock: Callable[[], float] = time.monotonic) -> None:
        self.schedule = schedule
        self.probe = probe
        self.threads = max(1, threads)
        self.clock = clock
        self._cond = threading.Condition()
        self._failure: BaseException | None = None  # under _cond
        self._closed = False  # under _cond
        self._pool: ThreadPoolExecutor | None = None
        self._loop: threading.Thread | None = None

    def track(self, positions: Mapping[str, Position], getter: Callable[[str, Position], G],
              renew: Collection[str] = ()) -> None:
        """Probe ``positions``' shards from now on (see :meth:`ProbeSchedule.track`); starts the threads."""
        with self._cond:
            self.schedule.track(positions, getter, self.clock(), renew)
            if self._loop is None and positions and not self._closed:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="kinesis-spout-probe")
                self._loop = threading.Thread(target=self._run, name="kinesis-spout-probes", daemon=True)
                self._loop.start()
            self._cond.notify_all()

    def wait(self, done: Callable[[Sighting], bool], timeout_s: float) -> Sighting:
        """What the probes saw, once ``done(sighting)`` holds or after ``timeout_s``; raises the error a probe
        failed with."""
        deadline = self.clock() + timeout_s
        with self._cond:
            while True:
                if self._failure is not None:
                    failure, self._failure = self._failure, None
                    raise failure
                seen = self.schedule.sighting()
                left = deadline - self.clock()
                if done(seen) or left <= 0:
                    return seen
                self._cond.wait(left)

    def close(self) -> None:
        """Stop the threads (a probe in flight finishes first) and forget the schedule. Idempotent; a later
        :meth:`track` starts them again."""
        with self._cond:
            self._closed = True
            self.schedule.track({}, lambda s, p: None, self.clock())  # type: ignore[arg-type,return-value]
            self._cond.notify_all()
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.join(10)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        with self._cond:
            self._closed = False
            self._failure = None

    def _run(self) -> None:
        """The scheduling thread: hands the due probes to the pool, never more than ``threads`` at once."""
        pool = self._pool
        assert pool is not None
        with self._cond:
            while not self._closed:
                now = self.clock()
                for shard_id, position, getter in self.schedule.take_due(now, self.threads - self.schedule.in_flight()):
                    pool.submit(self._one, shard_id, position, getter)
                wake = self.schedule.next_due()
                full = self.schedule.in_flight() >= self.threads
                self._cond.wait(None if wake is None or full else max(0.0, wake - self.clock()))

    def _one(self, shard_id: str, position: Position, getter: G) -> None:
        """One probe, on a pool thread; its outcome goes to the schedule."""
        try:
            seen = self.probe(shard_id, position, getter)
        except BaseException as exc:  # noqa: BLE001 - handed to the planning thread, which raises it
            log.debug("probing %s failed: %s", shard_id, exc)
            with self._cond:
                if self._failure is None:
                    self._failure = exc
                self.schedule.done(shard_id, position, PROBE_ERROR, self.clock())
                self._cond.notify_all()
            return
        with self._cond:
            self.schedule.done(shard_id, position, seen, self.clock())
            self._cond.notify_all()
