"""The spout's lease code (hand-overs, drops, ZooKeeper outages, giving the leases back on close) against mutants of
kinesis_spout/spout.py that tests/integration/test_leases.py let survive. kinesalite and a real ZooKeeper through
the fixtures; the lease workers are test_leases.py's."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from kinesis_spout import ConfigError, KinesisSpout, MemoryCheckpointStore, ZooKeeperCheckpointStore
from kinesis_spout.coordination.leases import ZooKeeperLeases
from kinesis_spout.errors import LeaseLost
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

from .support import buffered, config, handing_back, lease_node, worker


def worker_node(zookeeper: Any, stream: str, name: str) -> str:
    return f"{zookeeper.prefix}/leases/{stream}/workers/{name}"


def test_leases_with_a_store_other_than_zookeeper_s_is_an_error_naming_it_and_the_fix(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    spout = KinesisSpout(config(kinesalite, zookeeper, "any", "w"), checkpoint_store=MemoryCheckpointStore())
    with pytest.raises(ConfigError) as raised:
        spout.open()
    spout.close()
    assert str(raised.value) == ("coordination 'leases' needs the ZooKeeper checkpoint store (the workers meet "
                                 "there); got MemoryCheckpointStore: use coordination='static' with it")


def test_a_static_spout_beside_lease_workers_names_them_all_and_alone_has_no_lease_epochs(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    cfg = config(kinesalite, zookeeper, stream, "static", coordination="static")
    store = ZooKeeperCheckpointStore.from_config(cfg)
    store.open()
    try:
        for name in ("a", "b"):  # two live lease workers of the app (their nodes go with this store's session)
            ZooKeeperLeases(store, name).join()
        static = KinesisSpout(cfg)
        with pytest.raises(ConfigError) as raised:
            static.open()
        static.close()
    finally:
        store.close()
    assert str(raised.value) == (f"app 'leases' reads stream {stream!r} with leases (live workers: a, b), but this "
                                 f"spout has coordination='static': both would read the same shards. Use "
                                 f"coordination='leases', or another app_name")
    with KinesisSpout(cfg) as spout:
        assert spout.shard_ids == kinesalite.shard_ids(stream)
        assert spout.lease_epochs() == {}


def test_while_zookeeper_is_down_nothing_is_emitted_no_shard_is_dropped_and_close_leaves_the_leases_alone(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """Records buffered during a ZooKeeper outage shorter than the session timeout are held back (the lease may
    have moved on), the shard is kept, and close() does not try to release leases it cannot reach."""
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    kinesalite.put(stream, [f"r{i}".encode() for i in range(5)])
    cfg = config(kinesalite, zookeeper, stream, "w", zookeeper_session_timeout_s=30.0, zookeeper_deadline_s=2.0)
    store = ZooKeeperCheckpointStore.from_config(cfg)
    spout = KinesisSpout(cfg, checkpoint_store=store)
    try:
        spout.open()
        assert len(drain(spout, 5)) == 5
        assert spout.flush_checkpoints()
        assert spout.lease_epochs() == {shard: 0}
        zookeeper.server.kill()
        assert wait_until(lambda: not store.connected, 15)
        kinesalite.put(stream, [f"s{i}".encode() for i in range(5)])
        assert wait_until(lambda: buffered(spout) == 5, 15)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
        assert spout.next_tuple() is None
        assert spout.shard_ids == [shard] and spout.lease_epochs() == {shard: 0}
        with caplog.at_level(logging.WARNING, logger="kinesis_spout"):
            spout.close()
    finally:
        spout.close()
    assert f"closing without ZooKeeper: the leases of {shard} go when the session times out" in caplog.text
    assert "could not give the leases back" not in caplog.text


def test_a_shard_whose_lease_moved_on_is_dropped_with_its_buffer_and_taken_again_once_free(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(30)])
    conflicts: list[Any] = []
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    with KinesisSpout(config(kinesalite, zookeeper, stream, "w"), on_checkpoint_conflict=conflicts.append) as spout:
        assert wait_until(lambda: buffered(spout) == 30, 15)
        taken = spout.next_batch(max_records=5, timeout_s=5)
        assert len(taken) == 5 and spout.lease_epochs() == {shard: 0}
        zookeeper.client().set(lease_node(zookeeper, stream, shard), b'{"owner": "intruder"}')  # epoch 1
        spout.ack_many(t.message_id for t in taken)  # the write is refused: the shard is dropped
        assert wait_until(lambda: bool(conflicts), 10)  # the handler hears of it after the drop
        assert isinstance(conflicts[0], LeaseLost)
        later = spout.next_batch(max_records=100, timeout_s=0)  # the 25 buffered records went with the shard
        assert not later or spout.lease_epochs() == {shard: 2}, "records of the dropped shard were emitted"
        # the intruder is no live worker: the lease is free, and taken again under a new epoch
        assert wait_until(lambda: spout.lease_epochs() == {shard: 2}, 15), spout.lease_epochs()
        again = later + drain(spout, 30 - len(later))
        assert sorted(t.message_id for t in again) == sorted(f"{s}:{q}" for s, q in placed)  # its acks were lost
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("shard ")]
    assert dropped == [f"shard {shard} dropped: its lease was lost to another worker"]


def test_a_worker_whose_registration_vanished_drops_its_shards_and_takes_them_again_under_a_new_epoch(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """As after a lost session: the worker's node is gone, so its leases may be anyone's. The worker drops its
    shards, joins again, takes the lease again under a new epoch and reads on from the stored checkpoint. On close
    it gives the lease back and leaves."""
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(10)])
    conflicts: list[Any] = []
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    zk = zookeeper.client()
    me = worker_node(zookeeper, stream, "w")
    with KinesisSpout(config(kinesalite, zookeeper, stream, "w"), on_checkpoint_conflict=conflicts.append) as spout:
        assert len(drain(spout, 5)) == 5 and spout.flush_checkpoints()  # stored: the 5th record
        assert spout.lease_epochs() == {shard: 0}
        zk.delete(me)
        assert wait_until(lambda: spout.lease_epochs() == {shard: 1}, 15), spout.lease_epochs()
        assert zk.exists(me) is not None
        again = drain(spout, 5)
        assert sorted(t.message_id for t in again) == sorted(f"{s}:{q}" for s, q in placed[5:])
        assert spout.flush_checkpoints() and conflicts == []
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("shard ")]
    assert dropped == [f"shard {shard} dropped: this worker may have lost its ZooKeeper session"]
    data, stat = zk.get(lease_node(zookeeper, stream, shard))
    assert (json.loads(data)["owner"], stat.version) == (None, 2), "close gave the lease back"
    assert zk.exists(me) is None


def two_shards_held_by_a(kinesalite: KinesisEndpoint, zookeeper: Any, on_conflict: Any = None, **extra: Any
                         ) -> tuple[str, str, str, KinesisSpout]:
    """A 2-shard stream of 40 records, all buffered by worker ``a``, which holds both leases."""
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    a = KinesisSpout(config(kinesalite, zookeeper, stream, "a", **extra), on_checkpoint_conflict=on_conflict).open()
    assert a.shard_ids == [first, second]
    assert wait_until(lambda: buffered(a) == 40, 15)
    return stream, first, second, a


def test_a_lease_handed_over_waits_for_its_records_in_flight_and_the_next_owner_reads_none_of_them_again(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """When ``b`` joins, ``a`` gives it one of its two shards: it stops reading it, waits for the records in flight
    (acked here during the wait, within message_timeout_s), writes their checkpoint, then releases the lease."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, message_timeout_s=2.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        assert len(held) == 40
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15, interval_s=0.01)
        a.ack_many(t.message_id for t in held)
        assert wait_until(lambda: b.shards == [second], 15) and a.shard_ids == [first]
        assert a.next_batch(timeout_s=0) == []  # and raises nothing a round of a's shard sync met
        more = kinesalite.put(stream, [f"s{i}".encode() for i in range(20)])
        new = {f"{s}:{q}" for s, q in more if s == second}
        assert new and wait_until(lambda: {m for m, _ in log} >= new, 15)
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert {m for m, _ in log} == new, "the next owner read records acked during the hand-over again"
    assert "still in flight" not in caplog.text


