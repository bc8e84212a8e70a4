"""The retrieval factory (kinesis_spout.kinesis.retrieval.factory): which getter the reading settings choose, and
that every setting the getter reads with reaches it.

Pure: the getters are made without I/O; the polling ones are read through a scripted botocore-shaped client (the
two calls GetRecords needs), the fan-out ones are looked at without subscribing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kinesis_spout.config import ReadingSettings
from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.retrieval.factory import (
    END_PROBE_RECORDS,
    paced_getter,
    polling_getter,
    shard_retrieval,
    waiting_fan_out,
)
from kinesis_spout.kinesis.retrieval.protocol import ShardRetrieval
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import LATEST, TRIM_HORIZON, after, at_timestamp
from tests.unit.kinesis.aggregates import NOW, aggregate

ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/app:1"
#: Every hash key below 2**127: an aggregate's user records keyed to both halves lose the upper half's.
LOWER_HALF = HashKeyRange(0, (1 << 127) - 1)


@dataclass
class ScriptedKinesis:
    """GetShardIterator and GetRecords as botocore returns them: one reply of ``records``, then the shard's end."""

    records: list[dict[str, Any]] = field(default_factory=list)
    iterator_calls: list[dict[str, Any]] = field(default_factory=list)
    limits: list[int] = field(default_factory=list)

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        self.iterator_calls.append(kwargs)
        return {"ShardIterator": "it-1"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803 - botocore's names
        self.limits.append(Limit)
        return {"Records": self.records, "MillisBehindLatest": 0}


def kpl(seq: str) -> dict[str, Any]:
    """One Kinesis record holding an aggregate of two user records, one per half of the hash key space."""
    blob = aggregate([("low", b"a", str(1 << 100)), ("high", b"b", str((1 << 127) + 5))])
    return {"SequenceNumber": seq, "Data": blob, "PartitionKey": "agg", "ApproximateArrivalTimestamp": NOW}


def reading(**changes: Any) -> ReadingSettings:
    return ReadingSettings(**changes)


def test_polling_settings_make_a_getter_that_is_polled_and_reads_with_them() -> None:
    client = ScriptedKinesis([kpl("100")])
    getter = shard_retrieval(client, "orders", "shardId-0", TRIM_HORIZON,
                             reading(max_records_per_call=250, deaggregate=True), consumer_arn=ARN,
                             hash_range=LOWER_HALF)
    assert isinstance(getter, ShardRetrieval)
    assert (getter.shard_id, getter.position, getter.pushed, getter.pending) == ("shardId-0", TRIM_HORIZON, False,
                                                                                True)
    result = getter.fetch()
    assert client.limits == [250]
    assert client.iterator_calls == [{"StreamName": "orders", "ShardId": "shardId-0",
                                      "ShardIteratorType": "TRIM_HORIZON"}]
    assert [(r.partition_key, r.data, r.sub_sequence_number) for r in result.records] == [("low", b"a", 0)]
    assert getter.foreign_user_records == 1 and getter.position == after("100")


def test_without_deaggregation_an_aggregate_is_one_record_and_nothing_is_dropped() -> None:
    client = ScriptedKinesis([kpl("100")])
    getter = polling_getter(client, "orders", "shardId-0", TRIM_HORIZON, reading(deaggregate=False))
    records = getter.fetch().records
    assert [(r.partition_key, r.sub_sequence_number) for r in records] == [("agg", None)]
    assert getter.foreign_user_records == 0 and client.limits == [10_000]


def test_a_polling_getter_asks_per_call_records_when_given_and_the_setting_otherwise() -> None:
    client = ScriptedKinesis()
    polling_getter(client, "orders", "shardId-0", TRIM_HORIZON, reading(max_records_per_call=70), per_call=3).fetch()
    polling_getter(client, "orders", "shardId-0", TRIM_HORIZON, reading(max_records_per_call=70)).fetch()
    assert client.limits == [3, 70]


def test_fanout_settings_make_a_pushed_getter_with_the_consumer_and_the_renewal_and_sync_intervals() -> None:
    client = ScriptedKinesis()
    getter = shard_retrieval(client, "orders", "shardId-1", LATEST,
                             reading(retrieval="fanout", subscription_renewal_s=42.0, shard_sync_interval_s=7.0),
                             consumer_arn=ARN, hash_range=LOWER_HALF)
    assert isinstance(getter, ShardRetrieval)
    assert getter.client is client and getter.stream_name == "orders"  # type: ignore[attr-defined]
    assert (getter.shard_id, getter.position, getter.pushed, getter.shard_end) == ("shardId-1", LATEST, True, False)
    assert getter.consumer_arn == ARN and getter.renew_s == 42.0 and getter.end_probe_s == 7.0  # type: ignore[attr-defined]
    assert getter.deaggregate is True and getter.hash_range == LOWER_HALF  # type: ignore[attr-defined]
    getter.close()
    plain = shard_retrieval(ScriptedKinesis(), "orders", "shardId-1", LATEST, reading(retrieval="fanout",
                                                                                     deaggregate=False),
                            consumer_arn=ARN)
    assert plain.deaggregate is False and plain.hash_range is None  # type: ignore[attr-defined]


def test_the_consumer_is_asked_for_only_when_the_settings_say_fanout() -> None:
    asked: list[str] = []

    def consumer() -> str:
        asked.append("registered")
        return ARN

    shard_retrieval(ScriptedKinesis(), "orders", "shardId-0", TRIM_HORIZON, reading(), consumer_arn=consumer)
    assert asked == []
    getter = shard_retrieval(ScriptedKinesis(), "orders", "shardId-0", TRIM_HORIZON, reading(retrieval="fanout"),
                             consumer_arn=consumer)
    assert asked == ["registered"] and getter.consumer_arn == ARN  # type: ignore[attr-defined]


def test_fanout_without_a_consumer_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"retrieval='fanout'.*ReadingSettings.retrieval.*consumer_name"):
        shard_retrieval(ScriptedKinesis(), "orders", "shardId-0", TRIM_HORIZON, reading(retrieval="fanout"))


