"""KinesisSpout end to end on real servers: moto and kinesalite (kinesis_backend), and ZooKeeper. Also shards the
spout finds finished when it adds shards: the others of the same listing are still read at once, and a finished
shard is looked up once, not at every round of the shard sync."""

from __future__ import annotations

import collections
import json
import time
from collections import defaultdict
from typing import Any

import pytest

from kinesis_spout import (
    InitialPosition,
    JsonScheme,
    KinesisSpout,
    MemoryCheckpointStore,
    RetryBackoff,
    SpoutConfig,
    StreamNotFoundError,
)
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain


def make_config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="tests", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0)
    options.update(overrides)
    return SpoutConfig(**options)


def last_sequence_by_shard(placed: list[tuple[str, str]]) -> dict[str, str]:
    last: dict[str, int] = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    return {shard: str(seq) for shard, seq in last.items()}


def test_every_record_delivered_once_when_all_acked(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=4)
    placed = kinesis_backend.put(stream, [f"record {i}".encode() for i in range(400)])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesis_backend, stream), store) as spout:
        got = drain(spout, 400)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
        assert spout.flush_checkpoints()
    ids = [t.message_id for t in got]
    assert len(ids) == 400 and len(set(ids)) == 400
    assert set(ids) == {f"{shard}:{seq}" for shard, seq in placed}
    assert {t.record.data for t in got} == {f"record {i}".encode() for i in range(400)}
    stored = {shard: cp.sequence_number for shard, cp in store.list().items()}
    assert stored == last_sequence_by_shard(placed)
    # within a shard, records come in sequence order (as ints: moto's "9" < "10")
    per_shard: dict[str, list[int]] = defaultdict(list)
    for t in got:
        per_shard[t.record.shard_id].append(int(t.record.sequence_number))
    assert all(seqs == sorted(seqs) for seqs in per_shard.values())


def test_failed_records_are_retried_up_to_the_limit_then_dead_lettered(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=2)
    records = [b"bad-1" if i == 3 else b"bad-2" if i == 11 else f"ok-{i}".encode() for i in range(20)]
    placed = kinesis_backend.put(stream, records)
    dead: list[tuple[str, str]] = []
    config = make_config(kinesis_backend, stream, retry_limit=2,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05),
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    attempts: dict[str, list[int]] = defaultdict(list)
    store = MemoryCheckpointStore()
    with KinesisSpout(config, store) as spout:
        deadline = time.monotonic() + 20
        while len(dead) < 2 and time.monotonic() < deadline:
            for tup in spout.next_batch(max_records=50, timeout_s=0.2):
                attempts[tup.message_id].append(tup.attempt)
                if tup.record.data.startswith(b"bad"):
                    spout.fail(tup.message_id)
                else:
                    spout.ack(tup.message_id)
        spout.flush_checkpoints()
    bad_ids = {f"{shard}:{seq}" for (shard, seq), data in zip(placed, records) if data.startswith(b"bad")}
    assert {mid for mid, _ in dead} == bad_ids
    assert all("attempt 3 of 3" in reason for _, reason in dead)
    for mid in bad_ids:
        assert attempts[mid] == [1, 2, 3]  # same message id, attempt grows, retry_limit=2 retries
    assert all(a == [1] for mid, a in attempts.items() if mid not in bad_ids)
    stored = {shard: cp.sequence_number for shard, cp in store.list().items()}
    assert stored == last_sequence_by_shard(placed)  # dead letters count as done


def test_restart_resumes_after_the_checkpoint(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=2)
    first = kinesis_backend.put(stream, [f"a{i}".encode() for i in range(60)])
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream)
    with KinesisSpout(config, store) as spout:
        assert len(drain(spout, 60)) == 60
    second = kinesis_backend.put(stream, [f"b{i}".encode() for i in range(30)])
    with KinesisSpout(config, store) as spout:
        got = drain(spout, 30)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
    assert sorted(t.record.data for t in got) == sorted(f"b{i}".encode() for i in range(30))
    assert {t.message_id for t in got} == {f"{s}:{q}" for s, q in second}
    assert not {t.message_id for t in got} & {f"{s}:{q}" for s, q in first}


