"""A hand-over (a shard given up for balance) racing the rest of the spout: a lease lost while the hand-over waits
for the shard's records in flight, a give-back retried while the consumer keeps acking the shard the worker keeps.
kinesalite and a real ZooKeeper through the fixtures; worker ``b`` is a lease worker of the support module."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import Checkpoint, KinesisSpout, ZooKeeperCheckpointStore
from kinesis_spout.errors import LeaseLost
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain
from kinesis_spout.testing.zkproxy import Op, ZooKeeperFaultProxy

from .support import buffered, config, handing_back, lease, lease_node, move_lease, stored, worker


@pytest.fixture
def proxy(zookeeper: Any) -> Iterator[ZooKeeperFaultProxy]:
    with ZooKeeperFaultProxy(zookeeper.hosts) as running:
        yield running


def acks_until(spout: KinesisSpout, tuples: list[Any], done: Callable[[], bool]) -> list[float] | None:
    """The consumer acking ``tuples``, one every 0.2 s, until ``done()`` (within 20 s): how long each ack took, or
    None when ``done()`` never came true."""
    latencies: list[float] = []
    left = iter(tuples)

    def ack_one_and_look() -> bool:
        t = next(left, None)
        if t is not None:
            t0 = time.monotonic()
            spout.ack(t.message_id)
            latencies.append(time.monotonic() - t0)
        return done()

    return latencies if wait_until(ack_one_and_look, 20, interval_s=0.2) else None


def test_a_hand_over_never_blocks_the_acks_of_the_shards_its_worker_keeps(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """``a`` hands ``second`` to ``b`` once its records are acked; the hand-over then waits for ``second``'s
    checkpoint, which the checkpoint writer makes under the spout's lock. Meanwhile the consumer keeps acking
    ``first``: no ack waits on the hand-over, and the lease goes once the checkpoint is stored."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    a = KinesisSpout(config(kinesalite, zookeeper, stream, "a", message_timeout_s=30.0,
                            checkpoint_interval_s=60.0)).open()
    assert wait_until(lambda: buffered(a) == 40, 15)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        firsts = [t for t in held if t.record.shard_id == first]
        seconds = [t for t in held if t.record.shard_id == second]
        assert len(firsts) > 3 and len(seconds) > 1
        a.ack(seconds[0].message_id)  # second's first write, at once: the next one is the hand-over's own
        assert wait_until(lambda: stored(zookeeper, stream, second) == seconds[0].record.sequence_number, 10)
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15, interval_s=0.01)
        a.ack_many(t.message_id for t in seconds[1:])
        latencies = acks_until(a, firsts, lambda: b.shards == [second])
        assert latencies is not None, f"the lease of {second} was not given back: {lease(zookeeper, stream, second)}"
        assert max(latencies, default=0.0) < 1.0, f"an ack waited {max(latencies):.1f} s behind the hand-over"
        assert stored(zookeeper, stream, second) == seconds[-1].record.sequence_number
        assert b.error is None
    finally:
        b.stop()
        a.close()


