"""The checkpoint writer: persists each shard's latest safe checkpoint off the caller's thread, coalesced."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
from kinesis_spout.checkpoint.throttle import CheckpointThrottle
from kinesis_spout.errors import CheckpointConflict, CheckpointError, SpoutError
from kinesis_spout.retry import Backoff, Outage, RetryPolicy

log = logging.getLogger(__name__)

#: Pause after a failed write before the next one: 0.1 s, doubling, at most 5 s; no limit of tries (nothing pending
#: is dropped for an outage: ``deadline_s`` only raises the alarm). No jitter: the workers whose writes failed in
#: the same ZooKeeper outage retry on the same schedule when it ends.
CHECKPOINT_WRITE_RETRY = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=5.0)

#: Called (on the writer's thread) when a write lost to a higher stored checkpoint.
ConflictHandler = Callable[[CheckpointConflict], None]
#: Called (on the writer's thread) for a shard offered with :meth:`CheckpointWriter.offer_latest`, when it is due.
LatestCheckpoint = Callable[[], "Checkpoint | None"]


class CheckpointWriter:
    """Writes offered checkpoints to a store on a background thread.

    Who calls: the spout offers a shard's safe checkpoint whenever it advances (``offer`` or ``offer_latest``,
    which never block); the thread writes the latest offered value of a shard at most once per ``interval_s`` (0 =
    every advance, as fast as the store allows), so the newest value reaches the store within ``interval_s`` of its
    offer even when nothing else happens. ``flush`` writes everything pending now; ``flush_shard`` writes one
    shard's pending value now and waits for that shard alone (a hand-over: other shards keep their interval);
    ``close`` flushes and joins (idempotent). Everything below (``_pending``, ``_failed``, ``_throttle``, the
    flush and busy flags) is guarded by ``_cond``'s lock, except the counters and ``written``, which only the
    writer's thread changes.

    Trouble: a conflict (someone stored a higher checkpoint) is counted, logged, passed to ``on_conflict`` and the
    value dropped. While the store says it is disconnected (ZooKeeper SUSPENDED or LOST) writes wait; other store
    errors keep the value pending and are retried after ``retry``'s delays (:data:`CHECKPOINT_WRITE_RETRY`; the
    writer's thread sleeps them with ``sleep``). A value whose write failed is remembered until a
    write of its shard succeeds (or conflicts): a callable offered later (``offer_latest``) that has nothing new
    cannot make the writer forget it, and a newer value supersedes it; until then the shard is not settled for
    ``flush`` and ``flush_shard``. Nothing pending is ever dropped for an outage: if
    the store stays unusable for ``deadline_s``, or refuses a write with an error that is not retriable (an ACL
    that refuses this identity), ``unreachable`` holds a ``CheckpointError`` (the spout raises it) until a write
    succeeds again. After a lost session the writer re-reads the stored checkpoints and reports any
    that another writer moved past ours.
    """

    def __init__(self, store: CheckpointStore, interval_s: float, owner: str, *, deadline_s: float = 60.0,
                 on_conflict: ConflictHandler | None = None, retry: RetryPolicy = CHECKPOINT_WRITE_RETRY,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.store = store
        self.owner = owner
        self.deadline_s = deadline_s
        self.on_conflict = on_conflict
        self._backoff = Backoff(retry)  # the writer's thread alone uses it
        self._sleep = sleep
        self._pending: dict[str, Checkpoint | LatestCheckpoint] = {}
        self._failed: dict[str, Checkpoint] = {}  # per shard, the newest value whose write failed, until one lands
        self._throttle = CheckpointThrottle(interval_s)  # when each shard may be written next
        self._cond = threading.Condition()
        self._stop = False
        self._busy = False
        self._writing: str | None = None  # the shard whose value the thread took and is writing (or looking at)
        self._thread: threading.Thread | None = None
        self._outage = Outage(deadline_s)  # how long writes have kept failing (the writer's thread)
        self._waited_for_connection = False
        self._flushing = 0  # flush() calls under way: every pending shard is due at once
        self._urgent: dict[str, int] = {}  # flush_shard() calls under way, per shard: that shard is due at once
        self.writes = 0
        self.conflicts = 0
        self.failures = 0
        self.last_error: SpoutError | None = None
        self.unreachable: CheckpointError | None = None
        self.written: dict[str, Checkpoint] = {}

    @property
    def interval_s(self) -> float:
        """The least time between two writes of a shard (0: every advance)."""
        return self._throttle.interval_s

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kinesis-checkpoint-writer", daemon=True)
            self._thread.start()

    def offer(self, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` when its shard is due (it replaces any value of the shard still pending)."""
        with self._cond:
            newly = checkpoint.shard_id not in self._pending
            self._pending[checkpoint.shard_id] = checkpoint
            if newly:  # a shard already pending has its due time; the thread need not wake for a newer value
                self._cond.notify_all()

    def offer_latest(self, shard_id: str, latest: LatestCheckpoint) -> None:
        """Like :meth:`offer`, but the value is made when the shard is due: the writer's thread calls ``latest()``
        (without holding the writer's lock) right before the write, and writes what it returns: the shard's newest
        checkpoint, or None when there is nothing new. For a caller whose checkpoint moves far more often than it
        is written (the spout: on almost every ack): an offer is then a dict look-up, with no checkpoint built.
        ``latest`` must return every change since its last call, shard ends included (it replaces a value
        still pending)."""
        with self._cond:
            pending = self._pending.get(shard_id)
            if pending is latest:
                return
            self._pending[shard_id] = latest
            if pending is None:
                self._cond.notify_all()

    def _due(self, now: float) -> tuple[str | None, float]:
        """The shard to write now, or how long until one is due."""
        wait = 3600.0
        if self._flushing and self._pending:
            return next(iter(self._pending)), 0.0
        for shard_id in self._urgent:
            if shard_id in self._pending:
                return shard_id, 0.0
        for shard_id in self._pending:
            left = self._throttle.wait_s(shard_id, now)
            if left <= 0:
                return shard_id, 0.0
            wait = min(wait, left)
        return None, wait

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stop and not self._pending:
                        return
                    shard_id, wait = self._due(time.monotonic())
                    if shard_id is not None or (self._stop and self._pending):
                        shard_id = shard_id or next(iter(self._pending))
                        offered = self._pending.pop(shard_id)
                        self._busy = True
                        self._writing = shard_id
                        break
                    self._cond.wait(wait)
            made = offered if isinstance(offered, Checkpoint) else self._latest(shard_id, offered)
            with self._cond:
                checkpoint = _newest(self._failed.get(shard_id), made)
            if checkpoint is None:  # nothing new since the last value: the shard was looked at, as good as written
                with self._cond:
                    self._throttle.wrote(shard_id, time.monotonic())
                    self._busy = False
                    self._writing = None
                    self._cond.notify_all()
                continue
            ok = self._wait_for_store() and self._write(checkpoint)
            with self._cond:  # a failed value is pending again before anyone sees the shard not being written
                self._busy = False
                self._writing = None
                if ok:  # stored, or someone stored a higher one (a conflict): nothing left to retry
                    self._failed.pop(shard_id, None)
                else:
                    self._failed[shard_id] = checkpoint
                    self._pending.setdefault(shard_id, checkpoint)
                self._cond.notify_all()
            if ok:
                self._backoff.reset()
                continue
            self._check_deadline()
            if self._waited_for_connection:
                continue  # the wait for the connection was the pause
            if self._stop:
                with self._cond:  # closing and the store is failing: give up, the error is kept
                    self._pending.clear()
                    self._failed.clear()
                return
            self._sleep(self._backoff.next_delay())

    def _latest(self, shard_id: str, latest: LatestCheckpoint) -> Checkpoint | None:
        try:
            return latest()
        except Exception:  # noqa: BLE001 - a caller's bug must not stop the other shards' checkpoints
            log.exception("could not get the latest checkpoint of %s", shard_id)
            return None

    def _wait_for_store(self) -> bool:
        """Wait (in short slices, so close() is not held up) while the store reports a lost connection; after a
        lost session, re-read the stored checkpoints first. False when the store is still down."""
        self._waited_for_connection = False
        wait_connected = getattr(self.store, "wait_connected", None)
        if wait_connected is not None and not wait_connected(0.0):
            self._outage.start()
            if not wait_connected(0.5 if self._stop else 2.0):
                self._waited_for_connection = not self._stop
                self.failures += 1
                return False
        take_lost = getattr(self.store, "take_session_lost", None)
        if take_lost is not None and take_lost():
            self._resync()
        return True

    def _resync(self) -> None:
        """After a lost session: re-read the store and report shards another writer moved past our writes."""
        try:
            stored = self.store.list()
        except SpoutError as exc:
            log.warning("could not re-read checkpoints after the ZooKeeper session was lost: %s", exc)
            return
        log.info("ZooKeeper session re-established; re-read %d stored checkpoints", len(stored))
        for shard_id, mine in list(self.written.items()):
            theirs = stored.get(shard_id)
            if theirs is not None and mine.is_behind(theirs) and theirs.owner != self.owner:
                self._conflict(CheckpointConflict(
                    f"checkpoint of {shard_id} was moved to {theirs.sequence_number} by {theirs.owner or 'unknown'} "
                    f"while our ZooKeeper session was lost (we had written {mine.sequence_number}); is another "
                    f"worker reading this shard?"))

    def _check_deadline(self) -> None:
        elapsed = self._outage.failed()
        if elapsed is not None and self.unreachable is None:
            cause = f": {self.last_error}" if self.last_error else ""
            self.unreachable = CheckpointError(
                f"checkpoints could not be written for {elapsed:.0f} s (deadline {self.deadline_s:g} s){cause}. "
                f"Nothing is lost: the newest checkpoints stay pending and are written when the store is back; "
                f"records since the last stored checkpoint are replayed after a restart. Check that ZooKeeper is "
                f"running and reachable, or raise zookeeper_deadline_s", retriable=True)
            log.error("%s", self.unreachable)

    def _conflict(self, exc: CheckpointConflict) -> None:
        self.conflicts += 1
        self.last_error = exc
        log.warning("checkpoint conflict: %s", exc)
        if self.on_conflict is not None:
            try:
                self.on_conflict(exc)
            except Exception:  # noqa: BLE001 - a handler's bug must not stop checkpointing
                log.exception("checkpoint conflict handler raised")

    def _write(self, checkpoint: Checkpoint) -> bool:
        try:
            self.store.save(checkpoint.stamped(self.owner))
        except CheckpointConflict as exc:
            self._conflict(exc)
            self._recovered()
            return True
        except SpoutError as exc:
            self.failures += 1
            self.last_error = exc
            if not exc.retriable:  # no point waiting for the deadline: the spout raises it at once
                if self.unreachable is None:
                    self.unreachable = CheckpointError(
                        f"checkpoint write of {checkpoint.shard_id} refused, and trying again cannot help: {exc}. "
                        f"Nothing is lost: the newest checkpoints stay pending and are tried again; records since "
                        f"the last stored checkpoint are replayed after a restart")
                log.error("checkpoint write of %s failed: %s", checkpoint.shard_id, exc)
            else:
                log.warning("checkpoint write of %s failed (will retry): %s", checkpoint.shard_id, exc)
            return False
        self._throttle.wrote(checkpoint.shard_id, time.monotonic())
        self.written[checkpoint.shard_id] = checkpoint
        self.writes += 1
        self._recovered()
        return True

    def _recovered(self) -> None:
        self._outage.recovered()
        if self.unreachable is not None:
            log.info("checkpoints are being written again")
        self.unreachable = None

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Write everything pending now; returns False if it was not all written within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._flushing += 1  # also a value offered while a write is under way is written at once
            self._cond.notify_all()
            try:
                while self._pending or self._failed or self._busy:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._thread is None:
                        return False
                    self._cond.wait(left)
            finally:
                self._flushing -= 1
        return True

    def flush_shard(self, shard_id: str, timeout_s: float = 10.0) -> bool:
        """Write ``shard_id``'s pending value now (other shards keep their interval) and wait, up to ``timeout_s``,
        until the shard has nothing pending and nothing being written. True then: its last value was stored, or
        found nothing new to write, or was dropped as a conflict (someone stored a higher checkpoint, or the
        shard's lease was lost: ``on_conflict`` heard of it); a failed write stays pending, so it is False until a
        retry succeeds. Who calls: the spout's hand-over, on the shard sync thread, holding none of the spout's
        locks (the writer's thread takes the spout's lock to make a value: see :meth:`offer_latest`)."""
        return shard_id in self.flush_shards([shard_id], timeout_s)

    def flush_shards(self, shard_ids: list[str], timeout_s: float = 10.0) -> set[str]:
        """:meth:`flush_shard` for several shards at once, within one ``timeout_s``: all are due now, written one
        after another by the writer's thread; returns those that ended with nothing pending and nothing being
        written (their last value stored, nothing new, or a conflict)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            for shard_id in shard_ids:
                self._urgent[shard_id] = self._urgent.get(shard_id, 0) + 1
            self._cond.notify_all()
            try:
                while True:
                    busy = [s for s in shard_ids if s in self._pending or s in self._failed or self._writing == s]
                    left = deadline - time.monotonic()
                    if not busy or left <= 0 or self._thread is None:
                        return set(shard_ids) - set(busy)
                    self._cond.wait(left)
            finally:
                for shard_id in shard_ids:
                    if self._urgent[shard_id] == 1:
                        del self._urgent[shard_id]
                    else:
                        self._urgent[shard_id] -= 1

    def close(self, timeout_s: float = 10.0) -> None:
        if self._thread is None:
            return
        self.flush(timeout_s)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        thread.join(timeout_s)


def _newest(failed: Checkpoint | None, made: Checkpoint | None) -> Checkpoint | None:
    """What the writer's thread writes for a shard: the value just made (offered, or returned by a callable), or
    the value whose write failed when nothing new was made or the new one would move it backwards (checkpoints
    only move forward, so a newer value supersedes the failed one)."""
    if failed is None or made is None:
        return made if made is not None else failed
    return failed if made.is_behind(failed) else made
