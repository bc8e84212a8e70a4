"""The executors' side of ``readMode=executors``: a task reads its shards, records their ends, yields exactly that.

A task of one shard (:func:`read_shard_batch`) reads it from the batch's start into a bounded buffer (the batch's
per-shard limits, ``EXECUTOR_READ_S`` of reading, the tip, the shard's end, the AvailableNow cutoff), records the
end it chose (the first writer wins), and yields exactly the records up to the end that stands. A task of several
shards (:class:`ShardsTask`, :func:`read_task_batch`) reads them at once on threads, each so, and records all
their ends in one node (the first writer wins for all of them). The model (offsets, recorded ends, cuts) is in
:mod:`kinesis_spout.spark.source.executor_batches`.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any, Callable, Sequence, TypeVar, cast

from pyspark.sql.datasource import InputPartition

from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import CheckpointError
from kinesis_spout.kinesis.retrieval.fanout import RESUBSCRIBE_S
from kinesis_spout.kinesis.retrieval.polling import FetchResult, ShardGetter
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Position
from kinesis_spout.records import Record
from kinesis_spout.spark.source.executor_batches import ShardEnd, cut, encode_ends, recorded_ends
from kinesis_spout.spark.source.rows import ColumnRows, as_rows, column_getter, join_rows, keys_up_to
from kinesis_spout.spark.source.shard_reads import (
    paced_getter,
    read_range,
    shard_getter,
    skip_consumed,
    stream_gone,
    subscribed_getter,
)

__all__ = ["EXECUTOR_READ_S", "FIRST_EVENT_S", "ShardTask", "ShardsTask", "read_shard_batch", "read_task_batch",
           "stream_gone"]

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

#: How long a task reads its shard at most before it records its end (it stops sooner at a limit or the tip).
EXECUTOR_READ_S = 1.0
#: ``retrieval=fanout``: how long a task waits for its subscription's first event (kinesis-local pushes once a
#: second) before it asks GetRecords whether the shard has anything after its start.
FIRST_EVENT_S = 10.0


class ShardTask(InputPartition):
    """One shard's part of a planned batch: read from ``start`` under the batch's limits (executor side)."""

    def __init__(self, query: str, batch: int, shard_id: str, start: str, max_records: int | None,
                 max_bytes: int | None, cutoff: str | None, hash_range: HashKeyRange | None = None,
                 consumer_arn: str | None = None, closed: bool = False) -> None:
        super().__init__((query, batch, shard_id))
        self.query = query
        self.batch = batch
        self.shard_id = shard_id
        self.start = start
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.cutoff = cutoff
        self.hash_range = hash_range  # the shard's hash keys: user records of aggregates outside them are dropped
        self.consumer_arn = consumer_arn  # retrieval="fanout": read through a subscription of this consumer
        self.closed = closed  # the shard was closed when listed: a caught-up subscription asks whether it ended

    def __repr__(self) -> str:
        return f"ShardTask(batch {self.batch}, {self.shard_id} after {self.start})"


class ShardsTask(InputPartition):
    """A task that reads several shards of a planned batch (``parts``, one :class:`ShardTask` each) and records
    their ends in one node, ``node`` (``task-<k>``) of the batch (executor side)."""

    def __init__(self, query: str, batch: int, node: str, parts: Sequence[ShardTask]) -> None:
        super().__init__((query, batch, node))
        self.query = query
        self.batch = batch
        self.node = node
        self.parts = list(parts)

    @property
    def shard_ids(self) -> list[str]:
        return [p.shard_id for p in self.parts]

    def __repr__(self) -> str:
        return f"ShardsTask(batch {self.batch}, {self.node}: {', '.join(self.shard_ids)})"


#: Threads of a Python worker process that read the shards of its tasks (made on first use, kept for the
#: process's life: a reused Python worker starts no thread per task).
READ_THREADS = 32
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _each(items: Sequence[T], work: Callable[[T], R]) -> list[R]:
    """``work`` on every item, at once on the process's read threads when there are several (the first error is
    raised once all are done). Who calls: :func:`read_task_batch`, on a task's thread (never on a read thread)."""
    global _pool
    if len(items) <= 1:
        return [work(i) for i in items]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="kinesis-task-read")
        pool = _pool
    futures = [pool.submit(work, i) for i in items]
    wait(futures)
    return [f.result() for f in futures]


