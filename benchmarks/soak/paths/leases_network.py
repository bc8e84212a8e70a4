"""Path ``leases-network``: the lease workers of path ``leases``, each on a node of its own, their checkpoints and
leases on a three-server ZooKeeper ensemble (a node each), under network faults.

The network (:mod:`kinesis_spout.testing.nodes`): nodes ``zk1``..``zk3`` run the ensemble; node ``w0``..``w2``
each runs one worker slot and a :class:`~kinesis_spout.testing.slow_link.SlowLink` relay through which the worker
reaches the three servers and Kinesis (the soak's fault proxy, on the host's loopback, through a relay on the
host's bridge address). Faults, drawn with the seeded RNG (the network ones are :mod:`~.network`'s):

- ``zk-partition-short``: a worker's node cut from the three ZooKeeper nodes (it still reaches Kinesis) for 1 to
  2.5 s, less than its session timeout (4 s): the session survives;
- ``zk-partition-long``: the same for 6 to 9 s, longer than the session: the session expires at the servers, the
  other workers take the leases, and the cut-off worker still reaches Kinesis until it learns its session is lost:
  the split brain the lease fence exists for (fenced writes counted);
- ``zk-leader-partition``: the ensemble's leader cut from the two followers for 4 to 8 s, once every server serves
  again after the previous fault: a new leader is elected and the clients of the old one reconnect to the others;
- ``zk-minority``: a follower cut from the other two servers, and a worker's node cut from those two as well: the
  worker reaches only a server that lost the quorum (and serves no one) for 2 to 8 s;
- ``kinesis-partition``: a worker's node cut from Kinesis only (still reaching ZooKeeper) for 2 to 10 s: it keeps
  its leases and its reads stall;
- ``slow-link``: a worker's link slowed for 10 to 20 s (each chunk 300 ms +- 100 late per direction, 5 % of chunks
  a 1 s retransmission stall more: a model of a slow lossy link, see the relay's docstring; no netem here);
- ``sigkill-worker``: as on path ``leases``, a worker killed and replaced (a new worker id, same node).

At least 50 of 72 faults (the default) are network faults. Checks as on path ``leases``, with the per-kind
report (duplicates, fenced writes and the longest stall in each fault's window).
"""

from __future__ import annotations

import random

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.ledger import DeliveryLedger
from benchmarks.soak.paths.common import SESSION_S, soak_of
from benchmarks.soak.paths.leases import SHARDS, SIGKILL, WORKERS, LeaseWorkers, longest_overlap, shared_epochs
from benchmarks.soak.paths.network import (
    KINESIS,
    LEADER,
    MINORITY,
    NETWORK_KINDS,
    SLOW,
    ZK_LONG,
    ZK_SHORT,
    NodeNet,
    network_of,
)
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult

MIX = FaultMix(weights={ZK_SHORT: 2, ZK_LONG: 2, LEADER: 2, MINORITY: 1, KINESIS: 1, SLOW: 1, SIGKILL: 1},
               at_least={ZK_SHORT: 0.12, ZK_LONG: 0.12, LEADER: 0.12, MINORITY: 0.08, KINESIS: 0.08, SLOW: 0.08,
                         SIGKILL: 0.08})


class NetworkWorkers(LeaseWorkers):
    """The lease worker slots of :class:`LeaseWorkers`, slot ``i`` on node ``w{i}`` behind its slow-link relay."""

    def __init__(self, ctx: PathContext, stream: str, prefix: str, app: str, ledger: DeliveryLedger,
                 net: NodeNet) -> None:
        super().__init__(ctx, stream, prefix, app, ledger)
        self.net = net
        self.findings = net.findings

    def _new(self, slot: int) -> Consumer:
        self.generation += 1
        worker = f"w{slot}-{self.generation}"
        argv = [*self.argv, "--worker", worker, "--log", str(self.directory / f"{worker}.log")]
        argv[argv.index("--zookeeper") + 1] = self.net.zookeeper(slot)
        argv[argv.index("--endpoint-url") + 1] = self.net.endpoint_url(slot)
        consumer = Consumer(worker, self.net.command(slot, argv), self.directory / f"{worker}.out", child_env(),
                            CHECKOUT)
        consumer.start()
        return consumer

    def fault(self, kind: str, rng: random.Random) -> str:
        if kind not in NETWORK_KINDS:
            return super().fault(kind, rng)
        self.net.labels = [consumer.name for consumer in self.slots]
        return self.net.fault(kind, rng)


def run(ctx: PathContext) -> PathResult:
    """Run the leases-network path; see the module's docstring."""
    with network_of(ctx, [f"w{slot}" for slot in range(WORKERS)]) as net:
        if isinstance(net, str):
            return PathResult("leases-network", built=False, notes=[net])
        return _run(ctx, net)


def _run(ctx: PathContext, net: NodeNet) -> PathResult:
    with soak_of(ctx, "leases-network", shards=SHARDS, zk=net.zk, stalls_by_shard=True) as soak:
        workers = NetworkWorkers(ctx, soak.stream, soak.prefix, soak.app, soak.ledger, net)
        result = soak.run(workers, MIX, workers.start, workers.stop, fenced=workers.fenced)
    shared = shared_epochs(soak.ledger.lines)
    network_faults = sum(n for kind, n in result.faults.items() if kind in NETWORK_KINDS)
    result.notes.append(f"{network_faults} network faults; {workers.generation} worker processes in all; shards "
                        f"delivered by two workers under one lease epoch: {shared[:5] if shared else 'none'}")
    result.findings += workers.findings
    if shared:
        result.findings.append(f"FINDING: {len(shared)} shard epochs delivered by two workers: {shared[:5]}")
    result.notes.append(f"{workers.fenced()} checkpoint writes refused by the lease fence")
    overlap, where = longest_overlap(soak.ledger.lines)
    result.notes.append(f"longest overlap (two workers delivering one shard at once): {overlap:g} s"
                        f"{f' ({where})' if where else ''}; session timeout {SESSION_S:g} s")
    return result
