"""The checkpoint writer: persists each shard's latest safe checkpoint off the caller's thread, coalesced."""

from __future__ import annotations

import logging
import threading
import time

from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
from kinesis_spout.errors import CheckpointConflict, SpoutError

log = logging.getLogger("kinesis_spout.checkpoint")


class CheckpointWriter:
    """Writes offered checkpoints to a store on a background thread.

    Who calls: the spout offers a shard's safe checkpoint whenever it advances (``offer`` never blocks); the
    thread writes the latest offered value of a shard at most once per ``interval_s`` (0 = every advance, as
    fast as the store allows), so the newest value reaches the store within ``interval_s`` of its offer even when
    nothing else happens. ``flush`` writes everything pending now; ``close`` flushes and joins (idempotent).
    A conflict (someone stored a higher checkpoint) is logged and counted; the value is dropped. Other store
    errors keep the value pending and are retried with backoff; the last one is kept in ``last_error``.
    """

    def __init__(self, store: CheckpointStore, interval_s: float, owner: str) -> None:
        self.store = store
        self.interval_s = interval_s
        self.owner = owner
        self._pending: dict[str, Checkpoint] = {}
        self._last_write: dict[str, float] = {}
        self._cond = threading.Condition()
        self._stop = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self.writes = 0
        self.conflicts = 0
        self.failures = 0
        self.last_error: SpoutError | None = None
        self.written: dict[str, Checkpoint] = {}

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kinesis-checkpoint-writer", daemon=True)
            self._thread.start()

    def offer(self, checkpoint: Checkpoint) -> None:
        with self._cond:
            self._pending[checkpoint.shard_id] = checkpoint
            self._cond.notify_all()

    def _due(self, now: float) -> tuple[str | None, float]:
        """The shard to write now, or how long until one is due."""
        wait = 3600.0
        for shard_id in self._pending:
            due = self._last_write.get(shard_id, -1e18) + self.interval_s
            if due <= now:
                return shard_id, 0.0
            wait = min(wait, due - now)
        return None, wait

    def _run(self) -> None:
        retry_delay = 0.1
        while True:
            with self._cond:
                while True:
                    if self._stop and not self._pending:
                        return
                    shard_id, wait = self._due(time.monotonic())
                    if shard_id is not None or (self._stop and self._pending):
                        shard_id = shard_id or next(iter(self._pending))
                        checkpoint = self._pending.pop(shard_id)
                        self._busy = True
                        break
                    self._cond.wait(wait)
            ok = self._write(checkpoint)
            with self._cond:
                self._busy = False
                if not ok:
                    self._pending.setdefault(shard_id, checkpoint)
                self._cond.notify_all()
            if ok:
                retry_delay = 0.1
            else:
                if self._stop:
                    with self._cond:  # closing and the store is failing: give up, the error is kept
                        self._pending.clear()
                    return
                time.sleep(retry_delay)
                retry_delay = min(retry_delay * 2, 5.0)

    def _write(self, checkpoint: Checkpoint) -> bool:
        try:
            self.store.save(checkpoint.stamped(self.owner))
        except CheckpointConflict as exc:
            self.conflicts += 1
            self.last_error = exc
            log.warning("checkpoint conflict: %s", exc)
            return True
        except SpoutError as exc:
            self.failures += 1
            self.last_error = exc
            log.warning("checkpoint write of %s failed (will retry): %s", checkpoint.shard_id, exc)
            return False
        self._last_write[checkpoint.shard_id] = time.monotonic()
        self.written[checkpoint.shard_id] = checkpoint
        self.writes += 1
        return True

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Write everything pending now; returns False if it was not all written within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            for shard_id in self._pending:
                self._last_write.pop(shard_id, None)
            self._cond.notify_all()
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        if self._thread is None:
            return
        self.flush(timeout_s)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        thread.join(timeout_s)
