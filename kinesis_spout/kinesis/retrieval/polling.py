"""The polling getter: shard iterators and GetRecords for one shard, with expired-iterator recovery, and the paced
getter the Spark tasks read one shard with. Made by :mod:`~kinesis_spout.kinesis.retrieval.factory` only."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.botocore_errors import translate
from kinesis_spout.kinesis.retrieval.conversion import ALL_HASH_KEYS, ConvertedRecords, RecordConversion
from kinesis_spout.kinesis.retrieval.protocol import LATEST_MARGIN, FetchResult
from kinesis_spout.kinesis.retrieval.read_retries import pause_after, read_backoff, read_succeeded
from kinesis_spout.kinesis.retrieval.wire_columns import (
    RecordColumns,
    ReplyColumns,
    expand,
    get_record_columns,
    to_records,
)
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Kind, Position, after, at_timestamp, iterator_args
from kinesis_spout.retry import Backoff, RetryPolicy

__all__ = ["ALL_HASH_KEYS", "GET_RECORDS_RETRY", "LATEST_MARGIN", "ColumnFetch", "FetchResult", "PacedGetter",
           "ShardGetter", "idle_backoff"]

log = logging.getLogger(__name__)


class ColumnFetch(NamedTuple):
    """:class:`FetchResult` with the records as columns (:meth:`ShardGetter.fetch_columns`)."""

    columns: RecordColumns
    millis_behind_latest: int | None
    shard_end: bool
    fetched: int


NO_REPLY = ReplyColumns([], [], [], [], True, None, None)  # what a finished shard answers


class ShardGetter(ConvertedRecords):
    """Reads one shard with GetRecords (a :class:`~kinesis_spout.kinesis.retrieval.protocol.ShardRetrieval`). Not
    thread-safe: one reader thread owns it.

    Constructor does no I/O; the first ``fetch()`` gets the shard iterator at ``start``
    (:func:`kinesis_spout.positions.iterator_args`: inside a KPL aggregate the aggregate is read again, and the
    caller skips its user records up to the position; a ``SHARD_END`` start reads nothing). After records are
    fetched, the getter's ``position`` is *after the last record fetched*, so an expired iterator is replaced by
    one at exactly that place: nothing is skipped and nothing is read twice.
    """

    def __init__(self, client: Any, stream_name: str, shard_id: str, start: Position,
                 max_records: int = 10_000, *, deaggregate: bool = False,
                 hash_range: HashKeyRange | None = None) -> None:
        self.client = client
        self.stream_name = stream_name
        self.shard_id = shard_id
        self.position = start
        self.max_records = max_records
        self._iterator: str | None = None
        self.shard_end = start.ended  # an end: nothing left to read
        self.expired_iterators = 0
        self.on_pending: Callable[[], None] = lambda: None  # never called: nothing is pushed
        # KPL de-aggregation and the user records of other shards (hash_range; None: not known, nothing dropped)
        self._convert = RecordConversion(stream_name, shard_id, deaggregate=deaggregate, hash_range=hash_range)

    #: Polled: the reader calls ``fetch`` again after its idle pause (see :class:`ShardRetrieval`).
    pushed = False
    #: Always worth a ``fetch`` (a polling getter has nothing queued to wait for).
    pending = True

    def _get_iterator(self) -> str:
        pos = self.position
        args = iterator_args(pos)
        assert args is not None  # an end is never read: shard_end is set
        kwargs: dict[str, Any] = {"StreamName": self.stream_name, "ShardId": self.shard_id, **args.kwargs()}
        asked_at = datetime.now(timezone.utc) - LATEST_MARGIN
        try:
            iterator = str(self.client.get_shard_iterator(**kwargs)["ShardIterator"])
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, f"getting a shard iterator for {self.shard_id} of {self.stream_name!r} at "
                                 f"{args.describe()}") from exc
        if pos.kind is Kind.LATEST:
            # Pin "latest" to a time: if this iterator expires before a record arrives, re-seeking at LATEST
            # again would skip what arrived in between. Records of the margin may be delivered; none are lost.
            self.position = at_timestamp(asked_at)
        return iterator

    def prepare(self) -> None:
        """Take the shard iterator now (the first ``fetch`` would). Called where the moment matters: a ``LATEST``
        start is taken before ``open()`` returns, so records put after it are read."""
        if self._iterator is None and not self.shard_end:
            self._iterator = self._get_iterator()

    def close(self) -> None:
        """Nothing to release (an iterator is not held open); the readers call it on every getter."""

    def fetch(self) -> FetchResult:
        """One GetRecords call. Raises a ``KinesisError`` (``retriable`` for throttling and server errors)."""
        got = self.fetch_columns()
        return FetchResult(to_records(got.columns), got.millis_behind_latest, got.shard_end, got.fetched)

    def fetch_columns(self) -> ColumnFetch:
        """:meth:`fetch`, its records left as the columns they were decoded into (the buffered readers keep them so
        until they are taken)."""
        if self.shard_end:
            return ColumnFetch(expand(NO_REPLY, self.shard_id, False), 0, True, 0)
        for attempt in (1, 2):
            if self._iterator is None:
                self._iterator = self._get_iterator()
            try:
                reply = get_record_columns(self.client, self._iterator, self.max_records)
                break
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code == "ExpiredIteratorException" and attempt == 1:
                    self.expired_iterators += 1
                    again = iterator_args(self.position)
                    log.info("shard iterator of %s expired; re-seeking at %s", self.shard_id,
                             again.describe() if again is not None else self.position.encode())
                    self._iterator = None
                    continue
                raise translate(exc, f"reading {self.shard_id} of {self.stream_name!r}") from exc
            except BotoCoreError as exc:
                raise translate(exc, f"reading {self.shard_id} of {self.stream_name!r}") from exc
        else:  # pragma: no cover - the loop always breaks or raises
            raise KinesisError("unreachable")
        columns = self._convert.columns(reply)
        sequence_numbers = reply.sequence_numbers
        if sequence_numbers:  # after the last record fetched, even one whose user records all belonged to other shards
            self.position = after(sequence_numbers[-1])
        self._iterator = reply.next_shard_iterator
        if self._iterator is None:
            self.shard_end = True
        return ColumnFetch(columns, reply.millis_behind_latest, self.shard_end, len(sequence_numbers))


#: Pause before GetRecords is tried again after a throttle or a retriable error: full jitter between the shortest
#: poll interval and a ceiling that doubles with each failure in a row, up to 10 s. The readers and the paced
#: getters set their own limit of tries.
GET_RECORDS_RETRY = RetryPolicy(initial_s=MIN_POLL_INTERVAL_S, multiplier=2.0, max_s=10.0, jitter=1.0)


def idle_backoff(empty_backoff_s: float, max_empty_backoff_s: float | None) -> Backoff:
    """The pauses between GetRecords calls of one idle shard: ``empty_backoff_s`` after the first empty reply,
    doubling with each empty reply in a row up to ``max_empty_backoff_s`` (``reading.max_empty_record_backoff_s``;
    None, or a cap below the first pause: no growth); ``reset()`` when a reply held records. No jitter. Who calls:
    the spout's shard readers, the Spark source's driver reads and its executor reads' probes, one per shard."""
    first = max(empty_backoff_s, MIN_POLL_INTERVAL_S)
    return Backoff(RetryPolicy(initial_s=first, multiplier=2.0, max_s=max(first, max_empty_backoff_s or 0.0)))


