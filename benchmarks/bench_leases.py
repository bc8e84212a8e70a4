"""Leases: how fast shards change hands, what a hand-over costs, and what idle workers cost ZooKeeper.

Worker processes (``python -m kinesis_spout.testing.lease_worker``, each a KinesisSpout with
``coordination="leases"``) share an 8-shard kinesalite stream while a producer adds about 400 records/s. Each run:
two workers start and split the shards; a third joins (**rebalance**: from its start until the eight shards are
spread evenly over the three); all three idle for a few seconds while ZooKeeper's request count is sampled
(**ZooKeeper requests/s per worker at rest**); the third is SIGKILLed (**failover after SIGKILL**: until the two
survivors own everything; bounded below by the session timeout, shown in the row); a fourth joins and is then
stopped with SIGTERM (**failover after a clean stop**: it gives its leases back itself). **Replayed records** are
deliveries of a record already delivered, counted over each hand-over's window.
"""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.context import BenchContext
from benchmarks.stats import summary
from kinesis_spout.testing.kinesis import put_records, wait_for_stream
from kinesis_spout.testing.lease_worker import WorkerProcesses, spread_evenly
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zookeeper import four_letter

TITLE = "Leases: failover, rebalance, replays and ZooKeeper load"
SHARDS = 8

SIZES = {
    "full": {"repeats": 3, "session_s": 4.0, "rest_s": 5.0},
    "quick": {"repeats": 2, "session_s": 4.0, "rest_s": 3.0},
    "smoke": {"repeats": 1, "session_s": 2.0, "rest_s": 1.0},
}

COLUMNS = [
    ("case", "case", "{}"),
    ("seconds", "seconds", "fig2"),
    ("replayed", "replayed records", "fig0"),
    ("zk_requests_per_s_per_worker", "ZK requests/s per worker", "fig1"),
    ("session_timeout_s", "session timeout s", "{}"),
]


def _zk_requests(port: int) -> int:
    """ZooKeeper's count of packets received (``mntr``), to measure requests over an interval."""
    for line in four_letter("127.0.0.1", port, "mntr").splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[-1])
    return 0


def _replays(workers: WorkerProcesses) -> int:
    deliveries = workers.deliveries()
    return len(deliveries) - len({m for m, _, _ in deliveries})


def _one_run(ctx: BenchContext, size: dict[str, Any], directory: Path) -> dict[str, float]:
    from kazoo.client import KazooClient

    endpoint = ctx.endpoint("kinesalite")
    client = endpoint.client()
    stream = f"bench-leases-{ctx.unique_app('s')}"
    client.create_stream(StreamName=stream, ShardCount=SHARDS)
    wait_for_stream(client, stream, timeout_s=60)
    app, prefix = ctx.unique_app("leases"), "/kinesis_spout_bench"
    base = f"{prefix}/{app}/{stream}"
    hosts = ctx.zookeeper_hosts
    port = int(hosts.rsplit(":", 1)[1])
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=15)
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            put_records(client, stream, [f"r{n + i}".encode() for i in range(40)],
                        partition_keys=[f"k{(n + i) % 64}" for i in range(40)])
            n += 40
            stop.wait(0.1)

    workers = WorkerProcesses(stream=stream, endpoint_url=endpoint.endpoint_url, zookeeper=hosts, prefix=prefix,
                              app=app, directory=directory, session_timeout_s=size["session_s"])
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    out: dict[str, float] = {}
    try:
        workers.start("w1")
        workers.start("w2")
        if not wait_until(lambda: spread_evenly(zk, base, {"w1", "w2"}, SHARDS), 60):
            raise RuntimeError("two workers did not split the shards within 60 s")
        t0 = time.monotonic()
        workers.start("w3")
        wait_until(lambda: spread_evenly(zk, base, {"w1", "w2", "w3"}, SHARDS), 60, interval_s=0.02)
        out["rebalance"] = time.monotonic() - t0
        stop.set()
        producer.join(30)
        time.sleep(1.0)  # let the last records be read before measuring at rest
        before, t0 = _zk_requests(port), time.monotonic()
        time.sleep(size["rest_s"])
        out["zk_rest"] = (_zk_requests(port) - before) / (time.monotonic() - t0) / 3
        stop.clear()
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()

        def hand_over(name: str, sig: int) -> tuple[float, int]:
            """Seconds until the survivors own every shard after ``sig`` to ``name``, and the records replayed."""
            time.sleep(1.0)  # steady state first
            replays, t0 = _replays(workers), time.monotonic()
            workers.signal(name, sig)
            wait_until(lambda: spread_evenly(zk, base, {"w1", "w2"}, SHARDS), 60, interval_s=0.02)
            seconds = time.monotonic() - t0
            time.sleep(2.0)  # the new owners read what the old one left
            return seconds, _replays(workers) - replays

        out["kill"], out["kill_replays"] = hand_over("w3", signal.SIGKILL)
        workers.start("w4")
        wait_until(lambda: spread_evenly(zk, base, {"w1", "w2", "w4"}, SHARDS), 60)
        out["clean"], out["clean_replays"] = hand_over("w4", signal.SIGTERM)
    finally:
        stop.set()
        workers.stop_all()
        zk.stop()
        zk.close()
    return out


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    runs = []
    for i in range(size["repeats"]):
        with tempfile.TemporaryDirectory(prefix="bench-leases-") as tmp:
            runs.append(_one_run(ctx, size, Path(tmp)))
        ctx.progress(f"leases: run {i + 1}/{size['repeats']}: failover after SIGKILL {runs[-1]['kill']:.2f} s, "
                     f"after a clean stop {runs[-1]['clean']:.2f} s, rebalance {runs[-1]['rebalance']:.2f} s")
    common = {"kind": "leases", "emulator": "kinesalite", "shards": SHARDS, "repeats": size["repeats"],
              "session_timeout_s": size["session_s"]}
    return [
        {**common, "case": "failover after SIGKILL", "seconds": summary([r["kill"] for r in runs]),
         "replayed": summary([r["kill_replays"] for r in runs])},
        {**common, "case": "failover after a clean stop (SIGTERM)", "seconds": summary([r["clean"] for r in runs]),
         "replayed": summary([r["clean_replays"] for r in runs])},
        {**common, "case": "rebalance when a third worker joins", "seconds": summary([r["rebalance"] for r in runs])},
        {**common, "case": "three workers at rest",
         "zk_requests_per_s_per_worker": summary([r["zk_rest"] for r in runs])},
    ]


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_case = {r["case"]: r for r in rows}
    kill = by_case["failover after SIGKILL"]
    clean = by_case["failover after a clean stop (SIGTERM)"]
    return [
        {"figure": f"lease failover after SIGKILL (session timeout {kill['session_timeout_s']:g} s)",
         "value": f"{kill['seconds']['median']:.2f} s", "goal": "<= session timeout + 2 s",
         "met": kill["seconds"]["median"] <= kill["session_timeout_s"] + 2},
        {"figure": "lease failover after a clean stop, records replayed",
         "value": f"{clean['seconds']['median']:.2f} s, {clean['replayed']['median']:.0f}", "goal": "no replays",
         "met": clean["replayed"]["median"] == 0},
    ]
