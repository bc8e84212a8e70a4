"""The executors' side of ``readMode=executors``: a task reads its shard, records its end, yields exactly that.

A task (:func:`read_shard_batch`) reads its shard from the batch's start into a bounded buffer (the batch's
per-shard limits, ``EXECUTOR_READ_S`` of reading, the tip, the shard's end, the AvailableNow cutoff), records the
end it chose (the first writer wins), and yields exactly the records up to the end that stands. The model
(offsets, recorded ends, cuts) is in :mod:`kinesis_spout.spark.batches`.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any, Callable

from pyspark.sql.datasource import InputPartition

from kinesis_spout.config import SpoutConfig
from kinesis_spout.kinesis.retrieval.fanout import RESUBSCRIBE_S
from kinesis_spout.kinesis.retrieval.polling import FetchResult
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Position
from kinesis_spout.records import Record
from kinesis_spout.spark.batches import ShardEnd, cut, within
from kinesis_spout.spark.source.shard_reads import (
    paced_getter,
    read_range,
    shard_getter,
    skip_consumed,
    stream_gone,
    subscribed_getter,
)

__all__ = ["EXECUTOR_READ_S", "FIRST_EVENT_S", "ShardTask", "read_shard_batch", "stream_gone"]

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


def read_shard_batch(client: Any, store: Any, cfg: SpoutConfig, task: ShardTask) -> list[Record]:
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
    n, mine = cut(records, start, task.max_records, task.max_bytes, cutoff, shard_end=shard_end,
                  reached_tip=reached_tip)
    standing = ShardEnd.from_json(store.record_batch_end(task.query, task.batch, task.shard_id, mine.to_json()),
                                  where)
    if standing.end == mine.end:
        return records[:n]
    log.info("%s: an attempt recorded the end first (%s, not %s)", where, standing.end.encode(), mine.end.encode())
    high = standing.end.key
    if high is not None and records and records[-1].key >= high:
        return within(records, start, standing.end)
    return read_range(client, cfg.stream_name, cfg.reading, task.shard_id, start, standing.end, task.hash_range)


def read_bounded(client: Any, cfg: SpoutConfig, task: ShardTask, start: Position, cutoff: datetime | None
                 ) -> tuple[list[Record], bool, bool]:
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
        getter = paced_getter(shard_getter(client, cfg.stream_name, reading, task.shard_id, start, per_call,
                                           task.hash_range))
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
    return [], not probe.fetched, probe.shard_end and not probe.fetched


def _read_until_a_bound(fetch: Callable[[float], FetchResult], task: ShardTask, start: Position,
                        cutoff: datetime | None, per_call: int, read_until: float | None
                        ) -> tuple[list[Record], bool, bool]:
    """The task's read loop over ``fetch(deadline)``. ``read_until`` None: GetRecords replies, read for
    ``EXECUTOR_READ_S``. Else a subscription's events: waited for up to ``FIRST_EVENT_S``, then read until
    ``EXECUTOR_READ_S`` after the first or ``read_until`` (``time.monotonic()``), whichever is later."""
    pushed = read_until is not None
    records: list[Record] = []
    size = 0
    deadline = time.monotonic() + (FIRST_EVENT_S if pushed else EXECUTOR_READ_S)
    waiting = pushed
    while True:
        result = fetch(deadline)
        if waiting and result.millis_behind_latest is not None:
            waiting, deadline = False, max(time.monotonic() + EXECUTOR_READ_S, read_until or 0.0)
        new = skip_consumed(result.records, start) if not records else result.records
        records.extend(new)
        size += sum(r.size for r in new)
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
        if cutoff is not None and any(r.approximate_arrival_timestamp is not None
                                      and r.approximate_arrival_timestamp > cutoff for r in new):
            return records, False, False
        if time.monotonic() >= deadline and (records or pushed or not task.closed):
            return records, False, False  # a closed shard's GetRecords read stops there once it has a record