class PacedGetter:
    """A :class:`ShardGetter` read at most every ``interval_s`` (Kinesis allows 5 GetRecords per second and shard),
    with retriable errors tried again after :data:`GET_RECORDS_RETRY`'s delays, up to ``max_retries`` in a row.

    Who calls: the Spark tasks that read one shard in a loop (replays, executor reads, batch reads). Not
    thread-safe: one task owns it (and its backoff).
    """

    def __init__(self, getter: ShardGetter, interval_s: float, max_retries: int) -> None:
        self.getter = getter
        self.interval_s = interval_s
        self.max_retries = max_retries
        self._backoff = read_backoff(GET_RECORDS_RETRY, max_retries)
        self._next_call = 0.0

    def fetch(self) -> FetchResult:
        """The next reply, waiting for the shard's pace; raises what retrying cannot fix, or, after ``max_retries``
        retriable ones in a row, an error that says it gave up (see ``read_retries.pause_after``)."""
        while True:
            time.sleep(max(0.0, self._next_call - time.monotonic()))
            try:
                result = self.getter.fetch()
            except KinesisError as exc:
                self._next_call = time.monotonic() + pause_after(self._backoff, exc, self.getter.shard_id)
                continue
            read_succeeded(self._backoff, self.getter.shard_id)
            self._next_call = time.monotonic() + self.interval_s
            return result