def test_a_fan_out_getters_end_probe_reads_one_plain_record_from_the_position_it_is_given() -> None:
    client = ScriptedKinesis([kpl("300")])
    getter = shard_retrieval(client, "orders", "shardId-2", TRIM_HORIZON, reading(retrieval="fanout"),
                             consumer_arn=ARN, hash_range=LOWER_HALF)
    probe = getter.end_probe(after("200"))  # type: ignore[attr-defined]
    assert (probe.shard_id, probe.position) == ("shardId-2", after("200"))
    result = probe.fetch()
    assert client.limits == [END_PROBE_RECORDS] == [1]
    assert client.iterator_calls[0]["StreamName"] == "orders"
    assert [r.partition_key for r in result.records] == ["agg"]  # not de-aggregated, nothing dropped


@pytest.mark.parametrize(("closed", "end_probe_s"), [(True, 0.0), (False, None), (None, None)])
def test_a_waiting_fan_out_probes_a_closed_shard_at_once_and_an_open_one_never(closed: bool | None,
                                                                               end_probe_s: float | None) -> None:
    client = ScriptedKinesis()
    shut = {} if closed is None else {"closed": closed}  # None: the default, an open shard
    waiting = waiting_fan_out(client, "orders", "shardId-3", at_timestamp(NOW),
                              reading(retrieval="fanout", subscription_renewal_s=30.0), ARN, max_retries=4,
                              hash_range=LOWER_HALF, **shut)
    getter = waiting.getter
    assert (getter.client, getter.stream_name, getter.shard_id, getter.position, getter.consumer_arn,
            getter.renew_s) == (client, "orders", "shardId-3", at_timestamp(NOW), ARN, 30.0)
    assert getter.end_probe_s == end_probe_s and getter.end_probe is not None
    assert getter.deaggregate is True and getter.hash_range == LOWER_HALF
    waiting.close()


def test_a_paced_getter_keeps_its_getter_pace_and_retries() -> None:
    inner = polling_getter(ScriptedKinesis(), "orders", "shardId-0", TRIM_HORIZON, reading())
    paced = paced_getter(inner, 0.25, 9)
    assert (paced.getter, paced.interval_s, paced.max_retries) == (inner, 0.25, 9)
