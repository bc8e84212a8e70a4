"""Lease workers at scale: N worker processes (``python -m kinesis_spout.testing.lease_worker``), each on a node of
its own, share an S-shard kinesalite stream while one record is put to every shard every few seconds.

Phases, each timed from its own start: **balance** (all N started at once: until every shard has exactly one
live owner, then until no worker holds more than ``S // N + 1``, then until every count is within one), with the
lease **moves** meanwhile and where the seconds went (processes started until every worker registered in
ZooKeeper, until the first lease was taken, until all were owned); **at rest** (the producer paused, every record
read: ZooKeeper requests/s and znodes, each worker's CPU and memory, kinesalite's GetRecords calls/s per shard);
**failover** (K workers SIGKILLed at once: until ZooKeeper dropped their sessions, until the survivors own every
shard, until balanced again, moves); **join** (one more worker: seconds and moves until even again). At the end
the producer stops and every record put must be delivered: lost and duplicate deliveries counted.
"""

from __future__ import annotations

import math
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable

from benchmarks.scale.cluster import PREFIX, ScaleCluster
from benchmarks.scale.observe import LeaseWatch, ShardProducer, cpu_seconds, request_counts, rss_mib
from benchmarks.zk_requests import ZkRequestCounter
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zookeeper import four_letter


@dataclass(frozen=True)
class LeaseRunSize:
    """The sizes of a run (the runner's flags)."""

    shards: int
    workers: int
    kill: int
    session_timeout_s: float
    put_every_s: float
    rest_s: float
    phase_timeout_s: float
    stagger_s: float = 0.0  # seconds between two workers' launches in the balance phase (0: all at once)


def _timed(predicate: Callable[[], bool], since: float, timeout_s: float) -> float | None:
    """Seconds from ``since`` until ``predicate`` holds (polled every 0.1 s), None when it did not in time."""
    if wait_until(predicate, timeout_s, interval_s=0.1):
        return round(time.monotonic() - since, 2)
    return None


def _znodes(cluster: ScaleCluster) -> int | None:
    assert cluster.zookeeper is not None
    for line in four_letter(cluster.zookeeper.host, cluster.zookeeper.port, "mntr", timeout_s=5.0).splitlines():
        if line.startswith("zk_znode_count"):
            return int(line.split()[-1])
    return None


def _balance(cluster: ScaleCluster, watch: LeaseWatch, size: LeaseRunSize, log: Callable[[str], None]
             ) -> dict[str, Any]:
    names = {f"w{i + 1}" for i in range(size.workers)}
    cluster.make_nodes(sorted(names))
    t0 = time.monotonic()
    for i, name in enumerate(sorted(names, key=lambda n: int(n[1:]))):
        if i and size.stagger_s:
            time.sleep(size.stagger_s)
        cluster.start_worker(name)
    started_s = round(time.monotonic() - t0, 2)
    owned = _timed(lambda: watch.owned_by(names, size.shards), t0, size.phase_timeout_s)
    balanced = _timed(lambda: watch.balanced(names, size.shards), t0, size.phase_timeout_s)
    moves_at_balanced = watch.state()[2]
    even = _timed(lambda: watch.even(names, size.shards), t0, size.phase_timeout_s)
    moves = watch.state()[2]
    taken = watch.take_quantiles(t0, {s for s in watch.state()[0]})
    out = {"workers_started_s": started_s, "half_taken_s": taken["half"], "p90_taken_s": taken["p90"],
           "all_registered_s": watch.last("join", t0, names),
           "first_lease_s": watch.first("first-take", t0), "all_owned_s": owned, "balanced_s": balanced,
           "even_s": even, "moves_until_balanced": moves_at_balanced, "moves_until_even": moves,
           "moves_per_shard": round(moves / size.shards, 3), "fair_share_limit": size.shards // size.workers + 1,
           "peak_held": watch.peak_held}
    log(f"balance: owned {owned} s, balanced {balanced} s, even {even} s, {moves} moves, at most {watch.peak_held} "
        f"leases held by one worker")
    return out


