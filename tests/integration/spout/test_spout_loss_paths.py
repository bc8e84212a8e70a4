"""Paths where a spout could lose records, each proven on real servers: starts after a crash and a reshard, shard
ends, schemes that raise, and acks and fails from other threads."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, RetryBackoff, SpoutConfig
from kinesis_spout.records import Record
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain


def make_config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="loss-paths", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.LATEST, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0)
    options.update(overrides)
    return SpoutConfig(**options)


def datas(tuples: list[Any]) -> set[bytes]:
    return {t.record.data for t in tuples}


# -- where a shard starts -------------------------------------------------------------------------------------------


def test_latest_is_pinned_at_open_so_a_crash_before_the_first_checkpoint_skips_nothing(
        kinesis_backend: KinesisEndpoint) -> None:
    """LATEST read r1-r3 without acking them, the consumer died, r4 arrived while it was down: the restart reads
    r1-r4 (a new LATEST would have skipped all four)."""
    stream = kinesis_backend.create_stream(shards=1)
    store = MemoryCheckpointStore()
    first = KinesisSpout(make_config(kinesis_backend, stream), store).open()
    try:
        kinesis_backend.put(stream, [b"r1", b"r2", b"r3"])
        assert datas(drain(first, 3, ack=False)) == {b"r1", b"r2", b"r3"}
    finally:
        first.close()  # nothing was acked: no checkpoint beyond the start is written, as after a crash
    kinesis_backend.put(stream, [b"r4"])
    with KinesisSpout(make_config(kinesis_backend, stream), store) as second:
        got = drain(second, 4)
        kinesis_backend.put(stream, [b"r5"])
        got += drain(second, 1)
    assert [t.record.data for t in got] == [b"r1", b"r2", b"r3", b"r4", b"r5"]


def _split_after_a_first_run(kinesalite: KinesisEndpoint) -> tuple[str, str, MemoryCheckpointStore, set[bytes]]:
    """A 1-shard stream read with LATEST and acked (the parent has a checkpoint), then split; records put into the
    children. Returns (stream, parent shard, store, the children's records)."""
    stream = kinesalite.create_stream(shards=1)
    parent = kinesalite.shard_ids(stream)[0]
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        kinesalite.put(stream, [f"p{i}".encode() for i in range(10)])
        assert len(drain(spout, 10)) == 10
        assert spout.flush_checkpoints()
    client = kinesalite.client()
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    placed = kinesalite.put(stream, [f"c{i}".encode() for i in range(40)])
    assert parent not in {s for s, _ in placed} and len({s for s, _ in placed}) == 2
    return stream, parent, store, {f"c{i}".encode() for i in range(40)}


def test_children_of_a_split_start_at_their_beginning_under_latest(kinesalite: KinesisEndpoint) -> None:
    stream, parent, store, children_records = _split_after_a_first_run(kinesalite)
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got = drain(spout, 40)
    assert datas(got) == children_records


def test_children_start_at_their_beginning_after_the_parent_expired_from_the_listing(
        kinesalite: KinesisEndpoint) -> None:
    """Once the parent is past the retention, ListShards no longer shows it: its stored checkpoint still makes the
    children start at TRIM_HORIZON rather than at LATEST. Once both children have checkpoints of their own, the
    parent's is deleted (nothing depends on it any more)."""
    stream, parent, store, children_records = _split_after_a_first_run(kinesalite)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        proxy.expire_shards({parent})
        through = KinesisEndpoint("kinesalite+expiry", proxy.endpoint_url, kinesalite.region)
        with KinesisSpout(make_config(through, stream), store) as spout:
            assert parent not in spout.shard_ids
            got = drain(spout, 40)
            assert spout.flush_checkpoints()
        assert store.load(parent) is not None  # kept while a child had no checkpoint of its own
        with KinesisSpout(make_config(through, stream), store) as spout:
            assert store.load(parent) is None, "the expired parent's checkpoint outlived its use"
            assert drain(spout, 1, timeout_s=1.0) == []  # the children resume after their own checkpoints
    assert datas(got) == children_records


def test_a_closed_shard_read_to_its_end_is_finished_only_after_its_buffered_records(
        kinesalite: KinesisEndpoint) -> None:
    """The reader fetched the closed shard's last record while nothing was taken yet: every buffered record must
    still come out, and the shard is finished (shard_end stored) only after they are acked."""
    stream = kinesalite.create_stream(shards=1)
    parent = kinesalite.shard_ids(stream)[0]
    kinesalite.put(stream, [f"p{i}".encode() for i in range(30)])
    client = kinesalite.client()
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, initial_position=InitialPosition.TRIM_HORIZON)
    with KinesisSpout(config, store) as spout:
        def parent_read_to_end() -> bool:
            return any(m.shard_id == parent and m.read_to_end for m in spout.metrics())

        assert wait_until(parent_read_to_end, 20), "the parent's reader never reached the shard's end"
        assert [m.buffered for m in spout.metrics() if m.shard_id == parent] == [30]
        got = drain(spout, 30, ack=False)
        assert datas(got) == {f"p{i}".encode() for i in range(30)}
        assert not [m for m in spout.metrics() if m.shard_id == parent and m.finished]
        spout.ack_many(t.message_id for t in got)
        assert wait_until(lambda: (spout.next_tuple(), store.load(parent))[1] is not None
                          and store.load(parent).shard_end, 10)


