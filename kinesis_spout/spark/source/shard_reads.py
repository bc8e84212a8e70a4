"""The one way the source reads a shard: where a read starts, what it skips, and reading an exact range.

Both stream readers (driver reads and executor reads) and their replays read through here, so a position means
the same to all of them: a read after a position inside a KPL aggregate starts AT the aggregate (the getter maps a
:class:`~kinesis_spout.positions.Position` to its iterator) and skips the user records the position consumed
(:func:`skip_consumed`); a range ``(start, end]`` is read exactly (:func:`read_range`). Offsets are in
:mod:`kinesis_spout.spark.source.offsets`.
"""

from __future__ import annotations

from typing import Any, Sequence, cast

from kinesis_spout.config import MIN_POLL_INTERVAL_S, ReadingSettings, SpoutConfig
from kinesis_spout.errors import KinesisError, StreamNotFoundError
from kinesis_spout.kinesis.botocore_errors import where
from kinesis_spout.kinesis.retrieval.factory import paced_getter as paced
from kinesis_spout.kinesis.retrieval.factory import polling_getter, waiting_fan_out
from kinesis_spout.kinesis.retrieval.fanout import WaitingFanOut
from kinesis_spout.kinesis.retrieval.polling import PacedGetter, ShardGetter
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Position
from kinesis_spout.records import Record
from kinesis_spout.spark.source.offsets import consumed, range_is_empty
from kinesis_spout.spark.source.rows import ColumnRows, column_getter, key_at, keys_up_to

__all__ = ["MAX_RETRIES", "paced_getter", "read_range", "shard_getter", "skip_consumed", "stream_gone",
           "subscribed_getter"]

#: Retriable errors (throttling, 5xx, lost connections) in a row before a shard's read fails the query.
MAX_RETRIES = 30


def skip_consumed(records: Sequence[Record], position: Position) -> Sequence[Record]:
    """``records`` (or :class:`~kinesis_spout.spark.source.rows.ColumnRows`) without those ``position`` already
    consumed: the user records of the aggregate a read started at, up to the position's sub-sequence. Other reads
    have none, and only the first records are looked at."""
    if not position.inside_aggregate:
        return records
    i = 0
    while i < len(records) and consumed(key_at(records, i), position):
        i += 1
    return records[i:] if i else records


def shard_getter(client: Any, stream_name: str, reading: ReadingSettings, shard_id: str, position: Position,
                 per_call: int | None = None, hash_range: HashKeyRange | None = None) -> ShardGetter:
    """A getter of the records after ``position`` (``per_call`` records per GetRecords at most, default
    ``reading``'s ``maxRecordsPerCall``; user records of aggregates outside ``hash_range`` are dropped). Its first
    reply may hold records ``position`` consumed: pass them through :func:`skip_consumed`."""
    return polling_getter(client, stream_name, shard_id, position, reading, per_call=per_call, hash_range=hash_range)


def subscribed_getter(client: Any, stream_name: str, reading: ReadingSettings, shard_id: str, position: Position,
                      consumer_arn: str, hash_range: HashKeyRange | None = None, closed: bool = False
                      ) -> WaitingFanOut:
    """A getter of the records after ``position`` through an enhanced fan-out subscription of ``consumer_arn``,
    waited on by one task (retriable refusals tried again up to ``MAX_RETRIES`` times in a row). On a ``closed``
    shard, a caught-up event with no record makes it ask GetRecords whether the shard was read to its end (an
    emulator that sends no ChildShards never ends it). Its first event may hold records ``position`` consumed: see
    :func:`skip_consumed`."""
    return waiting_fan_out(client, stream_name, shard_id, position, reading, consumer_arn,
                           max_retries=MAX_RETRIES, hash_range=hash_range, closed=closed)


def paced_getter(getter: ShardGetter) -> PacedGetter:
    """``getter`` paced as Kinesis allows, retrying retriable errors up to ``MAX_RETRIES`` times in a row."""
    return paced(getter, MIN_POLL_INTERVAL_S, MAX_RETRIES)


