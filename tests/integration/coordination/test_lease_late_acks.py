"""Acks that arrive after their shard was handed over to another worker: they move no checkpoint of the old owner
and count as unknown ids, and the new owner reads those records again. kinesalite and a real ZooKeeper through the
fixtures; worker ``b`` is a lease worker of the support module."""

from __future__ import annotations

import logging
import threading
from typing import Any

from kinesis_spout import KinesisSpout
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

from .support import buffered, config, handing_back, worker


def test_acks_after_the_hand_over_move_no_checkpoint_and_the_next_owner_reads_those_records_again(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """``a`` holds both shards with every record in flight; ``b`` joins and ``a`` hands ``second`` over. The
    hand-over waits its bound (the 1 s message timeout) and gives the lease back with the records still in flight.
    ``a``'s acks of them come too late: ignored and counted, no checkpoint written; ``b`` reads them again."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    a = KinesisSpout(config(kinesalite, zookeeper, stream, "a", message_timeout_s=1.0)).open()
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        assert a.shard_ids == [first, second]
        assert wait_until(lambda: buffered(a) == 40, 15)
        held = [t for t in drain(a, 40, ack=False) if t.record.shard_id == second]
        assert held
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15)
        assert wait_until(lambda: b.shards == [second] and a.shard_ids == [first], 20), (a.shard_ids, b.shards)
        assert f"handing {second} over with {len(held)} records still in flight" in caplog.text
        writes, unknown = a.checkpoint_writes, a.unknown_message_ids
        a.ack_many(t.message_id for t in held)
        a.ack(held[0].message_id)
        assert a.unknown_message_ids == unknown + len(held) + 1
        assert a.flush_checkpoints()
        assert a.checkpoint_writes == writes and a.checkpoint_conflicts == 0
        again = {t.message_id for t in held}
        assert wait_until(lambda: {m for m, _ in log} >= again, 20), "b did not read the records in flight again"
        assert b.error is None
    finally:
        b.stop()
        a.close()
