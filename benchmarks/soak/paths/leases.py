"""Path ``leases``: three lease workers (``coordination="leases"``, :mod:`kinesis_spout.testing.lease_worker`).

Faults: a worker SIGKILLed and replaced by a new one (a new worker id, as a restarted container gets), a worker
paused past its ZooKeeper session (SIGSTOP, then SIGCONT: a zombie that must not write a checkpoint its lease no
longer allows), ZooKeeper restarts and throttling bursts. Checks: nothing lost, checkpoints never backwards, and
(reported) no shard delivered by two workers under one lease epoch.
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import THROTTLE, ZOOKEEPER_RESTART, FaultMix
from benchmarks.soak.ledger import MESSAGE_ID, DeliveryLedger
from benchmarks.soak.paths.common import PAUSE_S, SESSION_S, soak_of
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult

WORKERS = 3
SHARDS = 6
SIGKILL = "sigkill-worker"
SESSION_EXPIRY = "session-expiry"
MIX = FaultMix(weights={SIGKILL: 5, SESSION_EXPIRY: 2, ZOOKEEPER_RESTART: 1.5, THROTTLE: 1.5},
               at_least={SIGKILL: 0.7, SESSION_EXPIRY: 0.1})  # 51 SIGKILLs of 72 faults


class LeaseWorkers:
    """``WORKERS`` slots, each running one lease worker process; a killed worker's slot gets a new worker id.

    Who calls: the fault cycle, on the path's thread (it owns ``slots``).
    """

    def __init__(self, ctx: PathContext, stream: str, prefix: str, app: str, ledger: DeliveryLedger) -> None:
        self.ctx = ctx
        self.argv = [sys.executable, "-m", "kinesis_spout.testing.lease_worker", "--stream", stream,
                     "--endpoint-url", ctx.servers.endpoint_url, "--zookeeper", ctx.servers.zookeeper.hosts,
                     "--prefix", prefix, "--app", app, "--session-timeout", str(SESSION_S)]
        self.directory = ledger.directory
        self.slots: list[Consumer] = []
        self.generation = 0
        self.retired: list[Consumer] = []

    def _new(self, slot: int) -> Consumer:
        self.generation += 1
        worker = f"w{slot}-{self.generation}"
        consumer = Consumer(worker, self.argv + ["--worker", worker, "--log", str(self.directory / f"{worker}.log")],
                            self.directory / f"{worker}.out", child_env(), CHECKOUT)
        consumer.start()
        return consumer

    def start(self) -> None:
        self.slots = [self._new(slot) for slot in range(WORKERS)]

    def revive(self) -> list[str]:
        return [c.exits[-1] for c in self.slots if c.revive()]

    def fault(self, kind: str, rng: random.Random) -> str:
        slot = rng.randrange(WORKERS)
        worker = self.slots[slot]
        if kind == SIGKILL:
            worker.kill()
            self.retired.append(worker)
            self.slots[slot] = self._new(slot)
            return f"worker {worker.name} SIGKILLed, {self.slots[slot].name} started in its place"
        if kind == SESSION_EXPIRY:
            worker.pause(PAUSE_S)
            return f"worker {worker.name} paused {PAUSE_S:g} s (session {SESSION_S:g} s)"
        raise ValueError(f"the leases path has no fault {kind!r}")

    def stop(self) -> None:
        for worker in self.slots:
            worker.stop()

    def fenced(self) -> int:
        """The checkpoint writes refused by the lease fence so far (``LEASE_LOST`` lines of every worker's log)."""
        logs = [self.directory / f"{c.name}.log" for c in self.slots + self.retired]
        return sum(1 for log in logs if log.exists()  # a worker killed as it started may have written none
                   for line in log.read_text().splitlines() if line.startswith("LEASE_LOST"))


def longest_overlap(lines: list[list[str]]) -> tuple[float, str]:
    """The longest time two workers delivered one shard at once, and where (``shard: old -> new``), from lease
    worker lines that carry a delivery time (``message_id worker epoch monotonic_s``; other lines are skipped).

    A worker delivers under the lease epoch it holds; a successor takes the lease under a higher epoch. A delivery
    at ``t`` under epoch ``e`` after another worker already delivered that shard under a higher epoch (first at
    ``t0``) is an overlap of ``t - t0``: the old owner, cut off, still delivering. A worker that later gets the
    shard back does so under a higher epoch still, and is no overlap."""
    events: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for parts in lines:
        if len(parts) >= 4 and MESSAGE_ID.match(parts[0]) and parts[2].isdigit():
            try:
                events[parts[0].rsplit(":", 1)[0]].append((float(parts[3]), int(parts[2]), parts[1]))
            except ValueError:
                continue
    best = (0.0, "")
    for shard, delivered in events.items():
        first: dict[int, tuple[float, str]] = {}  # epoch -> its first delivery (time, worker)
        for at, epoch, worker in sorted(delivered):
            first.setdefault(epoch, (at, worker))
            newer = [(t, w) for e, (t, w) in first.items() if e > epoch and w != worker]
            if newer:
                since, successor = min(newer)
                if at - since > best[0]:
                    best = (at - since, f"{shard}: {worker} -> {successor}")
    return round(best[0], 2), best[1]


def shared_epochs(lines: list[list[str]]) -> list[str]:
    """The ``shard@epoch`` delivered by more than one worker (lease worker lines: ``message_id worker epoch``)."""
    readers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for parts in lines:
        if len(parts) >= 3 and parts[2].lstrip("-").isdigit() and int(parts[2]) >= 0:
            readers[(parts[0].rsplit(":", 1)[0], parts[2])].add(parts[1])
    return [f"{shard}@{epoch}: {sorted(w)}" for (shard, epoch), w in sorted(readers.items()) if len(w) > 1]


def run(ctx: PathContext) -> PathResult:
    """Run the leases path; see the module's docstring."""
    with soak_of(ctx, "leases", shards=SHARDS) as soak:
        workers = LeaseWorkers(ctx, soak.stream, soak.prefix, soak.app, soak.ledger)
        result = soak.run(workers, MIX, workers.start, workers.stop, fenced=workers.fenced)
        shared = shared_epochs(soak.ledger.lines)
        result.notes.append(f"{workers.generation} worker processes in all; shards delivered by two workers under "
                            f"one lease epoch: {shared[:5] if shared else 'none'}")
        if shared:
            result.findings.append(f"FINDING: {len(shared)} shard epochs delivered by two workers: {shared[:5]}")
        result.notes.append(f"{workers.fenced()} checkpoint writes refused by the lease fence")
        overlap, where = longest_overlap(soak.ledger.lines)
        result.notes.append(f"longest overlap (two workers delivering one shard at once): {overlap:g} s"
                            f"{f' ({where})' if where else ''}")
        return result