def test_unacked_records_are_replayed_after_restart(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    kinesis_backend.put(stream, [f"r{i}".encode() for i in range(10)])
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream)
    with KinesisSpout(config, store) as spout:
        got = drain(spout, 10, ack=False)
        for tup in got[:4] + got[6:8]:  # 0-3 and 6-7 acked; 4 and 5 pending: the checkpoint stops at 3
            spout.ack(tup.message_id)
    assert store.load(got[0].record.shard_id).sequence_number == got[3].record.sequence_number
    with KinesisSpout(config, store) as spout:
        again = drain(spout, 6)
    assert [t.record.data for t in again] == [f"r{i}".encode() for i in range(4, 10)]


def test_idle_shards_cost_one_call_per_backoff_and_do_not_slow_the_busy_one(kinesis_backend: KinesisEndpoint
                                                                           ) -> None:
    stream = kinesis_backend.create_stream(shards=10)
    placed = kinesis_backend.put(stream, [f"x{i}".encode() for i in range(300)], partition_keys=["same"] * 300)
    busy = placed[0][0]
    config = make_config(kinesis_backend, stream, empty_record_backoff_s=1.0, max_records_per_call=100)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        started = time.monotonic()
        got = drain(spout, 300)
        elapsed = time.monotonic() - started
        calls = {m.shard_id: m.getrecords_calls for m in spout.metrics()}
    assert len(got) == 300 and {t.record.shard_id for t in got} == {busy}
    assert len(calls) == 10
    for shard_id, n in calls.items():
        if shard_id != busy:
            assert n <= elapsed / 1.0 + 2, (shard_id, n, elapsed)
    # 300 records at 100 per call need 3 calls, at most 5 calls a second: the idle shards do not add waits
    assert calls[busy] >= 3


def test_closed_shard_is_read_to_its_end_and_marked_finished(kinesalite: KinesisEndpoint) -> None:
    """kinesalite ends closed shards (moto never does); children of the split start at their beginning."""
    stream = kinesalite.create_stream(shards=1)
    client = kinesalite.client()
    parent = kinesalite.shard_ids(stream)[0]
    before = kinesalite.put(stream, [f"p{i}".encode() for i in range(40)])
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    from kinesis_spout.testing.kinesis import wait_for_stream

    wait_for_stream(client, stream)
    after = kinesalite.put(stream, [f"c{i}".encode() for i in range(40)])
    assert {s for s, _ in after}.isdisjoint({parent})
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got = drain(spout, 80)
        assert wait_until(lambda: (spout.next_tuple(), store.load(parent))[1] is not None
                          and store.load(parent).shard_end, 10)
        finished = {m.shard_id for m in spout.metrics() if m.finished}
    assert {t.record.data for t in got} == {f"p{i}".encode() for i in range(40)} | {f"c{i}".encode() for i in range(40)}
    assert finished == {parent}
    assert store.load(parent).sequence_number == last_sequence_by_shard(before)[parent]
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        assert parent not in spout.shard_ids  # a finished shard is not read again


def test_missing_stream_is_a_clear_error(kinesis_backend: KinesisEndpoint) -> None:
    spout = KinesisSpout(make_config(kinesis_backend, "no-such-stream"), MemoryCheckpointStore())
    with pytest.raises(StreamNotFoundError, match="'no-such-stream' not found: create it"):
        spout.open()
    spout.close()


def test_an_open_that_failed_closed_the_store_it_opened_and_a_later_open_reads_the_stream(
        kinesalite: KinesisEndpoint) -> None:
    store = MemoryCheckpointStore()
    name = kinesalite.unique_stream_name()
    spout = KinesisSpout(make_config(kinesalite, name), store)
    with pytest.raises(StreamNotFoundError, match=f"'{name}' not found"):
        spout.open()
    assert store.closed, "the store the failed open() opened was left open"
    assert (spout.shard_ids, spout.checkpoint_writes, spout.checkpoint_errors) == ([], 0, None)
    kinesalite.create_stream(name)
    placed = kinesalite.put(name, [f"r{i}".encode() for i in range(5)])
    try:
        assert spout.open() is spout and not store.closed
        got = drain(spout, 5)
        assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in placed)
        assert spout.flush_checkpoints()
    finally:
        spout.close()
    assert store.closed
    assert store.load(placed[0][0]).sequence_number == last_sequence_by_shard(placed)[placed[0][0]]  # type: ignore[union-attr]


