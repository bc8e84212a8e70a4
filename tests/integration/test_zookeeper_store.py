"""The ZooKeeper checkpoint store against a real server: layout, compare-and-set, bad data, dead server."""

from __future__ import annotations

import json
import threading

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    KinesisSpout,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.testing.process import free_port

BIG = 49590338271490256608559692538361571095921575989136588898


def store_for(zookeeper, app: str = "app", stream: str = "stream") -> ZooKeeperCheckpointStore:
    config = SpoutConfig(stream_name=stream, app_name=app, zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix)
    return ZooKeeperCheckpointStore.from_config(config)


def test_save_load_list_delete(zookeeper) -> None:
    store = store_for(zookeeper)
    store.open()
    try:
        assert store.load("shardId-000000000000") is None and store.list() == {}
        store.save(Checkpoint("shardId-000000000000", str(BIG)).stamped("me"))
        store.save(Checkpoint("shardId-000000000001", str(BIG + 7)).stamped("me"))
        loaded = store.load("shardId-000000000000")
        assert loaded is not None and loaded.sequence_number == str(BIG) and loaded.owner == "me"
        assert sorted(store.list()) == ["shardId-000000000000", "shardId-000000000001"]
        raw = zookeeper.client().get(f"{zookeeper.prefix}/app/stream/checkpoints/shardId-000000000001")[0]
        assert json.loads(raw)["sequence_number"] == str(BIG + 7)
        store.delete("shardId-000000000001")
        assert list(store.list()) == ["shardId-000000000000"]
    finally:
        store.close()
        store.close()  # idempotent


def test_apps_do_not_share_checkpoints(zookeeper) -> None:
    a, b = store_for(zookeeper, app="a"), store_for(zookeeper, app="b")
    a.open(), b.open()
    try:
        a.save(Checkpoint("s", "10"))
        assert b.load("s") is None
    finally:
        a.close(), b.close()


def test_concurrent_writers_never_move_a_checkpoint_backwards(zookeeper) -> None:
    stores = [store_for(zookeeper) for _ in range(4)]
    for store in stores:
        store.open()
    conflicts = [0] * len(stores)  # lower writes that lost to a higher one: refused, never applied

    def write(i: int) -> None:
        for n in range(i, 200, len(stores)):  # interleaved increasing values from 4 writers
            try:
                stores[i].save(Checkpoint("s", str(BIG + n)))
            except CheckpointConflict:
                conflicts[i] += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        final = stores[0].load("s")
        assert final is not None and int(final.sequence_number) == BIG + 199  # the highest write wins
        with pytest.raises(CheckpointConflict, match="refusing to move it back"):
            stores[1].save(Checkpoint("s", str(BIG)))
    finally:
        for store in stores:
            store.close()


def test_unreadable_checkpoint_stops_the_spout_naming_the_znode(zookeeper, moto_kinesis) -> None:
    stream = moto_kinesis.create_stream("s1", shards=1)
    shard = moto_kinesis.shard_ids(stream)[0]
    node = f"{zookeeper.prefix}/app/{stream}/checkpoints/{shard}"
    zookeeper.client().create(node, b"{garbage", makepath=True)
    config = SpoutConfig(stream_name=stream, app_name="app", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=moto_kinesis.endpoint_url,
                         region="us-east-1")
    spout = KinesisSpout(config)
    with pytest.raises(CheckpointError, match=f"{node} is not valid UTF-8 JSON"):
        spout.open()
    spout.close()


def test_unreachable_zookeeper_is_a_clear_error() -> None:
    store = ZooKeeperCheckpointStore(f"127.0.0.1:{free_port()}", "/x", connect_timeout_s=1.0)
    with pytest.raises(CheckpointError, match="cannot connect to ZooKeeper at 127.0.0.1:.* within 1 s"):
        store.open()
    store.close()


def test_batch_id_lives_next_to_the_checkpoints_and_never_moves_back(zookeeper) -> None:
    store = store_for(zookeeper)
    store.open()
    try:
        assert store.load_batch_id() == 0
        store.save_batch_id(7)
        store.save_batch_id(8)
        with pytest.raises(CheckpointConflict, match="refusing to move it back to 3"):
            store.save_batch_id(3)
        assert store.load_batch_id() == 8
        assert zookeeper.client().get(f"{zookeeper.prefix}/app/stream/batch_id")[0] == b"8"
        assert store.list() == {}  # not mistaken for a shard's checkpoint
        zookeeper.client().set(f"{zookeeper.prefix}/app/stream/batch_id", b"eight")
        with pytest.raises(CheckpointError, match="unreadable batch id at ZooKeeper node"):
            store.load_batch_id()
    finally:
        store.close()
