"""Path ``leases-network``: the lease workers of path ``leases``, each on a node of its own, their checkpoints and
leases on a three-server ZooKeeper ensemble (a node each), under network faults.

The network (:mod:`kinesis_spout.testing.nodes`): nodes ``zk1``..``zk3`` run the ensemble; node ``w0``..``w2``
each runs one worker slot and a :class:`~kinesis_spout.testing.slow_link.SlowLink` relay through which the worker
reaches the three servers and Kinesis (the soak's fault proxy, on the host's loopback, through a relay on the
host's bridge address). Faults, drawn with the seeded RNG:

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
import time
from typing import Any

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.ledger import DeliveryLedger
from benchmarks.soak.paths.common import SESSION_S, soak_of
from benchmarks.soak.paths.leases import SHARDS, SIGKILL, WORKERS, LeaseWorkers, longest_overlap, shared_epochs
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult
from kinesis_spout.testing.nodes import Node, NodeNetwork
from kinesis_spout.testing.partitions import heal_from_host, heal_groups, partition_from_host, partition_groups
from kinesis_spout.testing.slow_link import SlowLink
from kinesis_spout.testing.zk_ensemble import ZooKeeperEnsemble

ZK_SHORT = "zk-partition-short"
ZK_LONG = "zk-partition-long"
LEADER = "zk-leader-partition"
SLOW = "slow-link"
MINORITY = "zk-minority"
KINESIS = "kinesis-partition"
NETWORK_KINDS = (ZK_SHORT, ZK_LONG, LEADER, MINORITY, KINESIS, SLOW)
MIX = FaultMix(weights={ZK_SHORT: 2, ZK_LONG: 2, LEADER: 2, MINORITY: 1, KINESIS: 1, SLOW: 1, SIGKILL: 1},
               at_least={ZK_SHORT: 0.12, ZK_LONG: 0.12, LEADER: 0.12, MINORITY: 0.08, KINESIS: 0.08, SLOW: 0.08,
                         SIGKILL: 0.08})


class NetworkWorkers(LeaseWorkers):
    """The lease worker slots of :class:`LeaseWorkers`, slot ``i`` on node ``w{i}`` behind its slow-link relay."""

    def __init__(self, ctx: PathContext, stream: str, prefix: str, app: str, ledger: DeliveryLedger,
                 ensemble: ZooKeeperEnsemble, nodes: list[Node], links: list[SlowLink], network: NodeNetwork) -> None:
        super().__init__(ctx, stream, prefix, app, ledger)
        self.network = network
        self.ensemble, self.nodes, self.links = ensemble, nodes, links
        self.findings: list[str] = []

    def _new(self, slot: int) -> Consumer:
        self.generation += 1
        worker = f"w{slot}-{self.generation}"
        link = self.links[slot]
        zookeeper = ",".join(link.address(node.name) for node in self.ensemble.nodes)
        argv = [*self.argv, "--worker", worker, "--log", str(self.directory / f"{worker}.log")]
        argv[argv.index("--zookeeper") + 1] = zookeeper
        argv[argv.index("--endpoint-url") + 1] = f"http://{link.address('kinesis')}"
        consumer = Consumer(worker, self.nodes[slot].command(argv), self.directory / f"{worker}.out", child_env(),
                            CHECKOUT)
        consumer.start()
        return consumer

    def _partition_leader(self, held: float) -> str:
        """Cut the leader from the other servers until a new one is elected and ``held`` seconds passed, once every
        server serves again (a server healed by the fault before may still be rejoining)."""
        if not self.ensemble.wait_formed(30):
            self.findings.append(f"FINDING: the ensemble was not whole 30 s after the last fault: "
                                 f"{self.ensemble.modes()}")
        try:
            leader = self.ensemble.wait_leader(30)
        except AssertionError as exc:
            self.findings.append(f"FINDING: no leader to partition: {exc}")
            return "no leader to partition"
        partition_groups([leader], self.ensemble.others(leader))
        try:
            elected = self.ensemble.wait_leader(30, other_than=leader).name
            time.sleep(held)  # the partition itself, not synchronisation
        except AssertionError as exc:
            elected = "none"
            self.findings.append(f"FINDING: no new leader elected with {leader.name} cut off: {exc}")
        finally:
            heal_groups([leader], self.ensemble.others(leader))
        return f"leader {leader.name} cut from the other servers for {held:.1f} s; elected: {elected}"

    def _minority(self, slot: int, held: float, rng: random.Random) -> str:
        """Cut a follower from the other servers and worker ``slot``'s node from those servers too."""
        try:
            leader = self.ensemble.wait_leader(30)
        except AssertionError as exc:
            self.findings.append(f"FINDING: no leader before a minority partition: {exc}")
            return "no leader"
        follower = rng.choice(self.ensemble.others(leader))
        majority = self.ensemble.others(follower)
        node = self.nodes[slot]
        partition_groups([follower, node], majority)
        try:
            time.sleep(held)  # the partition itself
        finally:
            heal_groups([follower, node], majority)
        return f"node {node.name} ({self.slots[slot].name}) reaching only follower {follower.name}, itself cut " \
               f"from the quorum, for {held:.1f} s"

    def fault(self, kind: str, rng: random.Random) -> str:
        if kind not in NETWORK_KINDS:
            return super().fault(kind, rng)
        if kind == LEADER:
            return self._partition_leader(rng.uniform(4.0, 8.0))
        slot = rng.randrange(WORKERS)
        node = self.nodes[slot]
        if kind == MINORITY:
            return self._minority(slot, rng.uniform(2.0, 8.0), rng)
        if kind == KINESIS:
            held = rng.uniform(2.0, 10.0)
            partition_from_host(self.network, node)
            try:
                time.sleep(held)  # the partition itself
            finally:
                heal_from_host(self.network, node)
            return f"node {node.name} ({self.slots[slot].name}) cut from Kinesis for {held:.1f} s"
        if kind == SLOW:
            held = rng.uniform(10.0, 20.0)
            self.links[slot].slow()
            try:
                time.sleep(held)  # the slow spell itself
            finally:
                self.links[slot].fast()
            return f"node {node.name} ({self.slots[slot].name}) slowed for {held:.1f} s"
        held = rng.uniform(1.0, 2.5) if kind == ZK_SHORT else rng.uniform(SESSION_S + 2.0, SESSION_S + 5.0)
        partition_groups([node], self.ensemble.nodes)
        try:
            time.sleep(held)  # the partition itself
        finally:
            heal_groups([node], self.ensemble.nodes)
        return f"node {node.name} ({self.slots[slot].name}) cut from ZooKeeper for {held:.1f} s " \
               f"(session {SESSION_S:g} s)"


