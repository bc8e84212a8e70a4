"""A batch acked whole after one of its shards was handed over to another worker: its records of that shard move no
checkpoint (the new owner reads them again and stores its own), its records of the shards still held are acked as
usual. kinesalite and a real ZooKeeper through the fixtures; worker ``b`` is a lease worker of the support module."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kinesis_spout import KinesisSpout, SpoutBatch
from kinesis_spout.errors import LeaseLost
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

from .support import buffered, config, handing_back, move_lease, stored, worker


def test_a_batch_acked_after_its_shard_was_handed_over_acks_only_the_shards_still_held(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """``a`` holds both shards and takes every record in one batch, unacked; ``b`` joins and ``a`` hands ``second``
    over (after its 1 s message timeout) with that batch's records still in flight. Then ``a`` acks the batch whole:
    ``first``'s checkpoint moves to its last record, ``second``'s is never written by ``a``; ``b`` reads ``second``'s
    records again and its checkpoint is ``b``'s."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    last = {shard: max((seq for s, seq in placed if s == shard), key=int) for shard in (first, second)}
    a = KinesisSpout(config(kinesalite, zookeeper, stream, "a", message_timeout_s=1.0)).open()
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        assert a.shard_ids == [first, second]
        assert wait_until(lambda: buffered(a) == 40, 15)
        batch = a.next_batch(max_records=40, timeout_s=5.0)
        deadline = time.monotonic() + 15
        while len(batch) < 40 and time.monotonic() < deadline:
            batch += a.next_batch(max_records=40 - len(batch), timeout_s=0.5)
        assert isinstance(batch, SpoutBatch) and len(batch) == 40
        held = {t.message_id for t in batch if t.record.shard_id == second}
        assert held
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15)
        assert wait_until(lambda: b.shards == [second] and a.shard_ids == [first], 20), (a.shard_ids, b.shards)
        assert wait_until(lambda: {m for m, _ in log} >= held, 20), "b did not read the records in flight again"
        assert wait_until(lambda: stored(zookeeper, stream, second) == last[second], 20)
        writes = a.checkpoint_writes
        batch.ack()
        batch.ack()
        assert a.flush_checkpoints()
        assert stored(zookeeper, stream, first) == last[first]
        assert a.checkpoint_writes == writes + 1 and a.checkpoint_conflicts == 0  # first's checkpoint only
        assert stored(zookeeper, stream, second) == last[second]
        assert b.error is None
    finally:
        b.stop()
        a.close()


def test_a_batch_of_a_dropped_shard_acks_nothing_of_the_shard_taken_again(kinesalite: KinesisEndpoint,
                                                                          zookeeper: Any) -> None:
    """Two batches of one shard are out; the lease moves on (an intruder), and the first batch's ack makes the
    refused write that drops the shard. The shard is taken again under a new epoch and read again from the start;
    the second batch, acked now, acks nothing of the new reading (whose checkpoint waits for those records until
    they are acked by their new ids), and then it is the shard's last record."""
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(30)])
    conflicts: list[Any] = []
    with KinesisSpout(config(kinesalite, zookeeper, stream, "w"), on_checkpoint_conflict=conflicts.append) as spout:
        assert wait_until(lambda: buffered(spout) == 30, 15)
        dropping = spout.next_batch(max_records=5, timeout_s=5)
        old = spout.next_batch(max_records=5, timeout_s=5)
        assert len(old) == len(dropping) == 5 and spout.lease_epochs() == {shard: 0}
        move_lease(zookeeper, stream, shard, "intruder")  # epoch 1
        dropping.ack()  # moves the checkpoint: its write is refused, the shard is dropped
        assert wait_until(lambda: bool(conflicts), 10) and isinstance(conflicts[0], LeaseLost)
        assert wait_until(lambda: spout.lease_epochs() == {shard: 2}, 15), spout.lease_epochs()
        again: list[Any] = []
        deadline = time.monotonic() + 20
        while sum(map(len, again)) < 30 and time.monotonic() < deadline:  # records, not batches
            batch = spout.next_batch(max_records=30 - sum(map(len, again)), timeout_s=0.5)
            if batch:
                again.append(batch)
        assert sorted(t.message_id for b in again for t in b) == sorted(f"{s}:{q}" for s, q in placed)
        held = {t.message_id for t in old}
        spout.ack_many(t.message_id for b in again for t in b if t.message_id not in held)
        assert spout.flush_checkpoints()
        assert stored(zookeeper, stream, shard) == placed[4][1]  # the new reading waits for ``old``'s records
        old.ack()
        assert spout.flush_checkpoints()
        assert stored(zookeeper, stream, shard) == placed[4][1], "a batch of the dropped shard acked the new reading"
        spout.ack_many(held)
        assert spout.flush_checkpoints()
        assert stored(zookeeper, stream, shard) == placed[-1][1]
        assert not drain(spout, 1, timeout_s=0.5)
