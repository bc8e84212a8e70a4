"""Buffered prefetching shard readers, and the round-robin reader across them.

Each owned shard has a :class:`BufferedShardReader` that calls GetRecords (at most 5 times a second, as Kinesis
allows), backs off with jitter when throttled (:data:`~kinesis_spout.kinesis.retrieval.polling.GET_RECORDS_RETRY`),
and fills
a bounded buffer (records and bytes). The readers of a spout share a
:class:`~kinesis_spout.kinesis.retrieval.pool.ReaderPool`: a few threads, whatever the number of shards.
The :class:`RoundRobinReader` hands out buffered records shard by shard. Nobody sleeps on an idle shard: readers
signal one shared condition when data arrives, and the consumer waits on it with a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, NamedTuple, TypeVar

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError, SpoutError
from kinesis_spout.kinesis.retrieval.chunks import ChunkBuffer
from kinesis_spout.kinesis.retrieval.polling import GET_RECORDS_RETRY, idle_backoff
from kinesis_spout.kinesis.retrieval.pool import PARK, ReaderPool
from kinesis_spout.kinesis.retrieval.protocol import FetchResult, ShardRetrieval
from kinesis_spout.kinesis.retrieval.read_retries import pause_after, read_backoff, read_succeeded
from kinesis_spout.kinesis.retrieval.wire_columns import (
    RecordColumns,
    first_arrived_after,
    slice_columns,
    to_records,
)
from kinesis_spout.records import Record, SequenceKey

log = logging.getLogger(__name__)

T = TypeVar("T")  # what a take hands out: records, or pieces of columns

class ShardTip(NamedTuple):
    """Where a reader first found its shard's tip: ``key`` is the last record it had read up to there (None: it
    had read none, so nothing before the tip is left to deliver)."""

    key: SequenceKey | None


def tip_of(result: FetchResult, pushed: bool, last_key: SequenceKey | None,
           cutoff: datetime | None) -> ShardTip | None:
    """The shard's tip as one reply shows it, or None when it does not: an empty reply at the tip (GetRecords: no
    record and MillisBehindLatest 0 or absent; fan-out: an event with no record and 0), the shard's end, or a record
    that arrived after ``cutoff`` (the tip was before it). ``last_key``: the last record read before this reply.
    Who calls: :class:`BufferedShardReader` after each reply, until it found the tip."""
    if cutoff is not None:
        for i, record in enumerate(result.records):
            arrived = record.approximate_arrival_timestamp
            if arrived is not None and arrived > cutoff:
                return ShardTip(result.records[i - 1].key if i else last_key)
    if result.shard_end:
        return ShardTip(result.records[-1].key if result.records else last_key)
    millis = result.millis_behind_latest
    if not result.fetched and (millis == 0 if pushed else millis in (0, None)):
        return ShardTip(last_key)
    return None


def _last_record(got: list[Record] | RecordColumns) -> Record:
    """The last record of a reply's records, or of their columns (made of the last row alone)."""
    if isinstance(got, list):
        return got[-1]
    n = len(got)
    return to_records(slice_columns(got, n - 1, n))[0]


def _tip_records(got: RecordColumns, cutoff: datetime | None) -> list[Record]:
    """The records of a reply's columns that :func:`tip_of` needs to answer as it would over all of them: the first
    that arrived after ``cutoff`` and the one before it, or else the last (for a shard's end)."""
    n = len(got)
    if cutoff is not None and cutoff.tzinfo is None:  # naive: compared record by record, as the record path does
        return to_records(got)
    i = None if cutoff is None else first_arrived_after(got, cutoff)
    if i is None:
        return [_last_record(got)]
    return to_records(slice_columns(got, max(i - 1, 0), i + 1)) if n else []


