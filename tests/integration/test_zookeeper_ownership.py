"""The ownership node of a checkpoint store (what an exactly-once SpoutPipeline takes at run()), on the real
ZooKeeper: one holder at a time, named to the next; released on close, and gone with its session (a holder that
expires, or dies, lets go by itself)."""

from __future__ import annotations

import json
import threading

import pytest

from kinesis_spout import SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.checkpoint.base import OwnershipStore, OwnershipTaken
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zkproxy import Op, ZooKeeperFaultProxy

NAME = "exactly_once_owner"


def store_for(hosts: str, zookeeper, session_timeout_s: float = 2.0) -> ZooKeeperCheckpointStore:
    config = SpoutConfig(stream_name="stream", app_name="app", zookeeper=hosts, zookeeper_prefix=zookeeper.prefix,
                         zookeeper_session_timeout_s=session_timeout_s, zookeeper_deadline_s=5.0)
    return ZooKeeperCheckpointStore.from_config(config)


def test_one_holder_at_a_time_named_to_the_next_and_released_on_close(zookeeper) -> None:
    first, second = store_for(zookeeper.hosts, zookeeper), store_for(zookeeper.hosts, zookeeper)
    first.open(), second.open()
    try:
        assert isinstance(first, OwnershipStore)
        first.take_ownership(NAME, "pid 1 on host a")
        first.take_ownership(NAME, "pid 1 on host a")  # taking it again in the same session is no conflict
        assert first.holds_ownership(NAME, "pid 1 on host a") and not first.holds_ownership(NAME, "pid 2")
        node = f"{zookeeper.prefix}/app/stream/{NAME}"
        with pytest.raises(OwnershipTaken, match=f"{node} is owned by pid 1 on host a") as taken:
            second.take_ownership(NAME, "pid 2 on host b")
        assert taken.value.holder == "pid 1 on host a" and taken.value.where == node
        assert taken.value.vanishes_within_s is not None and 1.0 <= taken.value.vanishes_within_s <= 2.0
        raw, stat = zookeeper.client().get(node)
        assert json.loads(raw)["holder"] == "pid 1 on host a" and stat.ephemeralOwner != 0
        second.release_ownership(NAME, "pid 2 on host b")  # not its own: nothing happens
        assert zookeeper.client().exists(node) is not None
        first.release_ownership(NAME, "pid 1 on host a")
        first.release_ownership(NAME, "pid 1 on host a")  # idempotent
        assert not first.holds_ownership(NAME, "pid 1 on host a")
        second.take_ownership(NAME, "pid 2 on host b")
        second.close()  # its session ends: ZooKeeper deletes the node
        first.take_ownership(NAME, "pid 1 on host a")
    finally:
        first.close(), second.close()


def test_an_expired_session_loses_the_ownership_and_lets_another_take_it(zookeeper) -> None:
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        holder, other = store_for(proxy.hosts, zookeeper), store_for(zookeeper.hosts, zookeeper)
        holder.open(), other.open()
        try:
            holder.take_ownership(NAME, "pid 1")
            proxy.cut(Op.PING, hold=True)  # kept away until ZooKeeper expires its session
            proxy.wait_acted()
            node = f"{zookeeper.prefix}/app/stream/{NAME}"
            watcher = zookeeper.client()
            assert wait_until(lambda: watcher.exists(node) is None, 20), "the session never expired"
            other.take_ownership(NAME, "pid 2")
            proxy.release()
            assert wait_until(lambda: holder.session_losses >= 1, 20)
            assert not holder.holds_ownership(NAME, "pid 1"), "an ownership does not outlive its session"
            holder.release_ownership(NAME, "pid 1")  # gone with the session: the new owner keeps it
            assert other.holds_ownership(NAME, "pid 2") and watcher.exists(node) is not None
        finally:
            holder.close(), other.close()


def test_an_owner_that_lets_go_between_the_create_and_the_read_is_no_conflict(zookeeper) -> None:
    """The create fails (the node exists), and the holder lets go before the store reads who holds it: the store
    takes the ownership instead of naming a holder that is gone."""
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        holder, taker = store_for(zookeeper.hosts, zookeeper), store_for(proxy.hosts, zookeeper)
        holder.open(), taker.open()
        errors: list[BaseException] = []

        def take() -> None:
            try:
                taker.take_ownership(NAME, "pid 2")
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                errors.append(exc)

        try:
            holder.take_ownership(NAME, "pid 1")
            proxy.hold(Op.CREATE)  # the answer "node exists" waits
            thread = threading.Thread(target=take, daemon=True)
            thread.start()
            proxy.wait_acted()
            holder.close()  # the holder lets go
            proxy.release()
            thread.join(20)
            assert not thread.is_alive() and errors == []
            assert taker.holds_ownership(NAME, "pid 2")
        finally:
            holder.close(), taker.close()


def test_the_memory_store_owns_like_zookeeper_until_released_or_revoked() -> None:
    store = MemoryCheckpointStore()
    assert isinstance(store, OwnershipStore)
    store.take_ownership(NAME, "run 1")
    with pytest.raises(OwnershipTaken, match="owned by run 1") as taken:
        store.take_ownership(NAME, "run 2")
    assert taken.value.vanishes_within_s is None  # no session: kept until released
    store.close()
    assert store.holds_ownership(NAME, "run 1"), "closing the store does not end an ownership"
    store.revoke_ownership(NAME)
    assert not store.holds_ownership(NAME, "run 1")
    store.take_ownership(NAME, "run 2")
    store.release_ownership(NAME, "run 1")  # not its own
    assert store.holds_ownership(NAME, "run 2")
    store.release_ownership(NAME, "run 2")
    store.release_ownership(NAME, "run 2")
    store.take_ownership(NAME, "run 3")