def read_task_batch(client: Any, store: Any, cfg: SpoutConfig, task: ShardsTask | ShardTask) -> Sequence[Record]:
    """Read a task's part of its batch: :func:`read_shard_batch` for a task of one shard; for a task of several,
    every shard read at once as that function reads one, then all their ends recorded in the task's one node (the
    first writer wins: one ZooKeeper request), and the records of each shard up to the end that stands returned,
    shard after shard. A fan-out task asks for the node first (as a task of one shard does). Who calls: the stream
    reader's ``read``, on an executor."""
    if isinstance(task, ShardTask):
        return read_shard_batch(client, store, cfg, task)
    where = f"{store.batches_node(task.query)}/{task.batch}/{task.node}"
    starts = [Position.parse(p.start, f"task of {p.shard_id}") for p in task.parts]
    recorded = store.batch_end(task.query, task.batch, task.node) \
        if any(p.consumer_arn is not None for p in task.parts) else None
    if recorded is not None:
        ends = _ends_of(task, recorded_ends(task.node, recorded, where), where)
        return join_rows(_each(list(zip(task.parts, starts)), lambda ps: read_range(
            client, cfg.stream_name, cfg.reading, ps[0].shard_id, ps[1], ends[ps[0].shard_id].end,
            ps[0].hash_range)))
    cutoff = datetime.fromisoformat(task.parts[0].cutoff) if task.parts and task.parts[0].cutoff else None
    reads = _each(list(zip(task.parts, starts)), lambda ps: read_bounded(client, cfg, ps[0], ps[1], cutoff))
    cuts = [cut_rows(records, start, p.max_records, p.max_bytes, cutoff, shard_end=shard_end, reached_tip=tip)
            for p, start, (records, tip, shard_end) in zip(task.parts, starts, reads)]
    mine = {p.shard_id: end for p, (_, end) in zip(task.parts, cuts)}
    standing = _ends_of(task, recorded_ends(
        task.node, store.record_batch_end(task.query, task.batch, task.node, encode_ends(mine)), where), where)
    return join_rows(_each(list(range(len(task.parts))), lambda i: _up_to(
        client, cfg, task.parts[i], starts[i], reads[i][0], cuts[i][0], mine[task.parts[i].shard_id],
        standing[task.parts[i].shard_id], where)))


def _ends_of(task: ShardsTask, ends: dict[str, ShardEnd], where: str) -> dict[str, ShardEnd]:
    """``ends`` read from ``task``'s node, checked to hold every shard of the task."""
    missing = sorted(set(task.shard_ids) - set(ends))
    if missing:
        raise CheckpointError(f"batch node {where} holds no end for {', '.join(missing)} (it holds "
                              f"{', '.join(sorted(ends)) or 'none'}); was it written by another query? Start the "
                              f"query with a new checkpoint location (it resumes from ZooKeeper's checkpoints)",
                              retriable=False)
    return ends


def _up_to(client: Any, cfg: SpoutConfig, task: ShardTask, start: Position, records: ColumnRows, n: int,
           mine: ShardEnd, standing: ShardEnd, where: str) -> ColumnRows:
    """The shard's records up to the end that stands: the ``n`` it cut when its own end stands, else those read
    cut at the winner's end, or read again up to it."""
    if standing.end == mine.end:
        return records[:n]
    log.info("%s, %s: an attempt recorded the end first (%s, not %s)", where, task.shard_id, standing.end.encode(),
             mine.end.encode())
    high = standing.end.key
    if high is not None and records and records.key(-1) >= high:
        return within_rows(records, start, standing.end)
    return read_range(client, cfg.stream_name, cfg.reading, task.shard_id, start, standing.end, task.hash_range)