class BufferedShardReader:
    """Prefetches one shard into a bounded buffer; a :class:`~kinesis_spout.kinesis.retrieval.pool.ReaderPool` polls it.

    Who calls: the round-robin reader (``ready``, ``take_upto``), the spout (``start``/``stop``/``close``), the
    pool (``poll``). Without a ``pool`` the reader gets one of its own with a single thread (named
    ``kinesis-reader-<shard>``). ``take_upto`` returns buffered records without blocking; an error met by ``poll``
    is raised by ``take_upto`` once the records read before it are handed out. ``stop()`` ends the polling without
    waiting; ``close()`` stops it and waits for the call in progress; both are idempotent.

    Thread-safety: the buffer, its byte count and ``_error`` are guarded by ``_lock``; ``poll`` runs on one pool
    thread at a time; the counters and both backoffs (GetRecords retries, idle pauses) are that thread's alone.
    """

    def __init__(self, getter: ShardRetrieval, *, max_records: int, max_bytes: int, empty_backoff_s: float,
                 on_data: Callable[[], None], max_retries: int = 30, pool: ReaderPool | None = None,
                 max_empty_backoff_s: float | None = None) -> None:
        self.getter = getter
        self.shard_id = getter.shard_id
        self.max_records = max_records
        self.max_bytes = max_bytes
        # an idle shard's pause doubles with each empty read up to max_empty_backoff_s (None: no growth)
        self._idle = idle_backoff(empty_backoff_s, max_empty_backoff_s)
        self.empty_backoff_s, self.max_empty_backoff_s = self._idle.initial_s, self._idle.max_s
        self.max_retries = max_retries
        self._on_data = on_data
        self._buffer = ChunkBuffer()  # the records read, as the columns they were decoded into (or pushed records)
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._pool = pool
        self._own_pool: ReaderPool | None = None
        self._started = False
        self._polling = threading.Lock()  # held during a poll: close() waits for the call in progress
        self._backoff = read_backoff(GET_RECORDS_RETRY, max_retries)
        self._error: BaseException | None = None
        self.parked = False  # set by the pool (under its lock) while the buffer is full
        self.ended = False
        self.millis_behind_latest: int | None = None
        #: Records that arrived after this time are past the tip that ``tip`` looks for (set before ``start``).
        self.tip_cutoff: datetime | None = None
        #: Where this reader first found the shard's tip (:func:`tip_of`); set once, by the polling thread.
        self.tip: ShardTip | None = None
        self.last_key: SequenceKey | None = None  # the last record read
        self.last_arrival: datetime | None = None  # its arrival time at Kinesis
        self.calls = 0
        self.retried_errors = 0  # throttles, 5xx, lost connections: retried after a backoff
        self.records_read = 0
        # a getter whose records are pushed (enhanced fan-out): an empty fetch parks the reader until the getter
        # calls on_pending from its own thread, instead of polling again after empty_record_backoff_s
        self._pushed = getter.pushed
        # a polling getter's records stay columns until taken; a getter without fetch_columns (enhanced fan-out)
        # hands records over
        self._fetch_columns = getattr(getter, "fetch_columns", None)
        if self._pushed:
            getter.on_pending = self._wake

    def start(self) -> None:
        """Hand the reader to its pool (idempotent)."""
        if self._started or self._stop.is_set():
            return
        self._started = True
        if self._pool is None:
            self._own_pool = self._pool = ReaderPool(1, name=f"kinesis-reader-{self.shard_id}")
        self._pool.add(self)

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def empty_reads(self) -> int:
        """Consecutive empty reads (the idle pause doubles with each, up to ``max_empty_backoff_s``)."""
        return self._idle.failures

    @property
    def ready(self) -> bool:
        """True when ``take_upto`` would hand out records or raise the reader's error (any thread; no lock: a
        snapshot)."""
        return bool(self._buffer) or self._error is not None

    @property
    def exhausted(self) -> bool:
        """True once the shard ended (or failed) and every buffered record was taken."""
        return (self.ended or self._error is not None) and not self._buffer

    def take_upto(self, n: int, max_bytes: int) -> list[Record]:
        """Up to ``n`` buffered records, oldest first, while their bytes stay under ``max_bytes`` (the first record
        always, if ``max_bytes`` > 0); never blocks on Kinesis. Raises the reader's error once the buffer is empty."""
        with self._lock:
            if not self._buffer and self._error is not None:
                raise self._error
            out = self._buffer.take_records(n, max_bytes)
        self._after_take()
        return out

    def take_columns(self, n: int, max_bytes: int) -> list[RecordColumns]:
        """:meth:`take_upto` as columns (one piece per reply the records came from), no record object made."""
        with self._lock:
            if not self._buffer and self._error is not None:
                raise self._error
            out = self._buffer.take_columns(n, max_bytes)
        self._after_take()
        return out

    def _after_take(self) -> None:
        if self.parked and len(self._buffer) <= self.max_records // 2 and self.has_room():
            self._wake()

    def _wake(self) -> None:
        pool = self._pool
        if pool is not None:
            pool.wake(self)

    def has_room(self) -> bool:
        """True when the buffer can take more records (and, for a pushed getter, it has something to hand over:
        the pool re-checks this after parking the reader, so an event pushed meanwhile is not missed)."""
        room = len(self._buffer) < self.max_records and self._buffer.nbytes < self.max_bytes
        return room and (not self._pushed or self.getter.pending)

    def poll(self) -> float | None:
        """One GetRecords call, its records into the buffer (called by the pool, one thread at a time).

        Returns when the next call may be made (monotonic time), ``PARK`` when the buffer is full, or None when
        the reader is done: the shard ended, an error was kept for ``take_upto``, or the reader was closed.
        """
        with self._polling:
            if self._stop.is_set():
                return None
            if not self.has_room():
                return PARK
            try:
                return self._fetch()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's next take_upto()
                if not isinstance(exc, SpoutError):
                    exc = KinesisError(f"reader of {self.shard_id} failed: {exc!r}")
                log.error("reader of %s stopped: %s", self.shard_id, exc)
                with self._lock:
                    self._error = exc
                self._on_data()
                return None

    def _fetch(self) -> float | None:
        backoff = self._backoff
        try:
            self.calls += 1
            result = self._fetch_columns() if self._fetch_columns is not None else self.getter.fetch()
        except KinesisError as exc:
            pause = pause_after(backoff, exc, self.shard_id)
            self.retried_errors += 1
            return time.monotonic() + pause
        read_succeeded(backoff, self.shard_id)
        self.millis_behind_latest = result.millis_behind_latest
        if self._pushed:  # the next event may be taken at once; none there: parked until the getter calls
            pause = 0.0
        elif len(result[0]) or result.fetched:  # a reply whose user records all belonged to other shards: not idle
            self._idle.reset()
            pause = MIN_POLL_INTERVAL_S
        else:
            pause = self._idle.next_delay()
        due = time.monotonic() + pause
        got = result[0]  # the records, or their columns
        if got:
            with self._lock:
                self._buffer.add(got)
            self.records_read += len(got)
        if self.tip is None:  # after the buffer: whoever sees the tip finds its records buffered or taken
            # records made of columns only where the tip needs them: every one against the cutoff, else the last
            seen = [] if not got else got if isinstance(got, list) else _tip_records(got, self.tip_cutoff)
            self.tip = tip_of(FetchResult(seen, result.millis_behind_latest, result.shard_end, result.fetched),
                              self._pushed, self.last_key, self.tip_cutoff)
        if got:
            last = _last_record(got)
            self.last_key, self.last_arrival = last.key, last.approximate_arrival_timestamp
        if result.shard_end:
            self.ended = True
            log.info("shard %s is closed and was read to its end", self.shard_id)
        if got or result.shard_end:
            self._on_data()
        if result.shard_end:
            return None
        if self._pushed and not result.fetched:
            return PARK
        return due

    def stop(self) -> None:
        """Stop polling without waiting: a call in progress finishes, no other starts (any thread; idempotent)."""
        self._stop.set()

    def close(self, timeout_s: float = 35.0) -> None:
        """Stop polling; wait (up to ``timeout_s``) for a call in progress to return. Idempotent."""
        self._stop.set()
        if self._polling.acquire(timeout=timeout_s):  # no poll runs now, and the next one returns at once
            self._polling.release()
        self.getter.close()  # a fan-out getter ends its subscription
        pool, self._own_pool = self._own_pool, None
        if pool is not None:
            pool.close(timeout_s)