def read_range(client: Any, stream_name: str, reading: ReadingSettings, shard_id: str, start: Position,
               end: Position, hash_range: HashKeyRange | None = None) -> ColumnRows:
    """Read exactly the (user) records of ``(start, end]`` of a shard of ``stream_name`` from Kinesis (read as
    ``reading`` says), paced as Kinesis allows, as the columns GetRecords' replies were decoded into.

    Who calls: executors, for a batch whose records are not at hand (a replay, a task that lost the race to record
    its end). Raises ``KinesisError`` when the shard runs out before ``end`` (a re-created stream, expired records).
    """
    getter = paced_getter(cast(ShardGetter, column_getter(
        shard_getter(client, stream_name, reading, shard_id, start, hash_range=hash_range))))
    out = ColumnRows()
    if range_is_empty(start, end):
        return out
    low, high = start.key, end.key
    assert high is not None
    while True:
        result = getter.fetch()
        rows = result.records
        first = keys_up_to(rows, low) if low is not None else 0  # the aggregate a replay starts at: what start consumed
        past = keys_up_to(rows, high)
        if past > first:
            out.extend(rows[first:past])
        if past < len(rows):
            return out  # a record after the end
        last = out.key(-1) if out else None
        if last is not None and last.sequence == high.sequence and (last == high or not end.inside_aggregate):
            return out  # a Kinesis record comes whole in one reply: nothing of the end's record is left
        if result.shard_end or not result.fetched and result.millis_behind_latest in (0, None):
            raise KinesisError(
                f"replaying {shard_id} of {stream_name!r} from {start.encode()} to {end.encode()}: the "
                f"shard has no more records after {out[-1].sequence_number if out else start.encode()}; was "
                f"the stream re-created or did the records expire? Start the query afresh (new checkpoint "
                f"location) to continue from ZooKeeper's checkpoints")


def stream_gone(exc: KinesisError, cfg: SpoutConfig, known: str) -> KinesisError:
    """``exc`` as it is, or, when it says the stream is gone or is not the one this query read (it was deleted,
    maybe re-created, while the query was stopped), an error of the same kind that says so and what to do.

    The one rule of both read modes. Who calls: each stream reader around its planning on the driver (``known``
    says why the query knows the stream: its checkpoint location's batch, or that it started on it) and around a
    task's read or replay on an executor (the batch planned on it)."""
    kinesis = cfg.kinesis
    place = where(kinesis.region, kinesis.endpoint_url)
    fix = (f"Its records are gone: start the query with a new checkpoint location, and with a new appName or after "
           f"resetting app {cfg.app_name!r}'s ZooKeeper checkpoints (`kinesis-spout checkpoints reset`), which hold "
           f"positions in the old stream")
    text = str(exc)
    if isinstance(exc, StreamNotFoundError) and "Shard " in text:  # a shard: Kinesis says the same when it expired
        return StreamNotFoundError(
            f"a shard of stream {cfg.stream_name!r} in {place} does not exist, but this query read it ({known}): "
            f"was the stream deleted, or is the shard older than the stream's retention? If the stream was "
            f"deleted: {fix}. [{exc}]", code=exc.code)
    if isinstance(exc, StreamNotFoundError):
        return StreamNotFoundError(
            f"stream {cfg.stream_name!r} does not exist in {place}, but this query read it ({known}): was it "
            f"deleted? {fix}. (If it was not deleted, check the options streamName, region and endpointUrl.) "
            f"[{exc}]", code=exc.code)
    if exc.code == "InvalidArgumentException" and ("did not come from this stream" in text
                                                   or "StartingSequenceNumber" in text):
        return KinesisError(
            f"stream {cfg.stream_name!r} in {place} is not the stream this query read ({known}): Kinesis says a "
            f"position of it does not come from this stream, so the stream was deleted and re-created. {fix}. "
            f"[{exc}]", code=exc.code)
    return exc
