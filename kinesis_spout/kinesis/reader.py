"""Buffered prefetching shard readers, and the round-robin reader across them.

Each owned shard has a :class:`BufferedShardReader`: a named daemon thread that calls GetRecords (at most 5 times a
second, as Kinesis allows), backs off with jitter when throttled, and fills a bounded buffer (records and bytes).
The :class:`RoundRobinReader` hands out buffered records shard by shard. Nobody sleeps on an idle shard: readers
signal one shared condition when data arrives, and the consumer waits on it with a deadline.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from typing import Callable, Iterable

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError, SpoutError
from kinesis_spout.kinesis.getter import ShardGetter
from kinesis_spout.records import Record

log = logging.getLogger("kinesis_spout.kinesis")


class Backoff:
    """Exponential backoff with full jitter for throttled or failing calls (pure; ``rng`` injectable)."""

    def __init__(self, initial_s: float = MIN_POLL_INTERVAL_S, max_s: float = 10.0,
                 rng: Callable[[], float] = random.random) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.rng = rng
        self.failures = 0

    def next_delay(self) -> float:
        """Delay before the next try after one more failure: uniform in [initial, min(max, initial * 2^n)]."""
        ceiling = min(self.max_s, self.initial_s * (2.0 ** self.failures))
        self.failures += 1
        return self.initial_s + (ceiling - self.initial_s) * self.rng()

    def reset(self) -> None:
        self.failures = 0


class BufferedShardReader:
    """Prefetches one shard into a bounded buffer on a background thread.

    Who calls: the round-robin reader (``take``), the spout (``start``/``close``). ``take`` returns buffered
    records without blocking; an error from the background thread is raised by ``take`` once the records read
    before it are handed out. ``close()`` stops and joins the thread and is idempotent.
    """

    def __init__(self, getter: ShardGetter, *, max_records: int, max_bytes: int, empty_backoff_s: float,
                 on_data: Callable[[], None], max_retries: int = 30) -> None:
        self.getter = getter
        self.shard_id = getter.shard_id
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.empty_backoff_s = max(empty_backoff_s, MIN_POLL_INTERVAL_S)
        self.max_retries = max_retries
        self._on_data = on_data
        self._buffer: deque[Record] = deque()
        self._bytes = 0
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.ended = False
        self.millis_behind_latest: int | None = None
        self.calls = 0
        self.retried_errors = 0  # throttles, 5xx, lost connections: retried after a backoff
        self.records_read = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"kinesis-reader-{self.shard_id}", daemon=True)
            self._thread.start()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def exhausted(self) -> bool:
        """True once the shard ended (or failed) and every buffered record was taken."""
        return (self.ended or self._error is not None) and not self._buffer

    def take(self, n: int) -> list[Record]:
        """Up to ``n`` buffered records, oldest first; never blocks on Kinesis."""
        with self._lock:
            if not self._buffer:
                if self._error is not None:
                    raise self._error
                return []
            out = [self._buffer.popleft() for _ in range(min(n, len(self._buffer)))]
            self._bytes -= sum(r.size for r in out)
            self._lock.notify_all()
        return out

    def take_one(self) -> Record | None:
        with self._lock:
            if not self._buffer:
                if self._error is not None:
                    raise self._error
                return None
            record = self._buffer.popleft()
            self._bytes -= record.size
            if len(self._buffer) < self.max_records // 2:
                self._lock.notify_all()
            return record

    def _has_room(self) -> bool:
        return len(self._buffer) < self.max_records and self._bytes < self.max_bytes

    def _run(self) -> None:
        backoff = Backoff()
        next_poll = 0.0
        try:
            while not self._stop.is_set():
                with self._lock:
                    while not self._has_room() and not self._stop.is_set():
                        self._lock.wait(0.5)
                delay = next_poll - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    break
                if self._stop.is_set():
                    break
                try:
                    self.calls += 1
                    result = self.getter.fetch()
                except KinesisError as exc:
                    if not exc.retriable or backoff.failures >= self.max_retries:
                        if exc.retriable:
                            exc = KinesisError(f"{exc} (gave up after {backoff.failures} retries)", code=exc.code)
                        raise exc
                    self.retried_errors += 1
                    pause = backoff.next_delay()
                    log.warning("%s; retrying %s in %.2f s", exc, self.shard_id, pause)
                    next_poll = time.monotonic() + pause
                    continue
                backoff.reset()
                self.millis_behind_latest = result.millis_behind_latest
                now = time.monotonic()
                next_poll = now + (MIN_POLL_INTERVAL_S if result.records else self.empty_backoff_s)
                if result.records:
                    size = sum(r.size for r in result.records)
                    with self._lock:
                        self._buffer.extend(result.records)
                        self._bytes += size
                    self.records_read += len(result.records)
                if result.shard_end:
                    self.ended = True
                    log.info("shard %s is closed and was read to its end", self.shard_id)
                if result.records or result.shard_end:
                    self._on_data()
                if result.shard_end:
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's next take()
            if not isinstance(exc, SpoutError):
                exc = KinesisError(f"reader of {self.shard_id} failed: {exc!r}")
            log.error("reader of %s stopped: %s", self.shard_id, exc)
            with self._lock:
                self._error = exc
            self._on_data()

    def close(self, timeout_s: float = 35.0) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)


class RoundRobinReader:
    """Hands out buffered records across shard readers, one shard after another.

    Who calls: the spout. ``next_record`` asks each shard in turn (skipping those ``admit`` refuses, e.g. at their
    in-flight limit) and returns the first record found, or None at once when none is buffered. ``wait`` blocks
    until a reader signals new data or the timeout passes.
    """

    def __init__(self) -> None:
        self.readers: list[BufferedShardReader] = []
        self._cursor = 0
        self._signal = threading.Condition()
        self._pending_signal = False

    def notify(self) -> None:
        """Called by reader threads when data (or an error, or a shard end) arrives."""
        with self._signal:
            self._pending_signal = True
            self._signal.notify_all()

    def add(self, readers: Iterable[BufferedShardReader]) -> None:
        self.readers.extend(readers)

    def remove(self, reader: BufferedShardReader) -> None:
        self.readers.remove(reader)
        self._cursor = 0

    def next_record(self, admit: Callable[[str], bool]) -> Record | None:
        readers = self.readers
        n = len(readers)
        for i in range(n):
            reader = readers[(self._cursor + i) % n]
            if reader._buffer or reader._error is not None:
                if not admit(reader.shard_id):
                    continue
                record = reader.take_one()
                if record is not None:
                    self._cursor = (self._cursor + i + 1) % n
                    return record
        return None

    def wait(self, timeout_s: float) -> None:
        """Block until a reader signals or ``timeout_s`` passes (returns early on a signal given meanwhile)."""
        if timeout_s <= 0:
            return
        with self._signal:
            if not self._pending_signal:
                self._signal.wait(timeout_s)
            self._pending_signal = False

    def close(self) -> None:
        for reader in self.readers:
            reader._stop.set()
        for reader in self.readers:
            reader.close()
