"""Planning of the driver-read source (``readMode=driver``): the driver reads Kinesis and keeps what it read.

``plan`` takes what each shard has read (at most one GetRecords call per shard and round, paced as Kinesis allows;
a shard that returned records reads its next call ahead while Spark runs the batch), admits records under the read
limit, keeps them keyed by ``(shard, start, end)``, and returns the new per-shard positions. The reader then hands
each shard's kept records to its partition (:meth:`DriverPlanner.take_kept`), so the executors do not read Kinesis
again.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping, Sequence

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.retrieval.factory import shard_retrieval
from kinesis_spout.kinesis.retrieval.polling import GET_RECORDS_RETRY, LATEST_MARGIN, idle_backoff
from kinesis_spout.kinesis.retrieval.protocol import ShardRetrieval
from kinesis_spout.kinesis.retrieval.read_retries import pause_after, read_backoff, read_succeeded
from kinesis_spout.positions import TRIM_HORIZON, Position, after_record, at_timestamp
from kinesis_spout.records import Record
from kinesis_spout.retry import Backoff
from kinesis_spout.spark.source.lag import ShardLag
from kinesis_spout.spark.source.offsets import (
    allocate,
    end_after,
    first_after,
    waiting_for_parents,
)
from kinesis_spout.spark.source.planning import QueryPlanning
from kinesis_spout.spark.source.rows import key_at
from kinesis_spout.spark.source.shard_reads import MAX_RETRIES, skip_consumed
from kinesis_spout.spark.source.shares import share_rows

__all__ = ["DriverPlanner", "ShardCursor"]

log = logging.getLogger(__name__)

FETCH_THREADS = 32


def _end(getter: ShardRetrieval) -> None:
    """End a fan-out getter's subscription (a polling getter holds nothing)."""
    close = getattr(getter, "close", None)
    if close is not None:
        close()


@dataclass
class ShardCursor:
    """Driver-side reading of one shard: where the last planned batch ended and what was read beyond it.

    Touched by Spark's planning thread, and by one pool thread while ``ahead`` runs (then the planning thread
    leaves the cursor alone until the future is done)."""

    shard_id: str
    position: Position
    getter: ShardRetrieval
    pending: list[Record] = field(default_factory=list)
    next_poll: float = 0.0
    #: the driver's GetRecords retries: the readers' delays, MAX_RETRIES retriable errors in a row at most
    backoff: Backoff = field(default_factory=lambda: read_backoff(GET_RECORDS_RETRY, MAX_RETRIES))
    #: the pause after an empty read at the tip: ``empty_record_backoff_s``, doubling while the shard stays idle
    idle: Backoff = field(default_factory=lambda: idle_backoff(MIN_POLL_INTERVAL_S, None))
    at_tip: bool = False   # an empty read at the stream's tip since prepareForTriggerAvailableNow
    frozen: bool = False   # Trigger.AvailableNow: records past the run's start time were seen; read no further
    busy: bool = False     # the last read returned records: read ahead while Spark runs the batch
    ahead: Future[None] | None = None  # the read-ahead in progress
    millis_behind_latest: int | None = None  # of the last GetRecords reply (or fan-out event)
    last_arrival: datetime | None = None     # of the last record read

    @property
    def readable(self) -> bool:
        """Whether a GetRecords call may be made now or later (nothing waiting, not ended, not stopped)."""
        return not self.pending and not self.getter.shard_end and not self.frozen and self.ahead is None

    def admissible(self, cutoff: datetime | None) -> int:
        """How many of the pending records a batch may take: all of them, or under Trigger.AvailableNow those
        before the first one that arrived after ``cutoff`` (the rest stay pending, never dropped)."""
        if cutoff is None:
            return len(self.pending)
        cut = first_after((r.approximate_arrival_timestamp for r in self.pending), cutoff)
        return len(self.pending) if cut is None else cut

    def caught_up(self, cutoff: datetime | None) -> bool:
        """Trigger.AvailableNow: nothing left of what was in the shard when the run started."""
        return (self.ahead is None and self.admissible(cutoff) == 0
                and (self.getter.shard_end or self.frozen or self.at_tip))


