"""The shard getter: shard iterators and GetRecords for one shard, with expired-iterator recovery."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.aggregation import aggregate_problem, hash_key
from kinesis_spout.kinesis.client import translate
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.kinesis.wire_columns import (
    RecordColumns,
    ReplyColumns,
    columns_of_reply,
    expand,
    get_record_columns,
    keep_inside,
    to_records,
)
from kinesis_spout.positions import Kind, Position, after, at_timestamp, iterator_args
from kinesis_spout.records import Record
from kinesis_spout.retry import Backoff, RetryPolicy

log = logging.getLogger("kinesis_spout.kinesis")

#: How far before a LATEST iterator was taken a re-seek after its expiry starts (allows for clock skew).
LATEST_MARGIN = timedelta(seconds=1)

#: Every hash key: the range of a stream's only shard, where no user record can belong elsewhere.
ALL_HASH_KEYS = HashKeyRange(0, (1 << 128) - 1)

_reported: set[tuple[str, str]] = set()  # (stream, shard) whose foreign user records were logged; under the lock
_reported_lock = threading.Lock()

class FetchResult(NamedTuple):
    """One GetRecords call's outcome. ``shard_end`` is true once the shard is closed and fully read. ``fetched``
    counts the Kinesis records of the reply: more than zero with no ``records`` when every user record of its
    aggregates belonged to other shards (the reply was not empty, the shard may hold more). Every field is required:
    a getter that left ``fetched`` out would make its readers take such a reply for the shard's tip."""

    records: list[Record]
    millis_behind_latest: int | None
    shard_end: bool
    fetched: int


class ColumnFetch(NamedTuple):
    """:class:`FetchResult` with the records as columns (:meth:`ShardGetter.fetch_columns`)."""

    columns: RecordColumns
    millis_behind_latest: int | None
    shard_end: bool
    fetched: int


NO_REPLY = ReplyColumns([], [], [], [], True, None, None)  # what a finished shard answers


class ShardGetter:
    """Reads one shard with GetRecords. Not thread-safe: one reader thread owns it.

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
        self.deaggregate = deaggregate
        self.corrupt_aggregates = 0  # records with the aggregate magic that did not decode: delivered as they are
        # the shard's hash keys (from ListShards): user records of an aggregate outside it are dropped. None (not
        # known) or every hash key: nothing is dropped
        self.hash_range = hash_range
        self._foreign = hash_range if hash_range is not None and hash_range != ALL_HASH_KEYS else None
        self._inside = keep_inside(self._foreign.start, self._foreign.end) if self._foreign is not None else None
        self.foreign_user_records = 0  # user records dropped because their hash key belongs to another shard

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
        columns = self.columns(reply)
        sequence_numbers = reply.sequence_numbers
        if sequence_numbers:  # after the last record fetched, even one whose user records all belonged to other shards
            self.position = after(sequence_numbers[-1])
        self._iterator = reply.next_shard_iterator
        if self._iterator is None:
            self.shard_end = True
        return ColumnFetch(columns, reply.millis_behind_latest, self.shard_end, len(sequence_numbers))

    def columns(self, reply: ReplyColumns) -> RecordColumns:
        """The user records of a reply: with ``deaggregate``, each KPL aggregate becomes its user records
        (sub-sequence numbers 0..n-1), and one that does not decode is kept whole, counted and logged.

        With a ``hash_range``, the user records whose hash key lies outside it are dropped and counted (a producer
        with a stale shard map put them here, and puts them again in their own shard). The others keep their
        sub-sequence numbers; their ``aggregated`` is one more than the last one kept, so the Kinesis record is done
        once that one is (what follows it belongs to other shards). Called by :meth:`fetch`."""
        return expand(reply, self.shard_id, self.deaggregate, self._kept if self._inside is not None else None,
                      self._corrupt)

    def _records(self, raw: Any) -> list[Record]:
        """The records of a reply's parsed ``Records`` (dicts, as botocore parses them): :meth:`columns`, made
        records. Used by a getter that is handed parsed records (enhanced fan-out's events)."""
        return to_records(self.columns(columns_of_reply({"Records": raw})))

    def _corrupt(self, seq: str, data: bytes) -> None:
        self.corrupt_aggregates += 1
        log.warning("record %s:%s starts like a KPL aggregate but does not decode (%s); delivered as it is",
                    self.shard_id, seq, aggregate_problem(data))

    def _kept(self, seq: str, keys: list[str], ehks: list[str | None] | None) -> list[int] | None:
        """The indexes of the user records (partition keys ``keys``, explicit hash keys ``ehks``, None when none
        has one) whose hash key lies in the shard's range (None when all do), by
        :func:`~kinesis_spout.kinesis.wire_columns.keep_inside` (each distinct key hashed once); counts and reports
        the others. A user record whose explicit hash key is not a number is kept (no shard can be told)."""
        inside, rng = self._inside, self._foreign
        assert inside is not None and rng is not None  # only given to expand() with a range
        kept = inside(seq, keys, ehks)
        if kept is None:
            return None
        low = rng.start
        dropped = sorted(set(range(len(keys))) - set(kept))
        below = sum(1 for i in dropped if (h := hash_key(keys[i], ehks[i] if ehks is not None else None)) is not None
                    and h < low)
        self.foreign_user_records += len(dropped)
        self._report(seq, len(keys), below, len(dropped) - below)
        return kept

    def _report(self, seq: str, total: int, below: int, above: int) -> None:
        """Log dropped user records: the first time for a shard (in this process) as a warning with the counts, later
        at debug level."""
        key = (self.stream_name, self.shard_id)
        with _reported_lock:
            first = key not in _reported
            _reported.add(key)
        log.log(logging.WARNING if first else logging.DEBUG,
                "shard %s of %r: KPL aggregate %s holds %d of its %d user records with hash keys outside the shard's "
                "range %s (%d below it, %d above it); a producer with a stale shard map put them here and puts them "
                "again in their own shards: dropped here (counted in foreign_user_records%s). A producer that "
                "aggregates user records of several shards and puts them nowhere else loses them so: set "
                "dropForeignUserRecords=false (SpoutConfig.drop_foreign_user_records) for it", self.shard_id,
                self.stream_name, seq, below + above, total, self._foreign, below, above,
                "; later ones of this shard are logged at debug level" if first else "")


#: Pause before GetRecords is tried again after a throttle or a retriable error: full jitter between the shortest
#: poll interval and a ceiling that doubles with each failure in a row, up to 10 s. The readers and the paced
#: getters set their own limit of tries.
GET_RECORDS_RETRY = RetryPolicy(initial_s=MIN_POLL_INTERVAL_S, multiplier=2.0, max_s=10.0, jitter=1.0)


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
        self._backoff = Backoff(replace(GET_RECORDS_RETRY, max_attempts=max(max_retries, 0) + 1))
        self._next_call = 0.0

    def fetch(self) -> FetchResult:
        """The next reply, waiting for the shard's pace; raises what retrying cannot fix, or the last error after
        ``max_retries`` retriable ones in a row."""
        while True:
            time.sleep(max(0.0, self._next_call - time.monotonic()))
            try:
                result = self.getter.fetch()
            except KinesisError as exc:
                if not exc.retriable:
                    raise
                pause = self._backoff.next_delay()
                if self._backoff.exhausted:
                    raise
                self._next_call = time.monotonic() + pause
                continue
            self._backoff.reset()
            self._next_call = time.monotonic() + self.interval_s
            return result
