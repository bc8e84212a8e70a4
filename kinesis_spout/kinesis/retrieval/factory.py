"""The one place a shard getter is made: polling or enhanced fan-out, chosen from the reading settings.

Every reader of Kinesis asks here: the spout for each shard it starts, and the Spark source's driver reads, executor
reads, replays, probes and batch reads. :func:`shard_retrieval` chooses by ``ReadingSettings.retrieval``
(``"polling"``: GetRecords; ``"fanout"``: a SubscribeToShard subscription of the app's consumer);
:func:`polling_getter` is a GetRecords getter whatever the setting (probes and batch reads), :func:`paced_getter`
and :func:`waiting_fan_out` the forms a Spark task reads one shard with. Whether GetRecords takes the lean path or
botocore's is the client's (clients of :func:`~kinesis_spout.kinesis.client.make_client` have the lean one).
A test (tests/unit/tooling/test_house_rules.py) fails when a getter class is constructed anywhere else in the
library. Constructors only: no I/O here.
"""

from __future__ import annotations

from typing import Any, Callable

from kinesis_spout.config import ReadingSettings
from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.retrieval.fanout import FanOutGetter, WaitingFanOut
from kinesis_spout.kinesis.retrieval.polling import PacedGetter, ShardGetter
from kinesis_spout.kinesis.retrieval.protocol import ShardRetrieval
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Position

__all__ = ["END_PROBE_RECORDS", "GETTER_CLASSES", "paced_getter", "polling_getter", "shard_retrieval",
           "waiting_fan_out"]

#: The classes only this module constructs (the house rule's list).
GETTER_CLASSES = (ShardGetter, FanOutGetter, PacedGetter, WaitingFanOut)

#: Records a fan-out getter's end probe asks GetRecords for: one says whether anything is left after a position.
END_PROBE_RECORDS = 1


def polling_getter(client: Any, stream_name: str, shard_id: str, start: Position, reading: ReadingSettings, *,
                   per_call: int | None = None, hash_range: HashKeyRange | None = None) -> ShardGetter:
    """A GetRecords getter of ``shard_id`` from ``start``: ``per_call`` records per call at most (default
    ``reading.max_records_per_call``), KPL aggregates de-aggregated as ``reading.deaggregate`` says, user records
    outside ``hash_range`` dropped (None: none). Who calls: :func:`shard_retrieval`, and the Spark source's probes,
    replays and batch reads (GetRecords whatever ``retrieval`` says)."""
    return ShardGetter(client, stream_name, shard_id, start,
                       reading.max_records_per_call if per_call is None else per_call,
                       deaggregate=reading.deaggregate, hash_range=hash_range)


def _fan_out(client: Any, stream_name: str, shard_id: str, start: Position, reading: ReadingSettings,
             consumer_arn: str, hash_range: HashKeyRange | None, end_probe_s: float | None) -> FanOutGetter:
    """A fan-out getter whose end probe is a plain GetRecords getter of one record (no de-aggregation, nothing
    dropped: it only asks whether the shard has anything left after a position)."""
    def end_probe(position: Position) -> ShardRetrieval:
        return ShardGetter(client, stream_name, shard_id, position, END_PROBE_RECORDS)

    return FanOutGetter(client, stream_name, shard_id, start, consumer_arn, renew_s=reading.subscription_renewal_s,
                        deaggregate=reading.deaggregate, hash_range=hash_range, end_probe_s=end_probe_s,
                        end_probe=end_probe)


def shard_retrieval(client: Any, stream_name: str, shard_id: str, start: Position, reading: ReadingSettings, *,
                    consumer_arn: str | Callable[[], str] | None = None,
                    hash_range: HashKeyRange | None = None) -> ShardRetrieval:
    """The getter ``reading.retrieval`` chooses for ``shard_id`` from ``start``: polling (as
    :func:`polling_getter`), or enhanced fan-out through ``consumer_arn`` (the ARN, or a function giving it, called
    only for fan-out: registering the consumer is I/O), its subscriptions renewed every
    ``reading.subscription_renewal_s`` and a caught-up one asking at most every ``reading.shard_sync_interval_s``
    whether its shard was read to its end. Who calls: the spout (each shard it starts) and the Spark source's driver
    reads (each shard's cursor). Raises ``ConfigError`` for fan-out without a consumer."""
    if reading.retrieval == "fanout":
        arn = consumer_arn() if callable(consumer_arn) else consumer_arn
        if arn is None:
            raise ConfigError(f"reading {shard_id} of {stream_name!r}: retrieval='fanout' (ReadingSettings.retrieval, "
                              f"option 'retrieval') reads through an enhanced fan-out consumer, and none was "
                              f"registered for it; register one (ReadingSettings.consumer_name) or read with "
                              f"retrieval='polling'")
        return _fan_out(client, stream_name, shard_id, start, reading, arn, hash_range, reading.shard_sync_interval_s)
    return polling_getter(client, stream_name, shard_id, start, reading, hash_range=hash_range)


def paced_getter(getter: ShardGetter, interval_s: float, max_retries: int) -> PacedGetter:
    """``getter`` read at most every ``interval_s``, retriable errors tried again up to ``max_retries`` times in a
    row. Who calls: the Spark tasks that read one shard in a loop (replays, executor reads, batch reads)."""
    return PacedGetter(getter, interval_s, max_retries)


def waiting_fan_out(client: Any, stream_name: str, shard_id: str, start: Position, reading: ReadingSettings,
                    consumer_arn: str, *, max_retries: int, hash_range: HashKeyRange | None = None,
                    closed: bool = False) -> WaitingFanOut:
    """A fan-out getter of ``shard_id`` from ``start`` read by one task that waits for its events, retriable
    refusals tried again up to ``max_retries`` times in a row. On a ``closed`` shard a caught-up event with no
    record makes it ask GetRecords at once whether the shard was read to its end (an emulator that sends no
    ChildShards never ends it); an open shard's never does. Who calls: the Spark source's executor reads."""
    getter = _fan_out(client, stream_name, shard_id, start, reading, consumer_arn, hash_range,
                      0.0 if closed else None)
    return WaitingFanOut(getter, max_retries)
