"""Enhanced fan-out reading (retrieval="fanout") end to end on kinesis-local, beside polling: delivery with stable
message ids, retries and dead letters, resume from the checkpoint, subscriptions that end mid-stream (renewals,
cut connections) losing nothing, backpressure, and the errors of endpoints without fan-out."""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, RetryBackoff, SpoutConfig
from kinesis_spout.errors import ConfigError, KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.consumers import ensure_consumer
from kinesis_spout.kinesis.retrieval.fanout import Subscription
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

from ..support import TcpCutter, aggregate

RETRIEVALS = ["polling", "fanout"]


def make_config(endpoint: KinesisEndpoint, stream: str, retrieval: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="tests", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        retrieval=retrieval, retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    options.update(overrides)
    return SpoutConfig(**options)


def stored(store: MemoryCheckpointStore) -> dict[str, str]:
    return {shard: cp.sequence_number for shard, cp in store.list().items()}


def last_by_shard(placed: list[tuple[str, str]]) -> dict[str, str]:
    last: dict[str, int] = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    return {shard: str(seq) for shard, seq in last.items()}


@pytest.mark.parametrize("retrieval", RETRIEVALS)
def test_every_record_delivered_once_in_shard_order(kinesis_local: KinesisEndpoint, retrieval: str) -> None:
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"record {i}".encode() for i in range(120)])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesis_local, stream, retrieval), store) as spout:
        got = drain(spout, 120)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
        assert spout.flush_checkpoints()
    ids = [t.message_id for t in got]
    assert sorted(ids) == sorted(f"{shard}:{seq}" for shard, seq in placed)  # stable ids, each once
    per_shard: dict[str, list[int]] = defaultdict(list)
    for t in got:
        per_shard[t.record.shard_id].append(int(t.record.sequence_number))
    assert all(seqs == sorted(seqs) for seqs in per_shard.values())
    assert stored(store) == last_by_shard(placed)


@pytest.mark.parametrize("retrieval", RETRIEVALS)
def test_failed_records_are_retried_then_dead_lettered(kinesis_local: KinesisEndpoint, retrieval: str) -> None:
    stream = kinesis_local.create_stream(shards=1)
    records = [b"bad" if i == 3 else f"ok-{i}".encode() for i in range(10)]
    placed = kinesis_local.put(stream, records)
    dead: list[str] = []
    config = make_config(kinesis_local, stream, retrieval, retry_limit=2,
                         dead_letter=lambda record, reason: dead.append(record.message_id))
    attempts: dict[str, list[int]] = defaultdict(list)
    store = MemoryCheckpointStore()
    with KinesisSpout(config, store) as spout:
        assert wait_until(lambda: _step(spout, attempts) or bool(dead), 20.0, interval_s=0.0)
        spout.flush_checkpoints()
    bad = f"{placed[3][0]}:{placed[3][1]}"
    assert dead == [bad] and attempts[bad] == [1, 2, 3]
    assert stored(store) == last_by_shard(placed)


def _step(spout: KinesisSpout, attempts: dict[str, list[int]]) -> bool:
    for tup in spout.next_batch(max_records=50, timeout_s=0.2):
        attempts[tup.message_id].append(tup.attempt)
        (spout.fail if tup.record.data == b"bad" else spout.ack)(tup.message_id)
    return False


@pytest.mark.parametrize("retrieval", RETRIEVALS)
def test_a_restart_resumes_after_the_checkpoint(kinesis_local: KinesisEndpoint, retrieval: str) -> None:
    stream = kinesis_local.create_stream(shards=1)
    kinesis_local.put(stream, [f"r{i}".encode() for i in range(10)])
    store = MemoryCheckpointStore()
    config = make_config(kinesis_local, stream, retrieval)
    with KinesisSpout(config, store) as spout:
        got = drain(spout, 10, ack=False)
        for tup in got[:4] + got[6:8]:  # 4 and 5 never acked: the checkpoint stays at 3
            spout.ack(tup.message_id)
    kinesis_local.put(stream, [b"r10"])
    with KinesisSpout(config, store) as spout:
        again = drain(spout, 7)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
    assert [t.record.data for t in again] == [f"r{i}".encode() for i in range(4, 11)]
    assert [t.message_id for t in again[:6]] == [t.message_id for t in got[4:]]  # the same ids again