class RoundRobinReader:
    """Hands out buffered records across shard readers, one shard after another.

    Who calls: the spout. ``next_records`` asks each shard in turn (skipping those with no room, e.g. at their
    in-flight limit) and returns a chunk of the first that has records, or nothing at once when none is buffered.
    ``wait`` blocks until a reader signals new data or the timeout passes. ``pool`` is the readers' shared
    :class:`~kinesis_spout.kinesis.retrieval.pool.ReaderPool` of ``threads`` threads, closed by ``close()``.
    """

    def __init__(self, threads: int = 8) -> None:
        # the readers' GetRecords calls; threads start with the first readers. 0: no shared pool, each reader
        # gets a thread of its own
        self.pool = ReaderPool(threads) if threads > 0 else None
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

    def next_records(self, room: Callable[[str], tuple[int, int]], n: int) -> list[Record]:
        """Up to ``n`` records of one shard, the next in turn that has records and room: ``room(shard_id)`` says how
        many records and bytes it may take now (``(0, 0)``: none). Empty at once when none is buffered."""
        return self._next(room, n, BufferedShardReader.take_upto)

    def next_columns(self, room: Callable[[str], tuple[int, int]], n: int) -> list[RecordColumns]:
        """:meth:`next_records` as columns (the records of one shard, one piece per reply they came from)."""
        return self._next(room, n, BufferedShardReader.take_columns)

    def _next(self, room: Callable[[str], tuple[int, int]], n: int,
              take: Callable[[BufferedShardReader, int, int], list[T]]) -> list[T]:
        """The turn of :meth:`next_records` and :meth:`next_columns`: ``take(reader, count, bytes)`` of the next
        reader in turn that is ready and has room; the turn moves past the reader that gave something."""
        readers = self.readers
        count = len(readers)
        for i in range(count):
            reader = readers[(self._cursor + i) % count]
            if reader.ready:
                records, nbytes = room(reader.shard_id)
                if records <= 0 or nbytes <= 0:
                    continue
                taken = take(reader, min(n, records), nbytes)
                if taken:
                    self._cursor = (self._cursor + i + 1) % count
                    return taken
        return []

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
            reader.stop()
        for reader in self.readers:
            reader.close()
        if self.pool is not None:
            self.pool.close()
