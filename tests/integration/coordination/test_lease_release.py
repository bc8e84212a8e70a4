"""A lease given back by a spout: only after the shard's records in flight are done and their checkpoint is written,
and never forgotten while the lease still names the worker. Worker ``a`` talks to ZooKeeper through the fault proxy
(its session, 30 s, outlives every cut), worker ``b`` directly; kinesalite and a real ZooKeeper through the
fixtures."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from kinesis_spout import KinesisSpout
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain
from kinesis_spout.testing.zkproxy import ZK_RUNTIME_INCONSISTENCY, Op, ZooKeeperFaultProxy

from .support import buffered, config, lease, lease_node, stored, worker


@pytest.fixture
def proxy(zookeeper: Any) -> Iterator[ZooKeeperFaultProxy]:
    with ZooKeeperFaultProxy(zookeeper.hosts) as running:
        yield running


def two_shards_held_by_a(kinesalite: KinesisEndpoint, zookeeper: Any, proxy: ZooKeeperFaultProxy, **extra: Any
                         ) -> tuple[str, str, str, KinesisSpout]:
    """A 2-shard stream of 40 records, all buffered by worker ``a`` (through the proxy), which holds both leases."""
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    through_proxy = SimpleNamespace(hosts=proxy.hosts, prefix=zookeeper.prefix)
    cfg = config(kinesalite, through_proxy, stream, "a", zookeeper_session_timeout_s=30.0, zookeeper_deadline_s=2.0,
                 **extra)
    a = KinesisSpout(cfg).open()
    assert a.shard_ids == [first, second]
    assert wait_until(lambda: buffered(a) == 40, 15)
    return stream, first, second, a


def test_a_give_back_whose_write_never_reached_zookeeper_is_done_again_and_the_next_owner_reads_the_shard(
        kinesalite: KinesisEndpoint, zookeeper: Any, proxy: ZooKeeperFaultProxy, caplog: Any) -> None:
    """``a`` gives one of its two shards to ``b``, which joined; the write that frees the lease never reaches
    ZooKeeper and ``a`` stays cut off past its 2 s operation deadline (well within its session). The lease still
    names ``a``: ``a`` must give it back in a later round, or ``b`` waits for a live owner forever."""
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, proxy)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        assert len(drain(a, 40)) == 40 and a.flush_checkpoints()
        proxy.cut_request(Op.MULTI, hold=True)  # the write that gives the lease back
        b.start()
        proxy.wait_acted()
        failed = f"releasing {lease_node(zookeeper, stream, second)} failed within 2 s"
        assert wait_until(lambda: failed in caplog.text, 15), caplog.text
        assert lease(zookeeper, stream, second) == ("a", 0) and b.shards == []
        proxy.release()
        more = kinesalite.put(stream, [f"s{i}".encode() for i in range(20)])
        new = {f"{s}:{q}" for s, q in more if s == second}
        assert new and wait_until(lambda: {m for m, _ in log} >= new, 20), \
            f"b read {len(log)} records; lease of {second}: {lease(zookeeper, stream, second)}"
        assert b.shards == [second] and a.shard_ids == [first]
        assert b.error is None
        a.next_batch(timeout_s=0)  # raises nothing: the failed round was only logged
    finally:
        b.stop()
        a.close()
    assert {m for m, _ in log} == new, "b read records a had acked before the hand-over"


def test_a_lease_handed_over_stays_with_its_owner_until_its_records_in_flight_are_acked_and_their_checkpoint_stored(
        kinesalite: KinesisEndpoint, zookeeper: Any, proxy: ZooKeeperFaultProxy, caplog: Any) -> None:
    """``a`` hands ``second`` to ``b`` while all but the first of its records are in flight. The lease stays
    ``a``'s while ``a`` waits for their acks; once they are acked, the checkpoint write of the hand-over (the only
    write: the writer's own is 60 s away) is cut off, and the lease still stays ``a``'s. Only once that checkpoint
    is stored is the lease given back, and ``b`` reads none of those records again."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, proxy, message_timeout_s=30.0,
                                                    checkpoint_interval_s=60.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = [t for t in drain(a, 40, ack=False) if t.record.shard_id == second]
        assert len(held) > 1
        a.ack(held[0].message_id)  # written at once (the shard's first write); the next is 60 s away
        assert wait_until(lambda: stored(zookeeper, stream, second) == held[0].record.sequence_number, 10)
        b.start()
        assert wait_until(lambda: f"handing {second} over to another worker" in caplog.text, 15)
        assert lease(zookeeper, stream, second) == ("a", 0), "the lease went before its records in flight were done"
        proxy.cut_request(Op.MULTI, hold=True)  # the hand-over's checkpoint write never reaches ZooKeeper
        a.ack_many(t.message_id for t in held[1:])
        assert wait_until(lambda: proxy.acted == 1 or lease(zookeeper, stream, second) != ("a", 0), 15)
        assert lease(zookeeper, stream, second) == ("a", 0), "the lease went before the checkpoint was stored"
        assert stored(zookeeper, stream, second) == held[0].record.sequence_number and b.shards == []
        proxy.release()
        assert wait_until(lambda: b.shards == [second], 20), lease(zookeeper, stream, second)
        assert stored(zookeeper, stream, second) == held[-1].record.sequence_number
        more = kinesalite.put(stream, [f"s{i}".encode() for i in range(20)])
        new = {f"{s}:{q}" for s, q in more if s == second}
        assert new and wait_until(lambda: {m for m, _ in log} >= new, 20)
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert {m for m, _ in log} == new, "b read records acked during the hand-over again"
    assert "still in flight" not in caplog.text


