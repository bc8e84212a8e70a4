"""The shard getter: the start positions it refuses and takes, LATEST pinned to a time, AT_TIMESTAMP reads, the end
of a closed shard, expired iterators counted, de-aggregation, a paced getter's interval, and errors that say what
was read. kinesalite (real sequence numbers, closed shards end) and the fault-injecting proxy through the
fixtures."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.aggregation import MAGIC
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import (
    LATEST_MARGIN,
    FetchResult,
    PacedGetter,
    ShardGetter,
)
from kinesis_spout.positions import LATEST, SHARD_END, TRIM_HORIZON, Kind, Position, after, at_timestamp, iterator_args
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def client_of(endpoint: KinesisEndpoint) -> Any:
    return make_client(endpoint.region, endpoint.endpoint_url, read_timeout_s=10.0)


def test_start_positions_refused_and_accepted() -> None:
    with pytest.raises(ValueError, match="AFTER needs a key"):
        Position(Kind.AFTER)
    with pytest.raises(ValueError, match="a timestamp belongs to AT_TIMESTAMP"):
        Position(Kind.AT_TIMESTAMP)
    first = iterator_args(at_timestamp(T0))
    assert first is not None and first.describe() == f"AT_TIMESTAMP {T0.isoformat()}"
    inside = iterator_args(after("5", 0))
    assert inside is not None and inside.describe() == "AT_SEQUENCE_NUMBER 5"
    ended = ShardGetter(None, "stream", "shardId-000000000000", SHARD_END)  # no client: nothing may be called
    assert ended.shard_end and ended.fetch() == FetchResult([], 0, True, 0)


def test_a_new_getter_reads_10000_records_a_call_and_has_not_ended() -> None:
    getter = ShardGetter(None, "stream", "shardId-000000000000", TRIM_HORIZON)
    assert getter.max_records == 10_000 and getter.shard_end is False and getter.expired_iterators == 0


def test_latest_is_pinned_to_the_time_its_iterator_was_taken_less_the_margin(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    shard = kinesalite.shard_ids(stream)[0]
    latest = ShardGetter(client_of(kinesalite), stream, shard, LATEST)
    before = datetime.now(timezone.utc)
    latest.prepare()
    after = datetime.now(timezone.utc)
    assert latest.position.kind is Kind.AT_TIMESTAMP
    assert latest.position.timestamp is not None and latest.position.timestamp.tzinfo is not None
    assert before - LATEST_MARGIN <= latest.position.timestamp <= after - LATEST_MARGIN
    horizon = ShardGetter(client_of(kinesalite), stream, shard, TRIM_HORIZON)
    horizon.prepare()
    assert horizon.position == TRIM_HORIZON


def test_at_timestamp_reads_from_the_first_record_that_arrived_then(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"early-{i}".encode() for i in range(3)], ["pk"] * 3)
    shard = placed[0][0]
    everything = ShardGetter(client_of(kinesalite), stream, shard, TRIM_HORIZON).fetch().records
    stamp = everything[-1].approximate_arrival_timestamp
    assert stamp is not None
    later = kinesalite.put(stream, [b"late"], ["pk"])
    at = ShardGetter(client_of(kinesalite), stream, shard, at_timestamp(stamp + timedelta(
        milliseconds=1)))
    got = at.fetch().records
    assert [r.sequence_number for r in got] == [later[0][1]]


def test_a_closed_shard_ends_and_stays_ended(kinesalite: KinesisEndpoint) -> None:
    client = client_of(kinesalite)
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(4)], ["pk"] * 4)
    parent = placed[0][0]
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    getter = ShardGetter(client, stream, parent, TRIM_HORIZON)
    results: list[FetchResult] = []
    for _ in range(20):
        results.append(getter.fetch())
        if results[-1].shard_end:
            break
    assert results[-1].shard_end is True and getter.shard_end is True
    assert all(r.shard_end is False for r in results[:-1])
    assert all(isinstance(r.millis_behind_latest, int) for r in results)
    assert [r.sequence_number for res in results for r in res.records] == [seq for _, seq in placed]
    assert getter.fetch() == FetchResult([], 0, True, 0)


def test_each_expired_iterator_is_counted_and_a_second_in_a_row_is_an_error_naming_the_shard(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    placed = kinesis_backend.put(stream, [f"r{i}".encode() for i in range(6)], ["pk"] * 6)
    shard = placed[0][0]
    getter = ShardGetter(client_of(through), stream, shard, TRIM_HORIZON, max_records=2)
    got = list(getter.fetch().records)
    for _ in range(2):
        proxy.inject("GetRecords", "ExpiredIteratorException", message="Iterator expired")
        got += getter.fetch().records
    assert getter.expired_iterators == 2
    assert [r.sequence_number for r in got] == [seq for _, seq in placed]
    proxy.inject("GetRecords", "ExpiredIteratorException", times=2, message="Iterator expired")
    with pytest.raises(KinesisError) as exc:
        getter.fetch()
    assert f"reading {shard} of {stream!r}" in str(exc.value)


def test_an_iterator_refused_is_an_error_naming_the_shard_and_the_position(kinesalite: KinesisEndpoint) -> None:
    getter = ShardGetter(client_of(kinesalite), "no-such-stream", "shardId-000000000000",
                         after("49590338271490256608559692538361571"))
    with pytest.raises(KinesisError) as exc:
        getter.fetch()
    assert ("getting a shard iterator for shardId-000000000000 of 'no-such-stream' at AFTER_SEQUENCE_NUMBER "
            "49590338271490256608559692538361571") in str(exc.value)


def test_prepare_takes_one_iterator_however_often_it_is_called(fault_proxy: tuple[FaultProxy, KinesisEndpoint],
                                                               kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    shard = kinesis_backend.shard_ids(stream)[0]
    getter = ShardGetter(client_of(through), stream, shard, TRIM_HORIZON)
    getter.prepare()
    getter.prepare()
    assert proxy.calls["GetShardIterator"] == 1


def fetch_records(getter: ShardGetter, count: int) -> list[Record]:
    """The records of ``getter``'s next replies until ``count`` came (at most 20 calls)."""
    out: list[Record] = []
    for _ in range(20):
        out += getter.fetch().records
        if len(out) >= count:
            break
    return out