def ensemble_client(ensemble: ZooKeeperEnsemble) -> Any:
    """A kazoo client of the ensemble from the host (which no fault cuts), retrying through elections."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    client = KazooClient(hosts=ensemble.hosts, timeout=10.0,
                         connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                         command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0))
    client.start(timeout=30)
    return client


def run(ctx: PathContext) -> PathResult:
    """Run the leases-network path; see the module's docstring."""
    with NodeNetwork() as network:
        if not network.can_cut_links:
            return PathResult("leases-network", built=False,
                              notes=[f"no network namespaces here ({network.reason}): the path needs them"])
        with ZooKeeperEnsemble.on_new_nodes(network) as ensemble:
            zk = ensemble_client(ensemble)
            try:
                return _run(ctx, network, ensemble, zk)
            finally:
                zk.stop()
                zk.close()


def _run(ctx: PathContext, network: NodeNetwork, ensemble: ZooKeeperEnsemble, zk: Any) -> PathResult:
    proxy = ctx.servers.endpoint_url.rsplit(":", 1)
    bridge = SlowLink(Node("host", network.host_address, None, None), {"kinesis": ("127.0.0.1", int(proxy[1]))},
                      directory=ctx.workdir, bind=network.host_address).start()
    nodes = [network.add_node(f"w{slot}") for slot in range(WORKERS)]
    host, port = bridge.address("kinesis").rsplit(":", 1)
    routes = {server.node.name: (server.node.address, server.client_port) for server in ensemble.servers}
    links = [SlowLink(node, {**routes, "kinesis": (host, int(port))}, directory=ctx.workdir,
                      seed=ctx.rng.randrange(10**9)).start() for node in nodes]
    try:
        with soak_of(ctx, "leases-network", shards=SHARDS, zk=zk, stalls_by_shard=True) as soak:
            workers = NetworkWorkers(ctx, soak.stream, soak.prefix, soak.app, soak.ledger, ensemble, nodes, links,
                                     network)
            workers.start()
            try:
                stats = soak.soak(workers, MIX, fenced=workers.fenced)
            finally:
                workers.stop()
            result = soak.finish(stats)
    finally:
        for link in [*links, bridge]:
            link.close()
    shared = shared_epochs(soak.ledger.lines)
    network_faults = sum(n for kind, n in stats.done.items() if kind in NETWORK_KINDS)
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