def test_a_lease_handed_over_whose_checkpoint_cannot_be_written_is_kept_until_it_is(
        kinesalite: KinesisEndpoint, zookeeper: Any, proxy: ZooKeeperFaultProxy, caplog: Any) -> None:
    """ZooKeeper refuses ``a``'s checkpoint writes (an error answer to each) through the whole hand-over, while the
    lease could still be written: ``a`` keeps the lease rather than let ``b`` start before the acked records'
    checkpoint, and does not read the shard again meanwhile (round after round, it only tries the give-back); once
    the writes go through again, the checkpoint is stored, the lease goes, and ``b`` reads none of those records
    again."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, proxy, message_timeout_s=30.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = [t for t in drain(a, 40, ack=False) if t.record.shard_id == second]
        assert held
        b.start()
        assert wait_until(lambda: f"handing {second} over to another worker" in caplog.text, 15)
        proxy.refuse(Op.MULTI, ZK_RUNTIME_INCONSISTENCY, times=10_000)  # every fenced checkpoint write, unwritten
        a.ack_many(t.message_id for t in held)
        kept = f"keeps the lease of {second} until its checkpoint is stored"
        assert wait_until(lambda: kept in caplog.text or lease(zookeeper, stream, second) != ("a", 0), 20)
        assert lease(zookeeper, stream, second) == ("a", 0), "the lease went before the checkpoint was stored"
        assert stored(zookeeper, stream, second) is None
        assert wait_until(lambda: caplog.text.count(kept) >= 2, 30), "the give-back was not tried again"
        assert caplog.text.count(f"handing {second} over to another worker") == 1, "the shard was read again"
        assert not [r for r in caplog.records if r.getMessage().startswith("starting ") and second in r.getMessage()]
        assert a.shard_ids == [first]
        proxy.clear()
        assert wait_until(lambda: b.shards == [second], 20), lease(zookeeper, stream, second)
        assert stored(zookeeper, stream, second) == held[-1].record.sequence_number
        more = kinesalite.put(stream, [f"s{i}".encode() for i in range(20)])
        new = {f"{s}:{q}" for s, q in more if s == second}
        assert new and wait_until(lambda: {m for m, _ in log} >= new, 20)
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert {m for m, _ in log} == new, "b read records acked during the hand-over again"