def test_a_lease_handed_over_with_records_never_acked_goes_after_message_timeout_and_they_are_read_again(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """The wait for the records in flight is bounded by message_timeout_s (1 s here, under the 10 s it is at most):
    then the lease goes anyway, and the next owner reads the records that were still in flight."""
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, message_timeout_s=1.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        assert len(held) == 40
        a.ack_many(t.message_id for t in held if t.record.shard_id == first)
        unacked = {t.message_id for t in held if t.record.shard_id == second}
        b.start()
        assert wait_until(lambda: b.shards == [second] and a.shard_ids == [first], 8), (b.shards, a.shard_ids)
        assert wait_until(lambda: {m for m, _ in log} >= unacked, 15)
        assert a.next_batch(timeout_s=0) == []  # and raises nothing a round of a's shard sync met
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert (f"handing {second} over with {len(unacked)} records still in flight: the next owner reads them again"
            in caplog.text)


def test_a_lease_lost_during_its_hand_over_has_its_last_checkpoint_refused_and_reported_and_nothing_is_lost(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """The lease of the shard ``a`` is handing over moves on while ``a`` waits for its records in flight: the
    checkpoint of those records is refused (a LeaseLost for a shard ``a`` no longer reads, passed to the handler),
    and the next owner reads them again. The shard's checkpoints are written once a minute, so the only write after
    its first is the hand-over's own, once its records in flight are done: the lease is lost then, not during the
    wait (``test_lease_hand_over.py`` has that case)."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    conflicts: list[Any] = []
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, conflicts.append, message_timeout_s=5.0,
                                                    checkpoint_interval_s=60.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    checkpoint = f"{zookeeper.prefix}/leases/{stream}/checkpoints/{second}"
    try:
        held = drain(a, 40, ack=False)
        assert len(held) == 40
        mine = [t for t in held if t.record.shard_id == second]
        a.ack(mine[0].message_id)  # the shard's first write, at once; its next one would be a minute away
        assert wait_until(lambda: zookeeper.client().exists(checkpoint) is not None, 10)
        held = [t for t in held if t is not mine[0]]
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15, interval_s=0.01)
        zookeeper.client().set(lease_node(zookeeper, stream, second), b'{"owner": "intruder"}')
        a.ack_many(t.message_id for t in held)
        assert wait_until(lambda: bool(conflicts), 15), "the refused checkpoint was not reported"
        assert [(type(c), c.shard_id) for c in conflicts] == [(LeaseLost, second)]
        assert wait_until(lambda: b.shards == [second], 15) and a.shard_ids == [first]
        again = {t.message_id for t in mine[1:]}
        assert wait_until(lambda: {m for m, _ in log} >= again, 15)
        assert a.next_batch(timeout_s=0) == []  # and raises nothing a round of a's shard sync met
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert "handler raised" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.getMessage().startswith("shard ")], \
        "a shard no longer read was dropped"