def test_fan_out_metrics_count_subscriptions_and_lag(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=2)
    kinesis_local.put(stream, [f"m{i}".encode() for i in range(10)])
    with KinesisSpout(make_config(kinesis_local, stream, "fanout"), MemoryCheckpointStore()) as spout:
        assert len(drain(spout, 10)) == 10
        shards = spout.metrics()
    assert len(shards) == 2
    assert all(s.subscriptions >= 1 and s.millis_behind_latest is not None for s in shards)
    with KinesisSpout(make_config(kinesis_local, stream, "polling"), MemoryCheckpointStore()) as spout:
        assert len(drain(spout, 10)) == 10
        assert all(s.subscriptions == 0 for s in spout.metrics())


@pytest.mark.slow
def test_renewed_subscriptions_under_a_live_producer_lose_and_repeat_nothing(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    config = make_config(kinesis_local, stream, "fanout", subscription_renewal_s=2.0)
    producer = Producer(kinesis_local, stream, 100, pace_s=0.1)  # puts for 10 s: through several renewals
    got: list[Any] = []
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        producer.start()

        def renewed_and_read() -> bool:
            got.extend(drain(spout, 100 - len(got), timeout_s=0.3))
            return len(got) >= 100 and spout.metrics()[0].subscription_renewals >= 2

        assert wait_until(renewed_and_read, 60.0, interval_s=0.0), (len(got), spout.metrics())
        producer.join()
        assert spout.next_batch(max_records=10, timeout_s=1.5) == []
        # the spout drops records delivered twice; a renewal that starts too early shows as records read again
        assert spout.metrics()[0].records_read == 100
    assert [t.message_id for t in got] == [f"{s}:{q}" for s, q in producer.placed]


def test_a_cut_connection_is_resubscribed_from_the_last_record_delivered(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    placed = kinesis_local.put(stream, [f"c{i}".encode() for i in range(12)])
    with TcpCutter(kinesis_local.endpoint_url) as cutter:
        config = make_config(kinesis_local, stream, "fanout", endpoint_url=cutter.endpoint_url)
        with KinesisSpout(config, MemoryCheckpointStore()) as spout:
            got = drain(spout, 12)
            assert cutter.cut() >= 1  # the subscription's streamed reply ends mid-stream
            placed += kinesis_local.put(stream, [f"d{i}".encode() for i in range(28)])
            got += drain(spout, 28)  # read by a new subscription only
            shard = spout.metrics()[0]
            assert shard.subscriptions >= 2 and shard.getrecords_retried_errors >= 1
            assert spout.next_batch(max_records=10, timeout_s=2.0) == []  # its next events bring nothing again
            assert spout.metrics()[0].records_read == 40
    assert [t.message_id for t in got] == [f"{s}:{q}" for s, q in placed]


def test_a_full_buffer_stops_taking_events_without_losing_any(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    placed = kinesis_local.put(stream, [f"b{i}".encode() for i in range(10)])
    config = make_config(kinesis_local, stream, "fanout", prefetch_records=4)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        assert wait_until(lambda: spout.metrics()[0].records_read == 10, 15.0)  # one event: the buffer is full
        placed += kinesis_local.put(stream, [f"c{i}".encode() for i in range(10)])
        # kinesis-local pushes an event a second: while nothing is taken, none is taken from the subscription
        assert not wait_until(lambda: spout.metrics()[0].records_read > 10, 2.5)
        assert spout.metrics()[0].buffered == 10
        got = drain(spout, 20)
        assert spout.next_batch(max_records=10, timeout_s=1.5) == []
    assert [t.message_id for t in got] == [f"{s}:{q}" for s, q in placed]


def test_latest_reads_what_is_put_after_open(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    kinesis_local.put(stream, [b"before"])
    config = make_config(kinesis_local, stream, "fanout", initial_position=InitialPosition.LATEST)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        after = kinesis_local.put(stream, [b"after-1", b"after-2"])
        got = drain(spout, 2)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
    assert [t.message_id for t in got] == [f"{s}:{q}" for s, q in after]


def test_fan_out_on_an_endpoint_without_it_is_refused_at_open(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    spout = KinesisSpout(make_config(kinesalite, stream, "fanout"), MemoryCheckpointStore())
    with pytest.raises(KinesisError, match="does not support enhanced fan-out.*retrieval='polling'"):
        spout.open()
    spout.close()


def test_an_unknown_retrieval_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="retrieval must be one of 'polling', 'fanout'"):
        SpoutConfig(stream_name="s", app_name="a", retrieval="push")
    with pytest.raises(ConfigError, match="option 'retrieval'"):
        SpoutConfig.from_options({"streamName": "s", "appName": "a", "retrieval": "push"})
    assert SpoutConfig.from_options({"streamName": "s", "appName": "a", "retrieval": "FanOut",
                                     "consumerName": "billing"}).consumer_name == "billing"


class Producer(threading.Thread):
    """Puts ``count`` records one at a time (a live producer), ``pace_s`` apart, over ``keys`` partition keys in turn
    (data ``key-K:I``); ``placed`` holds where each went, in order."""

    def __init__(self, endpoint: KinesisEndpoint, stream: str, count: int, keys: int = 1, pace_s: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.endpoint, self.stream, self.count, self.keys, self.pace_s = endpoint, stream, count, keys, pace_s
        self.placed: list[tuple[str, str]] = []

    def run(self) -> None:
        for i in range(self.count):
            key = f"key-{i % self.keys}"
            self.placed += self.endpoint.put(self.stream, [f"{key}:{i}".encode()], [key])
            time.sleep(self.pace_s)  # the producer's pace, not synchronisation


def test_a_live_split_under_fan_out_keeps_each_keys_order(kinesis_local: KinesisEndpoint) -> None:
    """A shard split while a producer puts: the parent is read to its end (kinesis-local sends no ChildShards: the
    end is found by GetRecords) before its children, so each key's records come in the order they were put, once."""
    stream = kinesis_local.create_stream(shards=1)
    parent = kinesis_local.shard_ids(stream)[0]
    config = make_config(kinesis_local, stream, "fanout", shard_sync_interval_s=0.5)
    producer = Producer(kinesis_local, stream, 96, keys=8)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        producer.start()
        got = drain(spout, 24)
        kinesis_local.client().split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
        got += drain(spout, 72, timeout_s=40)
        producer.join()
        assert spout.next_batch(max_records=10, timeout_s=1.0) == []
    assert sorted(t.message_id for t in got) == sorted(f"{s}:{q}" for s, q in producer.placed)
    per_key: dict[str, list[int]] = defaultdict(list)
    for t in got:
        key, index = t.record.data.decode().split(":")
        per_key[key].append(int(index))
    assert len(per_key) == 8 and all(indexes == sorted(indexes) for indexes in per_key.values())
    assert {t.record.shard_id for t in got} - {parent}, "the children were read"


def test_a_shard_still_held_by_another_subscription_is_retried_until_it_ends(kinesis_local: KinesisEndpoint,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """As at a hand-over, whose previous owner's subscription lasts a little longer: ResourceInUse is retried with
    backoff (and said: at DEBUG for the first tries of a run, then as a WARNING), never answered by polling instead;
    once the other subscription ends, everything comes."""
    caplog.set_level(logging.DEBUG, logger="kinesis_spout")
    stream = kinesis_local.create_stream(shards=1)
    placed = kinesis_local.put(stream, [f"h{i}".encode() for i in range(10)])
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    consumer = ensure_consumer(client, stream, "tests")
    holder = Subscription(client, consumer.arn, placed[0][0], TRIM_HORIZON, renew_s=300.0, on_pending=lambda: None)
    holder.open()
    try:
        with KinesisSpout(make_config(kinesis_local, stream, "fanout"), MemoryCheckpointStore()) as spout:
            assert wait_until(lambda: spout.metrics()[0].getrecords_retried_errors >= 2, 15.0)
            assert spout.metrics()[0].records_read == 0
            assert "another subscription of this consumer still reads the shard" in caplog.text
            holder.close()
            got = drain(spout, 10)
    finally:
        holder.close()
    assert [t.message_id for t in got] == [f"{s}:{q}" for s, q in placed]


def test_a_checkpoint_inside_a_kpl_aggregate_resumes_after_its_user_record(kinesis_local: KinesisEndpoint) -> None:
    """The subscription starts AT_SEQUENCE_NUMBER the aggregate and the user records up to the checkpoint are
    skipped, as polling does."""
    users = [(f"user-{i % 7}", f"event {i}".encode()) for i in range(20)]
    stream = kinesis_local.create_stream(shards=1)
    pairs = [aggregate(users[:10]), aggregate(users[10:])]
    placed = kinesis_local.put(stream, [d for _, d in pairs], partition_keys=[k for k, _ in pairs])
    store = MemoryCheckpointStore()
    config = make_config(kinesis_local, stream, "fanout")
    with KinesisSpout(config, store) as spout:
        first = drain(spout, 10, ack=False)
        spout.ack_many(t.message_id for t in first[:5])
        assert spout.flush_checkpoints()
    stored_cp = store.load(placed[0][0])
    assert (stored_cp.sequence_number, stored_cp.sub_sequence_number) == (placed[0][1], 4)
    with KinesisSpout(config, store) as spout:
        rest = drain(spout, 15)
        assert spout.next_batch(max_records=10, timeout_s=1.5) == []
    assert [t.record.data for t in rest] == [d for _, d in users[5:20]]
    assert [t.record.sub_sequence_number for t in rest] == list(range(5, 10)) + list(range(10))