def test_poison_records_go_to_the_dead_letter_handler_and_the_shard_moves_on(kinesis_backend: KinesisEndpoint
                                                                            ) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    placed = kinesis_backend.put(stream, [b'{"n": 1}', b"{not json", b'{"n": 3}'])
    dead: list[tuple[str, str]] = []
    config = make_config(kinesis_backend, stream, scheme=JsonScheme(),
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    store = MemoryCheckpointStore()
    with KinesisSpout(config, store) as spout:
        got = drain(spout, 2)
        spout.flush_checkpoints()
        assert spout.poison_records == 1
    assert [t.values[1] for t in got] == [{"n": 1}, {"n": 3}]
    assert dead == [(f"{placed[1][0]}:{placed[1][1]}", dead[0][1])] and "not valid JSON" in dead[0][1]
    assert store.load(placed[0][0]).sequence_number == placed[2][1]


def test_unreliable_mode_acks_on_emit(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    placed = kinesis_backend.put(stream, [b"a", b"b", b"c"])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesis_backend, stream, reliable=False), store) as spout:
        got = drain(spout, 3, ack=False)
        spout.flush_checkpoints()
    assert len(got) == 3
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]


def test_backpressure_caps_inflight_but_lets_retries_out(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    kinesis_backend.put(stream, [f"r{i}".encode() for i in range(20)])
    config = make_config(kinesis_backend, stream, max_inflight_records=5,
                         retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = drain(spout, 5, ack=False)
        assert [t.record.data for t in first] == [f"r{i}".encode() for i in range(5)]
        assert spout.next_batch(max_records=5, timeout_s=0.5) == []  # at the limit: nothing new
        spout.fail(first[0].message_id)
        retry = spout.next_batch(max_records=5, timeout_s=1.0)
        assert [(t.message_id, t.attempt) for t in retry] == [(first[0].message_id, 2)]
        for tup in first:
            spout.ack(tup.message_id)
        rest = drain(spout, 15)
    assert [t.record.data for t in rest] == [f"r{i}".encode() for i in range(5, 20)]


def test_records_neither_acked_nor_failed_time_out_and_are_emitted_again(kinesis_backend: KinesisEndpoint
                                                                        ) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    kinesis_backend.put(stream, [b"slow"])
    config = make_config(kinesis_backend, stream, message_timeout_s=0.3,
                         retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = drain(spout, 1, ack=False)
        again = drain(spout, 1, ack=False, timeout_s=5)
        assert spout.metrics()[0].inflight == 1
    assert [(t.message_id, t.attempt) for t in again] == [(first[0].message_id, 2)]


def test_tasks_split_the_shards_between_them(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=4)
    placed = kinesis_backend.put(stream, [f"t{i}".encode() for i in range(100)])
    shards = kinesis_backend.shard_ids(stream)
    seen: dict[int, set[str]] = {}
    for task in (0, 1):
        config = make_config(kinesis_backend, stream, task_index=task, task_count=2)
        with KinesisSpout(config, MemoryCheckpointStore()) as spout:
            assert spout.shard_ids == shards[task::2]
            want = sum(1 for s, _ in placed if s in shards[task::2])
            seen[task] = {t.message_id for t in drain(spout, want)}
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == {f"{s}:{q}" for s, q in placed}


def test_checkpoints_reach_zookeeper_in_the_documented_layout(kinesalite: KinesisEndpoint, zookeeper) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"z{i}".encode() for i in range(50)])
    config = make_config(kinesalite, stream, zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
                         app_name="wordcount", checkpoint_interval_s=0.1)
    with KinesisSpout(config) as spout:
        drain(spout, 50)
    client = zookeeper.client()
    base = f"{zookeeper.prefix}/wordcount/{stream}/checkpoints"
    assert sorted(client.get_children(base)) == kinesalite.shard_ids(stream)
    for shard, seq in last_sequence_by_shard(placed).items():
        doc = json.loads(client.get(f"{base}/{shard}")[0])
        assert doc["version"] == 1 and doc["sequence_number"] == seq and doc["shard_end"] is False
        assert doc["owner"] == config.worker_id and doc["updated_at"]


def test_spout_loses_nothing_through_throttling_expired_iterators_and_dropped_connections(fault_proxy) -> None:
    proxy, through = fault_proxy
    stream = through.create_stream(shards=2)
    placed = through.put(stream, [f"f{i}".encode() for i in range(200)])
    for shard in through.shard_ids(stream):
        proxy.inject("GetRecords", "ProvisionedThroughputExceededException", times=2, shard_id=shard)
    proxy.inject("GetRecords", "ExpiredIteratorException", times=2)
    proxy.drop_connections("GetRecords", times=1)
    config = make_config(through, stream, max_records_per_call=25)
    store = MemoryCheckpointStore()
    with KinesisSpout(config, store) as spout:
        got = drain(spout, 200, timeout_s=30)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
        spout.flush_checkpoints()
    assert proxy.pending() == 0  # every fault was delivered
    assert sorted(t.message_id for t in got) == sorted(f"{s}:{q}" for s, q in placed)
    assert {shard: cp.sequence_number for shard, cp in store.list().items()} == last_sequence_by_shard(placed)


def test_batches_bounded_by_bytes_and_acked_or_failed_in_bulk(moto_kinesis: KinesisEndpoint) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    placed = moto_kinesis.put(stream, [b"x" * 100 for _ in range(30)], partition_keys=["k"] * 30)
    store = MemoryCheckpointStore()
    dead: list[str] = []
    config = make_config(moto_kinesis, stream, retry_limit=0, dead_letter=lambda r, why: dead.append(r.message_id))
    with KinesisSpout(config, store) as spout:
        assert wait_until(lambda: spout.metrics()[0].buffered == 30, 10)
        batch = spout.next_batch(max_records=100, timeout_s=1.0, max_bytes=1000)  # 101 bytes a record
        assert len(batch) == 10
        spout.fail_many([batch[0].message_id])  # no retries left: dead-lettered at once
        spout.ack_many(t.message_id for t in batch[1:])
        assert spout.flush_checkpoints()  # waits for the dead letter to be written too
        assert dead == [batch[0].message_id]
    assert store.load(placed[0][0]).sequence_number == placed[9][1]


def test_close_writes_the_newest_checkpoint_at_once_even_with_a_long_interval(moto_kinesis: KinesisEndpoint
                                                                             ) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    placed = moto_kinesis.put(stream, [f"c{i}".encode() for i in range(20)])
    store = MemoryCheckpointStore()
    config = make_config(moto_kinesis, stream, checkpoint_interval_s=600.0)
    with KinesisSpout(config, store) as spout:
        drain(spout, 10)
        assert wait_until(lambda: store.writes == 1, 5)  # the first advance is written at once
        drain(spout, 10)  # the next one waits for the interval...
        assert store.writes == 1
        assert spout.flush_checkpoints(timeout_s=5.0)  # ...unless flushed
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]


