"""The ownership next to a checkpoint store (what an exactly-once SpoutPipeline takes at run()), on the real
ZooKeeper: one holder at a time, named to the next; released on close, and gone with its session (a holder that
expires, or dies, lets go by itself)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kinesis_spout import SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.spark.bookkeeping.ownership import MemoryOwnership, OwnershipStore, OwnershipTaken, ownership_for
from kinesis_spout.testing.process import in_background, wait_until
from kinesis_spout.testing.zkproxy import Op, ZooKeeperFaultProxy

NAME = "exactly_once_owner"


def owner(store: object) -> Any:
    """The ownership that goes with ``store`` (one per store: on a ZooKeeper store's session, or in memory)."""
    owned = ownership_for(store)
    assert owned is not None
    return owned


def store_for(hosts: str, zookeeper, session_timeout_s: float = 2.0,
              deadline_s: float = 5.0) -> ZooKeeperCheckpointStore:
    config = SpoutConfig(stream_name="stream", app_name="app", zookeeper=hosts, zookeeper_prefix=zookeeper.prefix,
                         zookeeper_session_timeout_s=session_timeout_s, zookeeper_deadline_s=deadline_s)
    return ZooKeeperCheckpointStore.from_config(config)


def test_one_holder_at_a_time_named_to_the_next_and_released_on_close(zookeeper) -> None:
    first, second = store_for(zookeeper.hosts, zookeeper), store_for(zookeeper.hosts, zookeeper)
    first.open(), second.open()
    try:
        assert isinstance(owner(first), OwnershipStore)
        owner(first).take_ownership(NAME, "pid 1 on host a")
        owner(first).take_ownership(NAME, "pid 1 on host a")  # taking it again in the same session is no conflict
        assert owner(first).holds_ownership(NAME, "pid 1 on host a") and not owner(first).holds_ownership(NAME, "pid 2")
        node = f"{zookeeper.prefix}/app/stream/{NAME}"
        with pytest.raises(OwnershipTaken, match=f"{node} is owned by pid 1 on host a") as taken:
            owner(second).take_ownership(NAME, "pid 2 on host b")
        assert taken.value.holder == "pid 1 on host a" and taken.value.where == node
        assert taken.value.vanishes_within_s is not None and 1.0 <= taken.value.vanishes_within_s <= 2.0
        raw, stat = zookeeper.client().get(node)
        assert json.loads(raw)["holder"] == "pid 1 on host a" and stat.ephemeralOwner != 0
        owner(second).release_ownership(NAME, "pid 2 on host b")  # not its own: nothing happens
        assert zookeeper.client().exists(node) is not None
        owner(first).release_ownership(NAME, "pid 1 on host a")
        owner(first).release_ownership(NAME, "pid 1 on host a")  # idempotent
        assert not owner(first).holds_ownership(NAME, "pid 1 on host a")
        owner(second).take_ownership(NAME, "pid 2 on host b")
        second.close()  # its session ends: ZooKeeper deletes the node
        owner(first).take_ownership(NAME, "pid 1 on host a")
    finally:
        first.close(), second.close()


def test_an_expired_session_loses_the_ownership_and_lets_another_take_it(zookeeper) -> None:
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        holder, other = store_for(proxy.hosts, zookeeper), store_for(zookeeper.hosts, zookeeper)
        holder.open(), other.open()
        try:
            owner(holder).take_ownership(NAME, "pid 1")
            proxy.cut(Op.PING, hold=True)  # kept away until ZooKeeper expires its session
            proxy.wait_acted()
            node = f"{zookeeper.prefix}/app/stream/{NAME}"
            watcher = zookeeper.client()
            assert wait_until(lambda: watcher.exists(node) is None, 20), "the session never expired"
            owner(other).take_ownership(NAME, "pid 2")
            proxy.release()
            assert wait_until(lambda: holder.session_losses >= 1, 20)
            assert not owner(holder).holds_ownership(NAME, "pid 1"), "an ownership does not outlive its session"
            owner(holder).release_ownership(NAME, "pid 1")  # gone with the session: the new owner keeps it
            assert owner(other).holds_ownership(NAME, "pid 2") and watcher.exists(node) is not None
        finally:
            holder.close(), other.close()


def test_an_owner_that_lets_go_between_the_create_and_the_read_is_no_conflict(zookeeper) -> None:
    """The create fails (the node exists), and the holder lets go before the store reads who holds it: the store
    takes the ownership instead of naming a holder that is gone."""
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        holder, taker = store_for(zookeeper.hosts, zookeeper), store_for(proxy.hosts, zookeeper)
        holder.open(), taker.open()

        try:
            owner(holder).take_ownership(NAME, "pid 1")
            proxy.hold(Op.CREATE2)  # the answer "node exists" waits (a create that answers with the node's stat)
            take_done = in_background(lambda: owner(taker).take_ownership(NAME, "pid 2"), 20.0, "the take")
            proxy.wait_acted()
            holder.close()  # the holder lets go
            proxy.release()
            take_done()
            assert owner(taker).holds_ownership(NAME, "pid 2")
        finally:
            holder.close(), taker.close()


def test_the_memory_store_owns_like_zookeeper_until_released_or_revoked() -> None:
    store = MemoryCheckpointStore()
    assert isinstance(owner(store), MemoryOwnership) and isinstance(owner(store), OwnershipStore)
    owner(store).take_ownership(NAME, "run 1")
    with pytest.raises(OwnershipTaken, match="owned by run 1") as taken:
        owner(store).take_ownership(NAME, "run 2")
    assert taken.value.vanishes_within_s is None  # no session: kept until released
    store.close()
    assert owner(store).holds_ownership(NAME, "run 1"), "closing the store does not end an ownership"
    owner(store).revoke_ownership(NAME)
    assert not owner(store).holds_ownership(NAME, "run 1")
    owner(store).take_ownership(NAME, "run 2")
    owner(store).release_ownership(NAME, "run 1")  # not its own
    assert owner(store).holds_ownership(NAME, "run 2")
    owner(store).release_ownership(NAME, "run 2")
    owner(store).release_ownership(NAME, "run 2")
    owner(store).take_ownership(NAME, "run 3")


def test_a_release_cut_off_past_its_session_never_deletes_the_next_owners_node(zookeeper) -> None:
    """The holder's delete never reaches ZooKeeper (the connection drops in its place) and the holder stays away
    until its session expired; a new store takes the ownership (its node is at version 0 again). When the old
    holder reconnects, on a new session, its release must not delete the new owner's node: a third store is
    still refused while the new owner holds it."""
    node = f"{zookeeper.prefix}/app/stream/{NAME}"
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        old = store_for(proxy.hosts, zookeeper, deadline_s=20.0)  # time enough to retry after the reconnect
        new, third = store_for(zookeeper.hosts, zookeeper), store_for(zookeeper.hosts, zookeeper)
        old.open(), new.open(), third.open()
        watcher = zookeeper.client()

        try:
            owner(old).take_ownership(NAME, "old")
            proxy.cut_request(Op.DELETE, hold=True)  # the old holder is cut off in place of its delete
            release_done = in_background(lambda: owner(old).release_ownership(NAME, "old"), 30.0, "the release")
            proxy.wait_acted()
            assert wait_until(lambda: watcher.exists(node) is None, 20), "the old session never expired"
            owner(new).take_ownership(NAME, "new")
            assert watcher.exists(node).version == 0
            proxy.release()  # the old holder reconnects: its session is gone, kazoo opens a new one
            release_done()
            assert wait_until(lambda: old.session_losses >= 1 and old.connected, 20)
            assert watcher.exists(node) is not None, "the release deleted the new owner's node"
            assert owner(new).holds_ownership(NAME, "new")
            with pytest.raises(OwnershipTaken, match="owned by new"):
                owner(third).take_ownership(NAME, "third")
        finally:
            old.close(), new.close(), third.close()


def test_an_ownership_whose_create_was_retried_on_a_new_session_is_held(zookeeper) -> None:
    """The create's answer is lost and the store stays away until its session expired (with the node it made);
    the create is made again on kazoo's new session and succeeds: the node is this store's, so it holds the
    ownership (and releases it)."""
    node = f"{zookeeper.prefix}/app/stream/{NAME}"
    watcher = zookeeper.client()
    watcher.ensure_path(node.rsplit("/", 1)[0])
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        taker, other = store_for(proxy.hosts, zookeeper, deadline_s=20.0), store_for(zookeeper.hosts, zookeeper)
        taker.open(), other.open()

        try:
            proxy.cut(Op.CREATE2, hold=True)  # the connection drops in place of the create's answer
            take_done = in_background(lambda: owner(taker).take_ownership(NAME, "pid 1"), 30.0, "the take")
            proxy.wait_acted()
            assert watcher.exists(node) is not None, "the create reached ZooKeeper"
            assert wait_until(lambda: watcher.exists(node) is None, 20), "the session never expired"
            proxy.release()
            take_done()
            assert taker.session_losses >= 1
            assert watcher.exists(node) is not None
            assert owner(taker).holds_ownership(NAME, "pid 1"), "the node made on the new session is this store's"
            with pytest.raises(OwnershipTaken, match="owned by pid 1"):
                owner(other).take_ownership(NAME, "pid 2")
            owner(taker).release_ownership(NAME, "pid 1")
            assert watcher.exists(node) is None
        finally:
            taker.close(), other.close()


def test_an_ownership_cut_off_longer_than_its_session_timeout_is_not_held_by_the_stores_own_clock(zookeeper) -> None:
    """A connection that drops and comes back on the same session keeps the ownership; one kept away until the
    session expired is no longer held, although kazoo cannot report the session LOST before it reconnects."""
    node = f"{zookeeper.prefix}/app/stream/{NAME}"
    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        holder = store_for(proxy.hosts, zookeeper)
        holder.open()
        watcher = zookeeper.client()
        try:
            owner(holder).take_ownership(NAME, "pid 1")
            proxy.cut(Op.PING)  # a blip: kazoo reconnects at once and resumes its session
            proxy.wait_acted()
            assert wait_until(lambda: holder.connected, 20)
            assert owner(holder).holds_ownership(NAME, "pid 1") and holder.session_losses == 0
            proxy.cut(Op.PING, hold=True)
            proxy.wait_acted(2)
            assert wait_until(lambda: watcher.exists(node) is None, 20), "the session never expired"
            assert wait_until(lambda: not owner(holder).holds_ownership(NAME, "pid 1"), 10), \
                "an ownership cut off past its session timeout is still held"
            assert holder.session_losses == 0 and not holder.connected
        finally:
            proxy.release()
            holder.close()