def _rest(cluster: ScaleCluster, watch: LeaseWatch, producer: ShardProducer, size: LeaseRunSize,
          log: Callable[[str], None]) -> dict[str, Any]:
    assert cluster.zookeeper is not None and cluster.workers is not None
    workers = cluster.workers
    producer.pause()
    time.sleep(size.put_every_s + 1.0)  # a round being put ends
    wait_until(lambda: producer.produced() <= {m for m, _, _ in workers.deliveries()}, size.phase_timeout_s, 0.5)
    time.sleep(2.0)  # the last checkpoints written
    counter = ZkRequestCounter(cluster.zookeeper.hosts, PREFIX)
    pids = {name: proc.pid for name, proc in cluster.workers.procs.items() if proc.poll() is None}
    servers = {"zookeeper": cluster.zookeeper.pid, "kinesalite": cluster.kinesalite.pid if cluster.kinesalite else None}
    before, cpu_before, gets_before, t0 = counter.read(), {n: cpu_seconds(p) for n, p in pids.items()}, \
        request_counts(cluster.counts_file), time.monotonic()
    servers_before = {n: cpu_seconds(p) if p else None for n, p in servers.items()}
    time.sleep(size.rest_s)
    after, cpu_after, gets_after = counter.read(), {n: cpu_seconds(p) for n, p in pids.items()}, \
        request_counts(cluster.counts_file)
    servers_after = {n: cpu_seconds(p) if p else None for n, p in servers.items()}
    window = time.monotonic() - t0
    producer.resume()
    delta = after.minus(before)
    cpu = [(cpu_after[n] or 0.0) - (cpu_before[n] or 0.0) for n in pids]
    rss = [r for r in (rss_mib(p) for p in pids.values()) if r is not None]
    get_records = gets_after.get("GetRecords", 0) - gets_before.get("GetRecords", 0)
    out = {"window_s": round(window, 1), "zk_requests_per_s": round((delta.reads + delta.writes) / window, 1),
           "zk_writes_per_s": round(delta.writes / window, 2), "zk_reads_per_s": round(delta.reads / window, 1),
           "zk_reads_per_s_per_shard": round(delta.reads / window / size.shards, 3),
           # a worker's lease round at rest reads the leases' generation, not each lease: a constant per worker
           "zk_requests_per_s_per_worker": round((delta.reads + delta.writes) / window / len(pids), 2),
           "zk_packets_per_s": round(delta.packets / window, 1), "zk_znodes": _znodes(cluster),
           "zk_connections": after.connections,
           "worker_cpu_pct_mean": round(100 * sum(cpu) / len(cpu) / window, 2) if cpu else None,
           "worker_cpu_pct_max": round(100 * max(cpu) / window, 2) if cpu else None,
           "worker_rss_mib_mean": round(sum(rss) / len(rss), 1) if rss else None,
           "worker_rss_mib_max": round(max(rss), 1) if rss else None,
           "get_records_per_s_per_shard": round(get_records / window / size.shards, 3) if gets_after else None,
           **{f"{n}_cpu_pct": round(100 * ((servers_after[n] or 0.0) - (servers_before[n] or 0.0)) / window, 1)
              for n in servers if servers_before[n] is not None and servers_after[n] is not None},
           "kinesis_requests_per_s": round((sum(gets_after.values()) - sum(gets_before.values())) / window, 1)
           if gets_after else None}
    log(f"at rest: {out['zk_requests_per_s']} ZK requests/s, {out['zk_znodes']} znodes, "
        f"worker CPU {out['worker_cpu_pct_mean']} %, GetRecords/s per shard {out['get_records_per_s_per_shard']}")
    return out


def _failover(cluster: ScaleCluster, watch: LeaseWatch, size: LeaseRunSize, log: Callable[[str], None]
              ) -> dict[str, Any]:
    assert cluster.workers is not None
    names = sorted(cluster.workers.procs, key=lambda n: int(n[1:]))
    killed = set(names[-size.kill:])
    survivors = set(names) - killed
    orphans = {shard for shard, owner in watch.state()[0].items() if owner in killed}
    moves0, t0 = watch.state()[2], time.monotonic()
    for name in killed:
        cluster.workers.signal(name, signal.SIGKILL)
    owned = _timed(lambda: watch.owned_by(survivors, size.shards), t0, size.phase_timeout_s)
    balanced = _timed(lambda: watch.balanced(survivors, size.shards), t0, size.phase_timeout_s)
    even = _timed(lambda: watch.even(survivors, size.shards), t0, size.phase_timeout_s)
    retaken = watch.take_quantiles(t0, orphans)
    out = {"killed": size.kill, "orphaned_shards": len(orphans), "sessions_dropped_s": watch.last("leave", t0, killed),
           "first_retaken_s": retaken["first"], "half_retaken_s": retaken["half"], "p90_retaken_s": retaken["p90"],
           "owned_again_s": owned,
           "balanced_again_s": balanced, "even_again_s": even, "moves": watch.state()[2] - moves0,
           "session_timeout_s": size.session_timeout_s}
    log(f"failover after {size.kill} SIGKILLs: sessions dropped {out['sessions_dropped_s']} s, owned again "
        f"{owned} s, even {even} s")
    return out