def test_a_getter_that_deaggregates_hands_out_each_user_record_and_keeps_a_corrupt_aggregate_whole(
        kinesalite: KinesisEndpoint) -> None:
    from ..support import aggregate

    stream = kinesalite.create_stream()
    users = [("k0", b"zero"), ("k1", b"one"), ("k2", b"two")]
    _, blob = aggregate(users)
    corrupt = MAGIC + b"not an aggregate: no message, no digest"
    placed = kinesalite.put(stream, [blob, b"plain", corrupt, blob, corrupt],
                            ["agg-1", "plain", "corrupt", "agg-2", "corrupt"])
    shard, seqs = placed[0][0], [seq for _, seq in placed]
    getter = ShardGetter(client_of(kinesalite), stream, shard, TRIM_HORIZON, deaggregate=True)
    records = fetch_records(getter, 9)

    def user(seq: str) -> list[tuple[object, ...]]:
        return [(shard, seq, i, pk, data, SequenceKey(int(seq), i), 3) for i, (pk, data) in enumerate(users)]

    assert [(r.shard_id, r.sequence_number, r.sub_sequence_number, r.partition_key, r.data, r.key, r.aggregated)
            for r in records] == user(seqs[0]) + [
        (shard, seqs[1], None, "plain", b"plain", SequenceKey(int(seqs[1]), 0), 0),
        (shard, seqs[2], None, "corrupt", corrupt, SequenceKey(int(seqs[2]), 0), 0)] + user(seqs[3]) + [
        (shard, seqs[4], None, "corrupt", corrupt, SequenceKey(int(seqs[4]), 0), 0)]
    assert all(r.approximate_arrival_timestamp is not None for r in records)
    assert getter.corrupt_aggregates == 2
    whole = ShardGetter(client_of(kinesalite), stream, shard, TRIM_HORIZON)  # the default
    assert whole.deaggregate is False and whole.corrupt_aggregates == 0
    assert [(r.sequence_number, r.sub_sequence_number, r.data, r.aggregated) for r in fetch_records(whole, 5)] == [
        (seqs[0], None, blob, 0), (seqs[1], None, b"plain", 0), (seqs[2], None, corrupt, 0), (seqs[3], None, blob, 0),
        (seqs[4], None, corrupt, 0)]
    assert whole.corrupt_aggregates == 0


def test_a_paced_getter_waits_its_interval_between_calls(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"a"], ["pk"])
    getter = ShardGetter(client_of(kinesalite), stream, placed[0][0], TRIM_HORIZON)
    paced = PacedGetter(getter, 0.4, max_retries=3)
    started = time.monotonic()
    first = paced.fetch()  # at once
    second = paced.fetch()  # not before the interval is up
    elapsed = time.monotonic() - started
    assert [r.data for r in first.records] == [b"a"] and second.records == []
    assert elapsed >= 0.4, f"two calls {elapsed:.3f} s apart with an interval of 0.4 s"


def test_a_connection_lost_while_reading_is_a_retriable_error_naming_the_shard_and_nothing_is_skipped(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    from botocore.exceptions import ConnectionClosedError

    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    placed = kinesis_backend.put(stream, [b"a", b"b"], ["pk", "pk"])
    shard = placed[0][0]
    getter = ShardGetter(client_of(through), stream, shard, TRIM_HORIZON)
    getter.prepare()
    proxy.drop_connections("GetRecords")
    with pytest.raises(KinesisError) as exc:
        getter.fetch()
    assert exc.value.retriable is True and exc.value.code == "ConnectionClosedError"
    assert str(exc.value).startswith(f"reading {shard} of {stream!r}: "), str(exc.value)
    assert isinstance(exc.value.__cause__, ConnectionClosedError)
    assert [r.sequence_number for r in fetch_records(getter, 2)] == [seq for _, seq in placed]
