"""Three worker processes share an 8-shard stream through leases while a producer runs: one is SIGKILLed, one is
added, one is SIGSTOPped past its ZooKeeper session and resumed (a zombie). Nothing is lost, no shard is read by
two workers under one lease epoch, and the stored checkpoints never move backwards."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records
from kinesis_spout.testing.lease_worker import WorkerProcesses, lease_owners, spread_evenly
from kinesis_spout.testing.process import wait_until

SESSION_S = 4.0
APP = "lease-workers"

pytestmark = pytest.mark.crash


def spread(zk: Any, base: str, workers: set[str]) -> bool:
    return spread_evenly(zk, base, workers, shards=8)


def test_kill_add_and_a_zombie_lose_nothing_and_never_share_an_epoch(kinesalite: KinesisEndpoint, zookeeper: Any,
                                                                     tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=8)
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/{APP}/{stream}"
    sent: list[tuple[str, str]] = []
    stop = threading.Event()

    def produce() -> None:
        client, n = kinesalite.client(), 0
        while not stop.is_set():
            sent.extend(put_records(client, stream, [f"r{n + i}".encode() for i in range(40)],
                                    partition_keys=[f"k{(n + i) % 64}" for i in range(40)]))
            n += 40
            stop.wait(0.1)

    checkpoints: dict[str, list[int]] = defaultdict(list)

    def sample() -> None:  # the stored checkpoints over time, to check that none moves backwards
        while not stop.is_set():
            path = f"{base}/checkpoints"
            if zk.exists(path):
                for shard in zk.get_children(path):
                    seq = json.loads(zk.get(f"{path}/{shard}")[0]).get("sequence_number")
                    if seq is not None:
                        checkpoints[shard].append(int(seq))
            stop.wait(0.2)

    workers = WorkerProcesses(stream=stream, endpoint_url=kinesalite.endpoint_url, zookeeper=zookeeper.hosts,
                              prefix=zookeeper.prefix, app=APP, directory=tmp_path, session_timeout_s=SESSION_S)
    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=sample, daemon=True)]
    for thread in threads:
        thread.start()
    timings: dict[str, float] = {}
    try:
        for name in ("w1", "w2", "w3"):
            workers.start(name)
        assert wait_until(lambda: spread(zk, base, {"w1", "w2", "w3"}), 40), lease_owners(zk, base)
        t0 = time.monotonic()
        workers.signal("w3", signal.SIGKILL)
        assert wait_until(lambda: spread(zk, base, {"w1", "w2"}), 30), lease_owners(zk, base)
        timings["failover after SIGKILL"] = time.monotonic() - t0
        workers.start("w4")
        assert wait_until(lambda: spread(zk, base, {"w1", "w2", "w4"}), 40), lease_owners(zk, base)
        t0 = time.monotonic()
        workers.signal("w1", signal.SIGSTOP)  # a zombie: paused past its session
        assert wait_until(lambda: spread(zk, base, {"w2", "w4"}), 30), lease_owners(zk, base)
        timings["failover after SIGSTOP"] = time.monotonic() - t0
        workers.signal("w1", signal.SIGCONT)
        assert wait_until(lambda: spread(zk, base, {"w1", "w2", "w4"}), 40), lease_owners(zk, base)
        stop.set()
        for thread in threads:
            thread.join(30)
        everything = {f"{s}:{q}" for s, q in sent}
        assert wait_until(lambda: {m for m, _, _ in workers.deliveries()} >= everything, 60), \
            f"{len(everything - {m for m, _, _ in workers.deliveries()})} records never delivered"
    finally:
        stop.set()
        workers.stop_all()
    print(f"timings {timings}; {workers.lease_lost()} checkpoint writes refused by the fence; "
          f"{len(workers.deliveries())} deliveries of {len(sent)} records")
    readers: dict[tuple[str, int], set[str]] = defaultdict(set)
    for mid, worker, epoch in workers.deliveries():
        if epoch >= 0:
            readers[(mid.rsplit(":", 1)[0], epoch)].add(worker)
    assert {k: v for k, v in readers.items() if len(v) > 1} == {}, "two workers read a shard under one epoch"
    assert all(seqs == sorted(seqs) for seqs in checkpoints.values()), "a stored checkpoint moved backwards"
    assert all(p.returncode == 0 for n, p in workers.procs.items() if n != "w3"), \
        {n: workers.errors(n) for n, p in workers.procs.items() if p.returncode}
    last: dict[str, int] = {}
    for shard, seq in sent:
        last[shard] = max(last.get(shard, 0), int(seq))
    final = {s: int(json.loads(zk.get(f"{base}/checkpoints/{s}")[0])["sequence_number"]) for s in last}
    assert final == last