# -- schemes and callbacks that raise -------------------------------------------------------------------------------


class PickyScheme:
    """A user's scheme with a bug: a KeyError on records without a "user" field."""

    fields = ("user",)

    def __call__(self, record: Record) -> tuple[Any, ...]:
        return (json.loads(record.data)["user"],)


@pytest.mark.parametrize("scheme, bad, error", [
    (JsonScheme(), b"[" * 100_000 + b"]" * 100_000, "RecursionError"),  # nested too deep for the json module
    (PickyScheme(), b'{"name": "no user"}', "KeyError"),
])
def test_a_scheme_that_raises_anything_makes_a_poison_record_and_loses_nothing_else(
        kinesis_backend: KinesisEndpoint, scheme: Any, bad: bytes, error: str) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    good = [b'{"user": "a"}', b'{"user": "b"}', b'{"user": "c"}', b'{"user": "d"}']
    placed = kinesis_backend.put(stream, [good[0], good[1], bad, good[2], good[3]])
    dead: list[tuple[str, str]] = []
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream, initial_position=InitialPosition.TRIM_HORIZON, scheme=scheme,
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    with KinesisSpout(config, store) as spout:
        got = []
        for _ in range(40):  # one next_batch call holds all five records once they are buffered
            got += spout.next_batch(max_records=10, timeout_s=0.5)
            for tup in got:
                spout.ack(tup.message_id)
            if len(got) >= 4:
                break
        assert spout.flush_checkpoints()
        assert spout.poison_records == 1
    assert datas(got) == set(good)
    assert [mid for mid, _ in dead] == [f"{placed[2][0]}:{placed[2][1]}"] and error in dead[0][1]
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]


# -- threads ----------------------------------------------------------------------------------------------------------


class LockCheckingTracker:
    """Wraps a spout's tracker and records every call made without the spout's lock held."""

    def __init__(self, tracker: Any, lock: Any, violations: list[str]) -> None:
        self._tracker, self._lock, self._violations = tracker, lock, violations

    def __getattr__(self, name: str) -> Any:
        if not self._lock._is_owned():
            self._violations.append(f"{name} from {threading.current_thread().name}")
        return getattr(self._tracker, name)


def test_acks_and_fails_from_other_threads_never_strand_a_retry(kinesis_backend: KinesisEndpoint) -> None:
    """A consumer thread takes batches while two other threads ack and fail them at random: every tracker access
    holds the spout's lock, every record is finally acked, and the checkpoint reaches the last record."""
    stream = kinesis_backend.create_stream(shards=2)
    placed = kinesis_backend.put(stream, [f"r{i}".encode() for i in range(600)])
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream, initial_position=InitialPosition.TRIM_HORIZON, retry_limit=50,
                         retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0),
                         message_timeout_s=None, max_inflight_records=50)
    violations: list[str] = []
    acked: set[str] = set()
    handoff: list[str] = []
    cond = threading.Condition()
    done = threading.Event()
    errors: list[BaseException] = []
    with KinesisSpout(config, store) as spout:
        for state in spout._shards.values():
            state.tracker = LockCheckingTracker(state.tracker, spout._lock, violations)  # type: ignore[assignment]

        def consume() -> None:
            try:
                while not done.is_set():
                    batch = spout.next_batch(max_records=20, timeout_s=0.05)
                    with cond:
                        handoff.extend(t.message_id for t in batch)
                        cond.notify_all()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        def settle(seed: int) -> None:
            rng = random.Random(seed)
            try:
                while not done.is_set():
                    with cond:
                        if not handoff:
                            cond.wait(0.05)
                            continue
                        mid = handoff.pop()
                    if rng.random() < 0.4:
                        spout.fail(mid)
                    else:
                        spout.ack(mid)
                        with cond:
                            acked.add(mid)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=consume, name="consumer")] + \
            [threading.Thread(target=settle, args=(seed,), name=f"settler-{seed}") for seed in (1, 2)]
        for thread in threads:
            thread.start()
        try:
            everything = {f"{s}:{q}" for s, q in placed}
            finished = wait_until(lambda: acked >= everything, 60)
        finally:
            done.set()
            for thread in threads:
                thread.join(10)
        assert not errors, errors
        assert finished, f"{len(everything - acked)} records never acked; retry queues " \
                         f"{[m.retry_queue for m in spout.metrics()]}"
        assert spout.flush_checkpoints()
    assert not violations, f"tracker used without the spout's lock: {sorted(set(violations))[:5]}"
    last: dict[str, int] = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    assert {s: int(cp.sequence_number) for s, cp in store.list().items()} == last
