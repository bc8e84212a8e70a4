"""The dead-letter thread: writes dead letters off the spout's threads, retrying failed writes with backoff."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from typing import Callable, Sequence

from kinesis_spout.deadletters.base import DeadLetter, DeadLetterError, DeadLetterWriter, HandlerWriter
from kinesis_spout.deadletters.local import LocalDeadLetterWriter
from kinesis_spout.errors import DeadLetterStormError
from kinesis_spout.retry import Backoff, Outage, RetryPolicy

log = logging.getLogger(__name__)

__all__ = ["DEAD_LETTER_BACKOFF", "DeadLetterWorker", "describe_writer", "written_before"]

#: Backoff between failed writes of the same dead letters: 0.1 s, doubling, at most 5 s; no limit of tries (letters
#: are never dropped). No jitter: spouts whose writes failed in the same outage of the destination retry together.
DEAD_LETTER_BACKOFF = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=5.0)
#: The longest a held letter waits for its run of dead letters to end before it is written anyway, by default.
DEFAULT_HOLD_S = 1.0
#: Dead letters handed to one ``write`` call at most.
MAX_LETTERS_PER_WRITE = 500


#: The longest reason quoted in a log line, and how many reasons a summary names.
MAX_REASON_CHARS = 120
SUMMARY_REASONS = 3


def describe_writer(writer: DeadLetterWriter) -> str:
    """Where a writer puts its letters, for a log line: the handler's name, the file or the stream."""
    if isinstance(writer, HandlerWriter):
        name = getattr(writer.handler, "__qualname__", None) or type(writer.handler).__name__
        return f"the dead-letter handler {name}"
    path = getattr(writer, "path", None)
    if path:
        return str(path)
    stream = getattr(writer, "stream_name", None)
    if stream:
        return f"the Kinesis stream {stream!r}"
    return type(writer).__name__


def written_before(writer: DeadLetterWriter | None, *, under_way: bool = False) -> str:
    """Where the letters written so far are, for a message about a stop (a storm): the file, the stream or the
    handler; for a file not created yet (no letter written, and none queued or being written: ``under_way`` False),
    that none was, and the file they go to; for a local writer fallen back to the log, the log. Who calls: the
    spout's storm message."""
    if writer is None:
        return "letters written before went to the dead-letter destination"
    path = getattr(writer, "path", None)
    if path and getattr(writer, "falls_back", False):
        return f"letters written before are in this process's log at ERROR ({path} could not be created)"
    if path and not under_way and not os.path.exists(path):
        return f"no dead letter was written before the storm (they go to {path}, not created yet)"
    where = describe_writer(writer)
    return (f"letters written before went to {where}" if isinstance(writer, HandlerWriter) else
            f"letters written before are in {where}")


def written_summary(letters: Sequence[DeadLetter], where: str) -> str:
    """One line for a batch of letters written: how many, to where, from how many shards, and their reasons
    grouped (the :data:`SUMMARY_REASONS` most frequent, with their counts)."""
    reasons = Counter(letter.reason[:MAX_REASON_CHARS] for letter in letters)
    shards = len({letter.record.shard_id for letter in letters})
    named = reasons.most_common(SUMMARY_REASONS)
    why = ", ".join(f"{n} {reason}" for reason, n in named)
    rest = len(reasons) - len(named)
    if rest:
        why += f"; {sum(reasons.values()) - sum(n for _r, n in named)} more with {rest} other reasons"
    return (f"{len(letters)} dead letter{'s' if len(letters) != 1 else ''} written to {where} ({why}) from "
            f"{shards} shard{'s' if shards != 1 else ''}; each one is logged at DEBUG")


