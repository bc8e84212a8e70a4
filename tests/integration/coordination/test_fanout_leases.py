"""Lease workers reading through enhanced fan-out (retrieval="fanout") on kinesis-local: shards handed over between
workers are subscribed to by their new owner (retrying while the old owner's subscription still holds them), and
nothing is lost or delivered twice."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import ConsumerThread

from .support import config, worker


def test_fan_out_workers_hand_shards_over_without_loss_or_replays(kinesis_local: KinesisEndpoint,
                                                                   zookeeper: Any) -> None:
    stream = kinesis_local.create_stream(shards=4)
    placed = kinesis_local.put(stream, [f"r{i}".encode() for i in range(80)])
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    a = worker(config(kinesis_local, zookeeper, stream, "a", retrieval="fanout"), log, lock).start()
    b: ConsumerThread | None = None
    try:
        assert wait_until(lambda: len(a.shards) == 4, 15), f"a holds {a.shards}"
        assert wait_until(lambda: len(log) == 80, 20)
        b = worker(config(kinesis_local, zookeeper, stream, "b", retrieval="fanout"), log, lock).start()
        assert wait_until(lambda: len(a.shards) == 2 and len(b.shards) == 2, 20), (a.shards, b.shards)
        placed += kinesis_local.put(stream, [f"s{i}".encode() for i in range(80)])
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, 30)
        b.stop()
        assert wait_until(lambda: len(a.shards) == 4, 15), "a did not take back what b gave up on close"
        placed += kinesis_local.put(stream, [f"t{i}".encode() for i in range(40)])
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, 30)
        assert a.error is None and b.error is None
        assert all(m.subscriptions >= 1 for m in a.spout.metrics())  # read through fan-out, not polling
    finally:
        a.stop()
        if b is not None:
            b.stop()
    times = Counter(m for m, _ in log)
    assert {m for m, n in times.items() if n > 1} == set(), "a hand-over replayed records"
    assert {w for _, w in log} == {"a", "b"}