def _join(cluster: ScaleCluster, watch: LeaseWatch, size: LeaseRunSize, log: Callable[[str], None]
          ) -> dict[str, Any]:
    assert cluster.workers is not None
    live = {n for n, p in cluster.workers.procs.items() if p.poll() is None}
    name = f"w{len(cluster.workers.procs) + 1}"
    cluster.make_nodes([name])
    moves0, t0 = watch.state()[2], time.monotonic()
    cluster.start_worker(name)
    members = live | {name}
    even = _timed(lambda: watch.even(members, size.shards), t0, size.phase_timeout_s)
    out = {"registered_s": watch.first("join", t0, name), "even_s": even, "moves": watch.state()[2] - moves0,
           "ideal_moves": size.shards // len(members)}
    log(f"join: even after {even} s, {out['moves']} moves (a fair share is {out['ideal_moves']})")
    return out


def run(cluster: ScaleCluster, size: LeaseRunSize, log: Callable[[str], None]) -> dict[str, Any]:
    """The four phases and the delivery check on a started ``cluster``; the figures, by phase."""
    assert cluster.kinesalite is not None and cluster.workers is not None
    workers = cluster.workers
    watch = LeaseWatch(cluster.zk_client(), cluster.base).start()
    producer = ShardProducer(cluster.kinesalite.endpoint_url, cluster.stream, size.put_every_s).start()
    figures: dict[str, Any] = {}
    try:
        figures["balance"] = _balance(cluster, watch, size, log)
        figures["rest"] = _rest(cluster, watch, producer, size, log)
        figures["failover"] = _failover(cluster, watch, size, log)
        figures["join"] = _join(cluster, watch, size, log)
    finally:
        producer.stop()
    produced = producer.produced()
    t0 = time.monotonic()
    wait_until(lambda: produced <= {m for m, _, _ in workers.deliveries()}, size.phase_timeout_s, 0.5)
    deliveries = [m for m, _, _ in workers.deliveries()]
    delivered = set(deliveries)
    figures["records"] = {"produced": len(produced), "delivered": len(produced & delivered),
                          "lost": len(produced - delivered), "duplicates": len(deliveries) - len(delivered),
                          "rounds": producer.rounds, "drain_s": round(time.monotonic() - t0, 1),
                          "lease_lost_refusals": workers.lease_lost()}
    log(f"records: {figures['records']}")
    return figures


def goals(figures: dict[str, Any], size: LeaseRunSize) -> list[tuple[str, str, bool | None]]:
    """The issue's goals for lease workers, each with what was measured and whether it was met (None: unknown)."""
    balance, failover, rest, records = (figures.get(k, {}) for k in ("balance", "failover", "rest", "records"))

    def within(value: float | None, limit: float) -> bool | None:
        return None if value is None else value <= limit

    bound = size.session_timeout_s + 10
    writes = rest.get("zk_writes_per_s")
    return [
        ("balanced within 60 s of start", f"{balance.get('balanced_s')} s", within(balance.get("balanced_s"), 60)),
        ("at most 1.2 lease moves per shard while balancing", f"{balance.get('moves_per_shard')}",
         within(balance.get("moves_per_shard"), 1.2)),
        (f"a SIGKILLed worker's shards owned again within the session timeout + 10 s ({bound:g} s)",
         f"{failover.get('owned_again_s')} s", within(failover.get("owned_again_s"), bound)),
        ("0 records lost", f"{records.get('lost')}", None if not records else records.get("lost") == 0),
        ("idle shards cost no ZooKeeper write (writes/s at rest: O(workers))", f"{writes} writes/s",
         None if writes is None else writes <= math.ceil(size.workers / 2)),
    ]