class DeadLetterWorker:
    """Writes queued dead letters on a named daemon thread and reports each one written.

    Who calls: the spout ``put``s letters (under its own lock: ``put`` only appends under the worker's lock and
    never blocks); the thread calls ``writer.write`` and then ``on_written(letters)`` with no lock of the worker
    held (the spout takes its lock there and marks the records done). The constructor does no I/O; ``start()``
    starts the thread; ``close()`` writes what it can within its time-out, closes the writer, and is idempotent.

    Failed writes keep their letters queued, in order, and are retried after ``backoff``'s delays (any
    :class:`~kinesis_spout.retry.RetryPolicy`, a ``RetryBackoff`` too; :data:`DEAD_LETTER_BACKOFF` by default); each
    failure is logged and counted in ``failures``. Once writes have kept failing for ``deadline_s``,
    ``unreachable`` holds a :class:`DeadLetterError` (the spout raises it from ``next_batch``/``next_tuple``) until
    a write succeeds again. Nothing queued is ever dropped while the worker runs; what is still queued at close is
    not done, so its records are not checkpointed and are read again by the next run.

    Held letters (:meth:`hold`) wait apart, unwritten, until :meth:`release` queues them (or :meth:`flush` or
    :meth:`close` does, unless a storm stopped the spout), and at most ``hold_s`` after the first of them was held:
    the thread then queues them itself, so a run of dead letters that nothing ends (the last records of a quiet or
    closed shard) is written and settled within that bound. :meth:`stop_for_storm` drops the letters still held
    unwritten (their records stay pending, so their checkpoints never pass them) and makes ``unreachable`` the
    storm's error for good.

    State shared with other threads (``_queue``, ``_held``, ``_held_since``, ``_busy``, ``_stop``) is touched only
    under ``_cond``;
    the counters and the write error behind ``unreachable`` are written by the thread alone and read freely;
    ``storm`` is set once by the spout's caller thread; ``_backoff`` is the thread's alone.
    """

    def __init__(self, writer: DeadLetterWriter, on_written: Callable[[Sequence[DeadLetter]], None], *,
                 deadline_s: float, backoff: RetryPolicy = DEAD_LETTER_BACKOFF,
                 hold_s: float = DEFAULT_HOLD_S) -> None:
        self.writer = writer
        self.hold_s = hold_s
        self.on_written = on_written
        self.deadline_s = deadline_s
        self.backoff = backoff
        self._backoff = Backoff(backoff)
        self._cond = threading.Condition()
        self._queue: list[DeadLetter] = []
        self._held: list[DeadLetter] = []
        self._held_since: float | None = None  # monotonic time the oldest held letter was held at
        self._busy = False
        self._stop = False
        self._give_up_at: float | None = None  # set by close(): stop retrying after this moment
        self._thread: threading.Thread | None = None
        self._outage = Outage(deadline_s)  # how long writes have kept failing (the thread's)
        self.written = 0
        self.failures = 0
        self.last_error: BaseException | None = None
        self._unreachable: DeadLetterError | None = None
        self.storm: DeadLetterStormError | None = None

    @property
    def unreachable(self) -> DeadLetterError | None:
        """The error the spout raises from ``next_batch``/``next_tuple``: the storm that stopped it (for good), or
        the write error once writes kept failing for ``deadline_s`` (until a write succeeds), or None."""
        return self.storm or self._unreachable

    def start(self) -> None:
        if self._thread is None and not self._stop:
            self._thread = threading.Thread(target=self._run, name="kinesis-dead-letters", daemon=True)
            self._thread.start()

    def put(self, letters: Sequence[DeadLetter]) -> None:
        """Queue letters to write (any thread; never blocks)."""
        if not letters:
            return
        with self._cond:
            self._queue.extend(letters)
            self._cond.notify_all()

    def hold(self, letters: Sequence[DeadLetter]) -> None:
        """Keep letters unwritten until :meth:`release` (any thread; never blocks). Nothing is held after a storm:
        the letters are dropped unwritten, their records stay pending."""
        if not letters:
            return
        with self._cond:
            if self.storm is None:
                if not self._held:
                    self._held_since = time.monotonic()
                    self._cond.notify_all()  # the thread's wait now ends at the hold's deadline
                self._held.extend(letters)

    def release(self) -> None:
        """Queue the held letters for writing, in order (any thread; never blocks)."""
        with self._cond:
            self._release_held()

    def _release_held(self) -> None:
        """Move the held letters to the queue, in order (``_cond`` held)."""
        self._held_since = None
        if self._held:
            self._queue.extend(self._held)
            self._held = []
            self._cond.notify_all()

    def _hold_left(self) -> float | None:
        """Seconds until the held letters are due to be written whatever their run does (``_cond`` held); None when
        nothing is held."""
        if self._held_since is None:
            return None
        return self._held_since + self.hold_s - time.monotonic()

    def stop_for_storm(self, error: DeadLetterStormError) -> list[DeadLetter]:
        """A storm stopped the spout: drop the held letters unwritten (their records stay pending and hold their
        shards' checkpoints) and raise ``error`` from every later ``next_batch``/``next_tuple``. Letters already
        queued are still written. Returns the letters dropped. Called once, by the spout's dead-letter glue."""
        with self._cond:
            dropped, self._held = self._held, []
            self._held_since = None
            self.storm = error
            return dropped

    @property
    def pending(self) -> int:
        """Letters queued or being written."""
        with self._cond:
            return len(self._queue)

    def flush(self, timeout_s: float) -> bool:
        """Release the held letters (a flush ends a run of dead letters: the caller wants its checkpoints), then
        wait up to ``timeout_s`` until every queued letter is written; True when none is left."""
        deadline = time.monotonic() + timeout_s
        self.release()
        with self._cond:
            while self._queue:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return False
                self._cond.wait(left)
            return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, trying for at most ``timeout_s``, then stop the thread and close the writer.
        Letters still queued are left undone (logged). Idempotent."""
        with self._cond:
            if self._stop and self._thread is None:
                return
            self._release_held()  # no storm: a run of dead letters that did not trip a rule is written as usual
            self._stop = True
            self._give_up_at = time.monotonic() + timeout_s
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s + 5.0)
        with self._cond:
            left = len(self._queue)
        if left:
            log.error("%d dead letters could not be written before close (%s); their records are not checkpointed "
                      "and are read again by the next run", left, self.last_error)
        try:
            self.writer.close()
        except Exception as exc:  # noqa: BLE001 - closing must go on; the letters written are already durable
            log.warning("closing the dead-letter writer failed: %s", exc)

    # -- the thread ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    left = self._hold_left()
                    if left is not None and left <= 0:
                        self._release_held()  # a run of dead letters went on unended for hold_s: write it now
                    if self._queue or self._stop:
                        break
                    self._cond.wait(left)
                if not self._queue or self._gave_up():
                    return
                batch = self._queue[:MAX_LETTERS_PER_WRITE]
                self._busy = True
            written, error = self._write(batch)
            if written:
                self._log_written(written)
                try:
                    self.on_written(written)
                except Exception:  # noqa: BLE001 - a bug on the spout's side must not kill the thread
                    log.exception("marking %d dead letters done failed", len(written))
            with self._cond:
                done = {id(letter) for letter in written}
                self._queue = [letter for letter in self._queue if id(letter) not in done]
                self._busy = False
                self._cond.notify_all()
            self.written += len(written)
            if error is None:
                self._backoff.reset()
                if self._outage.recovered():
                    log.info("dead letters are written again")
                self._unreachable = None
                continue
            self._failed(error, len(batch) - len(written))
            delay = self._backoff.next_delay()
            with self._cond:
                if self._give_up_at is not None:
                    delay = min(delay, max(0.0, self._give_up_at - time.monotonic()))
                if not self._stop or self._give_up_at is not None:
                    self._cond.wait(delay)

    def _log_written(self, letters: Sequence[DeadLetter]) -> None:
        """Log a batch of letters written (the thread only): one DEBUG line per letter, and one WARNING for the batch
        (how many, their reasons, where they went), unless the writer logs its letters itself (the default
        :class:`~kinesis_spout.deadletters.local.LocalDeadLetterWriter` names its file and summarises)."""
        if log.isEnabledFor(logging.DEBUG):
            for letter in letters:
                log.debug("dead letter %s (attempt %d): %s", letter.record.message_id, letter.attempts,
                          letter.reason[:MAX_REASON_CHARS])
        if not isinstance(self.writer, LocalDeadLetterWriter):
            log.warning("%s", written_summary(letters, describe_writer(self.writer)))

    def _gave_up(self) -> bool:
        return self._give_up_at is not None and time.monotonic() >= self._give_up_at

    def _write(self, batch: list[DeadLetter]) -> tuple[Sequence[DeadLetter], BaseException | None]:
        """Write a batch; returns the letters written and the error (None when all were)."""
        try:
            self.writer.write(batch)
        except DeadLetterError as exc:
            ids = {id(letter) for letter in batch}
            return [letter for letter in exc.written if id(letter) in ids], exc
        except Exception as exc:  # noqa: BLE001 - any destination error: retried, never dropped
            return [], exc
        return batch, None

    def _failed(self, error: BaseException, left: int) -> None:
        self.failures += 1
        self.last_error = error
        log.warning("could not write %d dead letters (%s: %s); retrying, the shards' checkpoints wait for them",
                    left, type(error).__name__, error)
        elapsed = self._outage.failed()
        if elapsed is not None and self._unreachable is None:
            unreachable = DeadLetterError(
                f"dead letters could not be written for {elapsed:.0f} s "
                f"(dead_letter_deadline_s={self.deadline_s:g}): {type(error).__name__}: {error}. Nothing was "
                f"dropped: the records stay pending and their shards' checkpoints wait; check the dead-letter "
                f"destination. This error clears once a write succeeds")
            unreachable.__cause__ = error
            self._unreachable = unreachable