TIMEOUT_S = 15.0


class CountingStore(MemoryCheckpointStore):
    """A memory store that counts the loads of each shard's checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: collections.Counter[str] = collections.Counter()

    def load(self, shard_id: str) -> Checkpoint | None:
        self.loads[shard_id] += 1
        return super().load(shard_id)


def config_for(endpoint_url: str, region: str, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(stream_name=stream, app_name="tests", endpoint_url=endpoint_url, region=region,
                                   initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2,
                                   checkpoint_interval_s=0.0)
    options.update(overrides)
    return SpoutConfig(**options)


def test_a_shard_listed_after_a_finished_one_is_read_at_open_and_the_finished_one_is_looked_up_once(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=3)
    first, *others = kinesalite.shard_ids(stream)
    store = CountingStore()
    store.save(Checkpoint(first, None, shard_end=True))  # finished by an earlier run: never read again
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(12)], [f"key-{i}" for i in range(12)])
    expected = sorted(f"{shard}:{seq}" for shard, seq in placed if shard != first)
    assert {shard for shard, seq in placed} - {first}, "no record went to the shards after the finished one"
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        config = config_for(proxy.endpoint_url, kinesalite.region, stream, shard_sync_interval_s=0.2)
        with KinesisSpout(config, store) as spout:
            assert sorted(spout.shard_ids) == sorted(others), "shards after the finished one were not read at open"
            got: list[SpoutTuple] = []

            def read() -> bool:
                batch = spout.next_batch(max_records=100, timeout_s=0.1)
                spout.ack_many(t.message_id for t in batch)
                got.extend(batch)
                return len(got) >= len(expected)

            assert wait_until(read, TIMEOUT_S), f"read {len(got)} of {len(expected)}"
            listings = proxy.calls["ListShards"]
            assert wait_until(lambda: proxy.calls["ListShards"] >= listings + 3, TIMEOUT_S), "no sync rounds"
        assert sorted(t.message_id for t in got) == expected
    assert store.loads[first] == 1, f"the finished shard was looked up {store.loads[first]} times"