def read_shard_batch(client: Any, store: Any, cfg: SpoutConfig, task: ShardTask) -> ColumnRows:
    """Read the task's part of its batch and return exactly the records up to the end that stands.

    The shard is read under the task's limits, the end chosen is recorded (the first writer wins: one ZooKeeper
    request), and the records up to the end that stands are returned: those read, cut at the winner's end, or read
    again up to it. A later attempt (a retry, a speculative copy, a second action, a replay) thus reads a bounded
    buffer before it learns the recorded end; a fan-out task asks for the end first instead (a new subscription
    would wait out Kinesis' 5 s between subscriptions of a shard), and reads exactly up to it when there is one.
    """
    start = Position.parse(task.start, f"task of {task.shard_id}")
    where = f"{store.batches_node(task.query)}/{task.batch}/{task.shard_id}"
    recorded = store.batch_end(task.query, task.batch, task.shard_id) if task.consumer_arn is not None else None
    if recorded is not None:
        end = ShardEnd.from_json(recorded, where)
        return read_range(client, cfg.stream_name, cfg.reading, task.shard_id, start, end.end, task.hash_range)
    cutoff = datetime.fromisoformat(task.cutoff) if task.cutoff else None
    records, reached_tip, shard_end = read_bounded(client, cfg, task, start, cutoff)
    n, mine = cut_rows(records, start, task.max_records, task.max_bytes, cutoff, shard_end=shard_end,
                       reached_tip=reached_tip)
    standing = ShardEnd.from_json(store.record_batch_end(task.query, task.batch, task.shard_id, mine.to_json()),
                                  where)
    return _up_to(client, cfg, task, start, records, n, mine, standing, where)


def cut_rows(rows: ColumnRows, start: Position, max_records: int | None, max_bytes: int | None,
             cutoff: datetime | None, *, shard_end: bool, reached_tip: bool) -> tuple[int, ShardEnd]:
    """:func:`~kinesis_spout.spark.source.executor_batches.cut` of rows: the AvailableNow cutoff looked for on the
    columns first (the cut sees it only when a row arrived after it: the same answer, with a record made per row only
    then)."""
    if cutoff is not None and rows.first_after(cutoff) is None:
        cutoff = None
    return cut(rows, start, max_records, max_bytes, cutoff, shard_end=shard_end, reached_tip=reached_tip)


def within_rows(rows: ColumnRows, start: Position, end: Position) -> ColumnRows:
    """The rows of ``(start, end]`` (:func:`~kinesis_spout.spark.source.executor_batches.within`; rows in key order,
    as a shard's): what a task yields once the end is recorded."""
    high = end.key
    if high is None:
        return ColumnRows()
    first = keys_up_to(rows, start.key) if start.key is not None else 0
    return rows[first:max(first, keys_up_to(rows, high))]