def test_a_lease_lost_while_its_hand_over_waits_ends_the_wait_and_the_spout_raises_nothing(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """``a`` hands ``second`` to ``b`` and waits for its records in flight; meanwhile the lease moves on and the
    checkpoint of the first record acked is refused (``LeaseLost``), which drops the shard. The hand-over ends at
    once (the shard is no longer ``a``'s to give back), ``a`` raises nothing, and ``b`` reads the records that were
    in flight again."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    conflicts: list[Any] = []
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    a = KinesisSpout(config(kinesalite, zookeeper, stream, "a", message_timeout_s=30.0),
                     on_checkpoint_conflict=conflicts.append).open()
    assert wait_until(lambda: buffered(a) == 40, 15)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        mine = [t for t in held if t.record.shard_id == second]
        assert len(mine) > 1
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15, interval_s=0.01)
        move_lease(zookeeper, stream, second, "intruder")
        a.ack(mine[0].message_id)  # the shard's first checkpoint: written at once, and refused
        assert wait_until(lambda: bool(conflicts), 10), "the refused checkpoint was not reported"
        assert [(type(c), c.shard_id) for c in conflicts] == [(LeaseLost, second)]
        ended = f"hand-over of {second} ended: its lease was lost"
        assert wait_until(lambda: ended in caplog.text or "shard sync of" in caplog.text, 5), \
            "the hand-over kept waiting for records of a shard that was dropped"
        assert a.next_batch(timeout_s=0) == []  # raises nothing a round of a's shard sync met
        assert wait_until(lambda: b.shards == [second], 15) and a.shard_ids == [first]
        again = {t.message_id for t in mine[1:]}
        assert wait_until(lambda: {m for m, _ in log} >= again, 15)
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert "shard sync of" not in caplog.text


def test_a_retried_give_back_never_blocks_the_consumer_and_frees_the_lease_once_zookeeper_answers(
        kinesalite: KinesisEndpoint, zookeeper: Any, proxy: ZooKeeperFaultProxy, caplog: Any) -> None:
    """``a`` hands ``second`` to ``b``; its checkpoint is stored but the write that frees the lease never reaches
    ZooKeeper. Once ZooKeeper answers again, the next round gives the lease back, while the consumer keeps acking
    the shard ``a`` keeps (whose checkpoint is pending: its next write is 60 s away): no ack waits on the give-back."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    through_proxy = SimpleNamespace(hosts=proxy.hosts, prefix=zookeeper.prefix)
    a = KinesisSpout(config(kinesalite, through_proxy, stream, "a", zookeeper_session_timeout_s=30.0,
                            zookeeper_deadline_s=2.0, checkpoint_interval_s=60.0)).open()
    assert wait_until(lambda: buffered(a) == 40, 15)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        firsts = [t for t in held if t.record.shard_id == first]
        seconds = [t for t in held if t.record.shard_id == second]
        assert len(firsts) > 3 and seconds
        a.ack(firsts[0].message_id)  # first's first write: at once; its next one is 60 s away
        a.ack_many(t.message_id for t in seconds)
        assert wait_until(lambda: stored(zookeeper, stream, first) == firsts[0].record.sequence_number
                          and stored(zookeeper, stream, second) == seconds[-1].record.sequence_number, 10)
        proxy.cut_request(Op.MULTI, hold=True)  # the give-back's write of `second` never reaches ZooKeeper
        b.start()
        failed = f"releasing {lease_node(zookeeper, stream, second)} failed"
        assert wait_until(lambda: failed in caplog.text, 20), caplog.text
        a.ack(firsts[1].message_id)  # an ordinary ack of the shard a keeps: pending, due in 60 s
        proxy.release()
        latencies = acks_until(a, firsts[2:], lambda: b.shards == [second])
        assert latencies is not None, f"the lease of {second} was not given back: {lease(zookeeper, stream, second)}"
        assert max(latencies, default=0.0) < 1.0, f"an ack waited {max(latencies):.1f} s behind the give-back"
        assert a.shard_ids == [first]
        assert a.next_batch(timeout_s=0) == []
        assert b.error is None
    finally:
        b.stop()
        a.close()


class LateLeaseLostStore(ZooKeeperCheckpointStore):
    """A real ZooKeeper store whose saves wait for ``enter`` before writing, and whose ``LeaseLost`` is reported
    only once ``report`` is set (``refused`` says one is waiting): a refusal of an earlier epoch that reaches the
    spout after the worker took the lease again."""

    enter: threading.Event
    report: threading.Event
    refused: threading.Event

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.enter.wait(20)
        try:
            super().save(checkpoint, force=force)
        except LeaseLost:
            self.refused.set()
            self.report.wait(20)
            raise


def test_a_refusal_of_an_earlier_epoch_leaves_the_lease_the_worker_took_again_alone(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """``a``'s checkpoint write at epoch 0 is refused (the lease moved on to a worker that is not live); before the
    refusal reaches the spout, ``a`` has dropped the shard, taken the lease again (epoch 2) and reads the shard. The
    late refusal is reported to the handler, but drops neither the shard nor the lease ``a`` holds now, and the
    shard's checkpoints are written again."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(10)])
    (shard,) = kinesalite.shard_ids(stream)
    cfg = config(kinesalite, zookeeper, stream, "a")
    store = LateLeaseLostStore.from_config(cfg)
    store.enter, store.report, store.refused = threading.Event(), threading.Event(), threading.Event()
    conflicts: list[Any] = []
    a = KinesisSpout(cfg, store, on_checkpoint_conflict=conflicts.append).open()
    try:
        assert wait_until(lambda: buffered(a) == 10, 15) and a.lease_epochs() == {shard: 0}
        held = drain(a, 10, ack=False)
        a.ack(held[0].message_id)  # its write waits at the store's door
        move_lease(zookeeper, stream, shard, "intruder")  # epoch 1
        store.enter.set()
        assert store.refused.wait(10), "the write at epoch 0 was not refused"
        assert wait_until(lambda: a.lease_epochs() == {shard: 2} and a.shard_ids == [shard], 15), \
            "a did not take the lease again"
        store.report.set()
        assert wait_until(lambda: bool(conflicts), 10)
        assert [(type(c), c.shard_id) for c in conflicts] == [(LeaseLost, shard)]
        assert a.shard_ids == [shard] and a.lease_epochs() == {shard: 2}, "a late refusal dropped the lease held now"
        assert lease(zookeeper, stream, shard) == ("a", 2)
        again = drain(a, 10)
        assert len(again) == 10
        assert wait_until(lambda: stored(zookeeper, stream, shard) == again[-1].record.sequence_number, 10)
    finally:
        store.enter.set()
        store.report.set()
        a.close()
