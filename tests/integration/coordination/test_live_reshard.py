"""A spout keeps reading while the stream is split and merged under a live producer: new shards are found, each
parent is read to its end (its end stored) before any record of its children, and nothing is lost."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import ConsumerThread

KEYS = [f"key-{i}" for i in range(16)]


class Producer:
    """Puts ``key:n`` records (n counting per key) in small batches until stopped; remembers what it put."""

    def __init__(self, endpoint: KinesisEndpoint, stream: str) -> None:
        self.client = endpoint.client()
        self.stream = stream
        self.sent: list[bytes] = []
        self.ids: dict[str, bytes] = {}  # message id -> data
        self._next = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = []
                for key in KEYS:
                    batch.append(f"{key}:{self._next[key]}".encode())
                    self._next[key] += 1
                placed = put_records(self.client, self.stream, batch, partition_keys=list(KEYS))
                self.ids.update((f"{shard}:{seq}", data) for (shard, seq), data in zip(placed, batch))
                self.sent.extend(batch)
                self._stop.wait(0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def __enter__(self) -> "Producer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(30)


def assert_keys_in_order(delivered: list[bytes]) -> None:
    per_key: dict[str, list[int]] = defaultdict(list)
    for data in delivered:
        key, n = data.decode().split(":")
        per_key[key].append(int(n))
    assert all(ns == sorted(ns) for ns in per_key.values()), "a key's records came out of order across the reshard"


def reshard(client: Any, stream: str, action: str, **kwargs: Any) -> None:
    getattr(client, action)(StreamName=stream, **kwargs)
    wait_for_stream(client, stream)


@pytest.mark.parametrize("emulator", ["kinesalite", "kinesis_local"])
def test_split_and_merge_under_a_live_producer_lose_nothing_and_keep_each_key_in_order(
        request: pytest.FixtureRequest, emulator: str) -> None:
    endpoint: KinesisEndpoint = request.getfixturevalue(emulator)
    stream = endpoint.create_stream(shards=2)
    admin = endpoint.client()
    first, second = endpoint.shard_ids(stream)
    store = MemoryCheckpointStore()
    config = SpoutConfig(stream_name=stream, app_name="reshard", endpoint_url=endpoint.endpoint_url,
                         region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, shard_sync_interval_s=1.0)
    delivered: list[bytes] = []
    with KinesisSpout(config, store) as spout:
        def take(until: Any, timeout_s: float) -> bool:
            def step() -> bool:
                for tup in spout.next_batch(max_records=500, timeout_s=0.1):
                    delivered.append(tup.record.data)
                    spout.ack(tup.message_id)
                return bool(until())
            return wait_until(step, timeout_s, interval_s=0.0)

        with Producer(endpoint, stream) as producer:
            assert take(lambda: len(delivered) >= 100, 30)
            ranges = {s["ShardId"]: s["HashKeyRange"] for s in admin.list_shards(StreamName=stream)["Shards"]}
            low, high = int(ranges[first]["StartingHashKey"]), int(ranges[first]["EndingHashKey"])
            reshard(admin, stream, "split_shard", ShardToSplit=first, NewStartingHashKey=str((low + high) // 2))
            assert take(lambda: len(delivered) >= len(producer.sent) // 2 + 100, 30)
            children = sorted(set(endpoint.shard_ids(stream)) - {first, second})
            upper_child = max(children, key=lambda s: int(
                next(x for x in admin.list_shards(StreamName=stream)["Shards"] if x["ShardId"] == s)
                ["HashKeyRange"]["StartingHashKey"]))
            reshard(admin, stream, "merge_shards", ShardToMerge=upper_child, AdjacentShardToMerge=second)
            assert take(lambda: len(delivered) >= len(producer.sent) // 2 + 200, 30)
        assert producer.error is None, producer.error
        assert take(lambda: len(delivered) >= len(producer.sent), 60), \
            f"{len(producer.sent) - len(delivered)} of {len(producer.sent)} records not delivered"
        assert spout.flush_checkpoints()
        finished = {m.shard_id for m in spout.metrics() if m.finished}
    assert sorted(delivered) == sorted(producer.sent)  # every record, once
    assert_keys_in_order(delivered)
    closed = {first, second, upper_child}
    assert finished == closed
    assert all(store.load(s).shard_end for s in closed)


def test_split_and_merge_with_three_lease_workers_lose_nothing_and_keep_each_key_in_order(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """The same reshard with three workers sharing the stream through leases: a child is leased to anyone only
    once its parents' ends are stored, so a key's records stay in order across workers too."""
    stream = kinesalite.create_stream(shards=2)
    admin = kinesalite.client()
    first, second = kinesalite.shard_ids(stream)
    log: list[tuple[str, str]] = []
    lock = threading.Lock()

    def config(name: str) -> SpoutConfig:
        return SpoutConfig(stream_name=stream, app_name="reshard", endpoint_url=kinesalite.endpoint_url,
                           region=kinesalite.region, zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
                           coordination="leases", worker_id=name, initial_position=InitialPosition.TRIM_HORIZON,
                           empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, shard_sync_interval_s=1.0)

    workers = [ConsumerThread(KinesisSpout(config(n)), n, log, lock).start() for n in ("a", "b", "c")]
    try:
        with Producer(kinesalite, stream) as producer:
            assert wait_until(lambda: len(log) >= 100, 30)
            ranges = {s["ShardId"]: s["HashKeyRange"] for s in admin.list_shards(StreamName=stream)["Shards"]}
            low, high = int(ranges[first]["StartingHashKey"]), int(ranges[first]["EndingHashKey"])
            reshard(admin, stream, "split_shard", ShardToSplit=first, NewStartingHashKey=str((low + high) // 2))
            assert wait_until(lambda: len(log) >= len(producer.sent) // 2 + 100, 30)
            shards = admin.list_shards(StreamName=stream)["Shards"]
            upper_child = max((s for s in shards if s["ShardId"] not in (first, second)),
                              key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))["ShardId"]
            reshard(admin, stream, "merge_shards", ShardToMerge=upper_child, AdjacentShardToMerge=second)
            assert wait_until(lambda: len(log) >= len(producer.sent) // 2 + 200, 30)
        assert producer.error is None, producer.error
        assert wait_until(lambda: len({m for m, _ in log}) >= len(producer.sent), 60)
        assert all(w.error is None for w in workers), [w.error for w in workers]
    finally:
        for w in workers:
            w.stop()
    with lock:
        order = [m for m, _ in log]
    assert sorted(order) == sorted(producer.ids), "every record, once"
    assert_keys_in_order([producer.ids[m] for m in order])
    assert len({w for _, w in log}) > 1, "the workers shared the stream"