def read_bounded(client: Any, cfg: SpoutConfig, task: ShardTask, start: Position, cutoff: datetime | None
                 ) -> tuple[ColumnRows, bool, bool]:
    """Read from ``start`` until a limit, the tip, the shard's end, the cutoff or ``EXECUTOR_READ_S``; returns
    (records, reached the tip, reached the shard's end). With GetRecords a closed shard (``task.closed``) is read
    to its end, a limit or the cutoff: an empty reply there is not its tip, and ``EXECUTOR_READ_S`` stops the read
    only once it holds a record (so the next task starts further on).

    With a ``consumer_arn`` the shard is read through an enhanced fan-out subscription: until a limit, the tip (an
    event that says nothing is behind it), the shard's end or the cutoff, else for ``EXECUTOR_READ_S`` after the
    first event and at least ``RESUBSCRIBE_S`` after the subscription was accepted (the next batch's task cannot
    subscribe sooner). When no event comes within ``FIRST_EVENT_S``, one ``GetRecords(Limit=1)`` says whether the
    shard is at its tip.
    """
    reading = cfg.reading
    per_call = reading.max_records_per_call if task.max_records is None else min(reading.max_records_per_call,
                                                                                 task.max_records)
    if task.consumer_arn is None:
        getter = paced_getter(cast(ShardGetter, column_getter(shard_getter(
            client, cfg.stream_name, reading, task.shard_id, start, per_call, task.hash_range))))
        return _read_until_a_bound(lambda _deadline: getter.fetch(), task, start, cutoff, per_call, None)
    pushed = subscribed_getter(client, cfg.stream_name, reading, task.shard_id, start, task.consumer_arn,
                               task.hash_range, task.closed)
    try:
        subscribed_at = pushed.subscribe()
        records, tip, ended = _read_until_a_bound(pushed.fetch, task, start, cutoff, per_call,
                                                  subscribed_at + RESUBSCRIBE_S)
    finally:
        pushed.close()
    if records or tip or ended or pushed.events:
        return records, tip, ended
    # no event in FIRST_EVENT_S: the tip if GetRecords finds nothing after start (the planner's probe then waits)
    probe = paced_getter(shard_getter(client, cfg.stream_name, reading, task.shard_id, start, 1,
                                      task.hash_range)).fetch()
    log.info("%s: no event from its subscription in %.0f s; GetRecords found %s", task, FIRST_EVENT_S,
             "its end" if probe.shard_end else "records" if probe.fetched else "nothing")
    return ColumnRows(), not probe.fetched, probe.shard_end and not probe.fetched


def _read_until_a_bound(fetch: Callable[[float], FetchResult], task: ShardTask, start: Position,
                        cutoff: datetime | None, per_call: int, read_until: float | None
                        ) -> tuple[ColumnRows, bool, bool]:
    """The task's read loop over ``fetch(deadline)``. ``read_until`` None: GetRecords replies, read for
    ``EXECUTOR_READ_S``. Else a subscription's events: waited for up to ``FIRST_EVENT_S``, then read until
    ``EXECUTOR_READ_S`` after the first or ``read_until`` (``time.monotonic()``), whichever is later."""
    pushed = read_until is not None
    records = ColumnRows()  # the columns GetRecords' replies were decoded into (a subscription's records, made so)
    size = 0
    deadline = time.monotonic() + (FIRST_EVENT_S if pushed else EXECUTOR_READ_S)
    waiting = pushed
    while True:
        result = fetch(deadline)
        if waiting and result.millis_behind_latest is not None:
            waiting, deadline = False, max(time.monotonic() + EXECUTOR_READ_S, read_until or 0.0)
        new = as_rows(skip_consumed(result.records, start) if not records else result.records)
        records.extend(new)
        size += new.nbytes()
        if result.shard_end:
            return records, True, True
        if pushed:  # an event that says nothing is behind it is the tip; no event in time is only the deadline
            if result.millis_behind_latest == 0:
                return records, True, False
        # the tip: an empty reply that is not behind, or a short one that says it is not behind (an emulator says
        # MillisBehindLatest 0 also when the Limit cut the reply short). A closed shard has no tip, only its end: a
        # new iterator after its last record may answer empty with a next iterator (kinesalite's does when the
        # shard closed seconds after that record), and every task would start there again, so it reads on
        elif not task.closed and result.millis_behind_latest in (0, None) and result.fetched < per_call:
            return records, True, False
        if task.max_records is not None and len(records) >= task.max_records:
            return records, False, False
        if task.max_bytes is not None and size >= task.max_bytes:
            return records, False, False
        if cutoff is not None and new.first_after(cutoff) is not None:
            return records, False, False
        if time.monotonic() >= deadline and (records or pushed or not task.closed):
            return records, False, False  # a closed shard's GetRecords read stops there once it has a record