class DriverPlanner:
    """The driver's reading for ``readMode=driver``: one cursor per shard, read-ahead threads, and the records kept
    for planned batches until their partitions take them.

    Owned by Spark's planning thread (every method is called from it); pool threads touch only the cursor of their
    read-ahead (see :class:`ShardCursor`). ``close()`` stops the threads and is idempotent.
    """

    def __init__(self, planning: QueryPlanning) -> None:
        self.planning = planning
        self.config = planning.config
        self._pool: ThreadPoolExecutor | None = None
        self._cursors: dict[str, ShardCursor] = {}
        self._kept: dict[tuple[str, str, str], list[Record]] = {}

    def restart_tips(self) -> None:
        """Trigger.AvailableNow starts: a shard seen at its tip before must be seen there again."""
        for cursor in self._cursors.values():
            cursor.at_tip = False

    def plan(self, positions: dict[str, Position], max_rows: int | None, max_bytes: int | None
             ) -> tuple[dict[str, Position], bool, float | None]:
        """One planning round: poll due shards, admit records, start reading ahead on busy shards.

        Returns (end, all caught up, next poll time). A shard whose read-ahead is still running sits this round out.
        """
        planning = self.planning
        shards = planning.list_shards()
        for gone in [s for s in self._cursors if s not in shards]:
            _end(self._cursors.pop(gone).getter)  # no longer owned (or listed): its read-ahead, if any, is forgotten
        starts = {s: positions[s] for s in shards if s in positions}
        end = dict(positions)
        for shard_id, pos in planning.new_shard_positions([s for s in shards if s not in positions],
                                                          positions).items():
            end[shard_id] = pos  # a shard joins the query at its start; it is read from the next batch on
            if pos.sequence_number is not None:  # nothing of it belongs to the joining batch
                self._kept[(shard_id, TRIM_HORIZON.encode(), pos.encode())] = []
        for shard_id, pos in starts.items():
            if pos.unresolved:
                end[shard_id] = at_timestamp(datetime.now(timezone.utc) - LATEST_MARGIN)
        blocked = waiting_for_parents({s: shard.parents for s, shard in shards.items()}, starts, shards)
        cursors = [self._cursor(s, pos) for s, pos in starts.items()
                   if s not in blocked and not pos.ended and not pos.unresolved]
        everyone = cursors
        cursors = self._collect(cursors)
        now = time.monotonic()
        self._fetch([c for c in cursors if c.readable and c.next_poll <= now])
        cutoff = planning.cutoff
        admissible = {c.shard_id: c.admissible(cutoff) for c in cursors}
        if cutoff is not None:
            for cursor in cursors:
                if admissible[cursor.shard_id] < len(cursor.pending):
                    cursor.frozen = True  # records past the run's start were seen: read no further
        if max_bytes is None:  # a limit in records alone: shared out by counting, no work per record
            counts = share_rows(admissible, max_rows)
        else:
            counts = allocate({c.shard_id: [r.size for r in c.pending[:admissible[c.shard_id]]] for c in cursors},
                              max_rows, max_bytes)
        for cursor in cursors:
            n = counts[cursor.shard_id]
            taken, cursor.pending = cursor.pending[:n], cursor.pending[n:]
            new = end_after([r.key for r in taken[-1:]], cursor.pending[0].key if cursor.pending else None,
                            cursor.position)
            if cursor.getter.shard_end and not cursor.pending:  # every record of the shard was admitted
                new = new.finished()
                planning.relist()  # look for the children of the closed shard
                log.info("shard %s is closed and was read to its end", cursor.shard_id)
            if new != cursor.position:
                self._kept[(cursor.shard_id, cursor.position.encode(), new.encode())] = taken
                cursor.position = end[cursor.shard_id] = new
        for cursor in cursors:
            if cursor.busy and cursor.readable:
                cursor.ahead = self._threads().submit(self._read_ahead, cursor)
        waiting = [c.next_poll for c in cursors if c.readable and not (cutoff and c.at_tip)]
        return end, all(c.caught_up(cutoff) for c in everyone), min(waiting, default=None)

    def lags(self) -> list[ShardLag]:
        """Each read shard's lag: the position after its last record read (read ahead included), its last reply's
        MillisBehindLatest, its last record's arrival time, and the records read and not in a planned batch. Who
        calls: the reader's ``reportLatestOffset``, on Spark's planning thread (a read-ahead may still be running:
        its figures are those of the reply before)."""
        out = []
        for c in self._cursors.values():
            pending = c.pending[:]  # one view: a read-ahead may extend the cursor's rows meanwhile
            position = after_record(key_at(pending, -1), True).encode() if pending else c.position.encode()
            out.append(ShardLag(c.shard_id, position, c.millis_behind_latest, c.last_arrival, len(pending)))
        return out

    def wait(self, pause: float) -> None:
        """Wait ``pause`` seconds, or less when a read-ahead finishes first."""
        ahead = [c.ahead for c in self._cursors.values() if c.ahead is not None and not c.ahead.done()]
        if ahead:
            wait(ahead, timeout=pause, return_when=FIRST_COMPLETED)
        else:
            time.sleep(pause)

    def take_kept(self, shard_id: str, start: str, end: str) -> list[Record] | None:
        """The records kept for the shard's batch ``(start, end]`` (handed out once), None if none are kept (a
        batch planned by another process: its task reads it again)."""
        return self._kept.pop((shard_id, start, end), None)

    def forget_kept(self, positions: Mapping[str, Position]) -> None:
        """Drop kept records of batches that are done (their end is not beyond ``positions``)."""
        for key in [k for k in self._kept if k[0] in positions
                    and not Position.parse(k[2]).is_beyond(positions[k[0]])]:
            del self._kept[key]

    def close(self) -> None:
        """Stop the read-ahead threads and forget cursors and kept records. Idempotent."""
        pool, self._pool = self._pool, None
        for cursor in self._cursors.values():
            _end(cursor.getter)
        self._cursors.clear()
        self._kept.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    # -- reading --------------------------------------------------------------------------------------------------
    def _cursor(self, shard_id: str, position: Position) -> ShardCursor:
        """The shard's cursor, made afresh when Spark asks from somewhere else than where it stands."""
        cursor = self._cursors.get(shard_id)
        if cursor is None or cursor.position != position:
            if cursor is not None:
                _end(cursor.getter)
            client, cfg = self.planning.clients.kinesis(), self.config
            getter = shard_retrieval(client, cfg.stream_name, shard_id, position, cfg.reading,
                                     consumer_arn=self.planning.consumer_arn,
                                     hash_range=self.planning.hash_range(shard_id))
            cursor = self._cursors[shard_id] = ShardCursor(
                shard_id, position, getter,
                idle=idle_backoff(cfg.reading.empty_record_backoff_s, cfg.reading.max_empty_record_backoff_s))
        return cursor

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="kinesis-source-read")
        return self._pool

    def _fetch(self, cursors: Sequence[ShardCursor]) -> None:
        """One GetRecords per cursor (in parallel when several); errors that retrying cannot fix are raised."""
        if len(cursors) == 1:
            self._fetch_one(cursors[0])
            return
        for future in [self._threads().submit(self._fetch_one, c) for c in cursors]:
            future.result()

    def _collect(self, cursors: Sequence[ShardCursor]) -> list[ShardCursor]:
        """The cursors not reading ahead any more (a read-ahead's error is raised here, on Spark's thread)."""
        ready = []
        for cursor in cursors:
            if cursor.ahead is not None:
                if not cursor.ahead.done():
                    continue
                future, cursor.ahead = cursor.ahead, None
                future.result()
            ready.append(cursor)
        return ready

    def _read_ahead(self, cursor: ShardCursor) -> None:
        """On a pool thread, while Spark runs the batch: the shard's next GetRecords, when Kinesis allows it."""
        time.sleep(max(0.0, cursor.next_poll - time.monotonic()))
        self._fetch_one(cursor)

    def _fetch_one(self, cursor: ShardCursor) -> None:
        """One GetRecords into the cursor's pending records; sets when the shard may be polled next (Kinesis'
        pace, the empty-read backoff, or a retry backoff after a retriable error, which is not raised)."""
        try:
            result = cursor.getter.fetch()
        except KinesisError as exc:  # raised when not retriable or after MAX_RETRIES retriable ones in a row
            cursor.next_poll = time.monotonic() + pause_after(cursor.backoff, exc, cursor.shard_id)
            return
        read_succeeded(cursor.backoff, cursor.shard_id)
        cursor.pending.extend(skip_consumed(result.records, cursor.position))
        cursor.millis_behind_latest = result.millis_behind_latest
        if result.records:
            cursor.last_arrival = result.records[-1].approximate_arrival_timestamp
        # a reply whose user records all belonged to other shards was not empty: the shard may hold more
        cursor.busy = bool(result.fetched)
        if getattr(cursor.getter, "pushed", False):  # fan-out: no event yet is not the tip; an event says so
            at_tip = not result.fetched and result.millis_behind_latest == 0
        else:
            at_tip = not result.fetched and result.millis_behind_latest in (0, None)
        cursor.at_tip = cursor.at_tip or at_tip
        if at_tip:  # idle: the pause grows up to max_empty_record_backoff_s while the shard stays idle
            pause = cursor.idle.next_delay()
        else:
            cursor.idle.reset()
            pause = MIN_POLL_INTERVAL_S
        cursor.next_poll = time.monotonic() + pause
