"""The node network the network-fault paths share, and the network faults they draw.

:func:`network_of` builds it: a three-server ZooKeeper ensemble (nodes ``zk1``..``zk3``), one node per consumer
slot, each with a :class:`~kinesis_spout.testing.slow_link.SlowLink` relay through which its process reaches the
three servers and Kinesis (the soak's fault proxy, on the host's loopback, through a relay on the host's bridge
address) and, with ``redis``, the soak's Redis (through a relay node of its own, ``redis``, so that a cut from
Kinesis, a cut from the host's bridge address, leaves Redis reachable). :meth:`NodeNet.fault` does one fault:

- ``zk-partition-short``: a slot's node cut from the three ZooKeeper nodes (it still reaches Kinesis and Redis)
  for 1 to 2.5 s, less than its session timeout: the session survives;
- ``zk-partition-long``: the same for 6 to 9 s, past the session: the session expires at the servers while the
  cut-off process still reaches Kinesis (and Redis) until it learns its session is lost;
- ``zk-leader-partition``: the ensemble's leader cut from the two followers for 4 to 8 s, once every server
  serves again after the previous fault: a new leader is elected and the clients of the old one reconnect;
- ``zk-minority``: a follower cut from the other two servers, and a slot's node cut from those two as well: the
  process reaches only a server that lost the quorum (and serves no one) for 2 to 8 s;
- ``kinesis-partition``: a slot's node cut from Kinesis only (still reaching ZooKeeper and Redis) for 2 to 10 s;
- ``slow-link``: a slot's link slowed for 10 to 20 s (each chunk 300 ms +- 100 late per direction, 5 % of chunks
  a 1 s retransmission stall more: a slow lossy link, see the relay's docstring; no netem on this kernel).

Who calls: the paths ``leases-network``, ``spout-network``, ``pipeline-network``, ``exactly-once-network`` and
``readstream-driver-network``, on their thread.
"""

from __future__ import annotations

import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.paths.common import SESSION_S
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
#: the shares of the network kinds in the paths of one consumer node (``spout-network``, ``pipeline-network``,
#: ``exactly-once-network``): 52 network faults of 72, every kind at least 6 times (a quick run of 3 faults
#: does the first three kinds)
NETWORK_SHARES = {ZK_SHORT: 0.14, ZK_LONG: 0.14, LEADER: 0.12, KINESIS: 0.12, MINORITY: 0.08, SLOW: 0.08}


class NetworkFaults:
    """A path's target whose network faults (:data:`NETWORK_KINDS`) go to its node network (``self.net``, set by
    the subclass) and the others to the target it is mixed into: ``class T(NetworkFaults, SpoutTarget)``."""

    net: NodeNet

    def fault(self, kind: str, rng: random.Random) -> str:
        if kind in NETWORK_KINDS:
            return self.net.fault(kind, rng)
        return super().fault(kind, rng)  # type: ignore[misc,no-any-return]  # the target mixed into


@dataclass
class NodeNet:
    """The network of one path: its nodes (slot ``i`` on ``nodes[i]``, reaching out through ``links[i]``), the
    ensemble and a kazoo client of it from the host (which no fault cuts). ``findings``: what went wrong in the
    ensemble's faults (no leader, no election), which the path reports."""

    network: NodeNetwork
    ensemble: ZooKeeperEnsemble
    zk: Any
    nodes: list[Node]
    links: list[SlowLink]
    bridge_url: str = ""  # the Kinesis endpoint every node reaches (the host's relay on the bridge)
    labels: list[str] = field(default_factory=list)  # what runs on each slot, for the fault descriptions
    findings: list[str] = field(default_factory=list)

    def zookeeper(self, slot: int) -> str:
        """The connection string of the ensemble as seen from slot ``slot``'s node (through its relay)."""
        return ",".join(self.links[slot].address(node.name) for node in self.ensemble.nodes)

    def endpoint_url(self, slot: int) -> str:
        """The Kinesis endpoint as seen from slot ``slot``'s node."""
        return f"http://{self.links[slot].address('kinesis')}"

    def redis_url(self, slot: int) -> str:
        """The Redis URL as seen from slot ``slot``'s node (``network_of(..., redis=True)`` only)."""
        return f"redis://{self.links[slot].address('redis')}"

    def command(self, slot: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run in slot ``slot``'s node."""
        return self.nodes[slot].command(argv)

    def _label(self, slot: int) -> str:
        node = self.nodes[slot]
        return f"node {node.name} ({self.labels[slot]})" if slot < len(self.labels) else f"node {node.name}"

    def fault(self, kind: str, rng: random.Random) -> str:
        """Do the network fault ``kind`` (one of :data:`NETWORK_KINDS`) on a slot drawn from ``rng`` (none for a
        leader partition); returns what was done. Blocks for the fault's length."""
        if kind == LEADER:
            return self._partition_leader(rng.uniform(4.0, 8.0))
        slot = rng.randrange(len(self.nodes))
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
            return f"{self._label(slot)} cut from Kinesis for {held:.1f} s"
        if kind == SLOW:
            held = rng.uniform(10.0, 20.0)
            self.links[slot].slow()
            try:
                time.sleep(held)  # the slow spell itself
            finally:
                self.links[slot].fast()
            return f"{self._label(slot)} slowed for {held:.1f} s"
        if kind not in (ZK_SHORT, ZK_LONG):
            raise ValueError(f"no network fault {kind!r}; the kinds are {NETWORK_KINDS}")
        held = rng.uniform(1.0, 2.5) if kind == ZK_SHORT else rng.uniform(SESSION_S + 2.0, SESSION_S + 5.0)
        partition_groups([node], self.ensemble.nodes)
        try:
            time.sleep(held)  # the partition itself
        finally:
            heal_groups([node], self.ensemble.nodes)
        return f"{self._label(slot)} cut from ZooKeeper for {held:.1f} s (session {SESSION_S:g} s)"

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
        """Cut a follower from the other servers and slot ``slot``'s node from those servers too."""
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
        return f"{self._label(slot)} reaching only follower {follower.name}, itself cut from the quorum, for " \
               f"{held:.1f} s"


def reached_from(ctx: PathContext, net: NodeNet | None) -> tuple[str, str]:
    """The Kinesis endpoint and ZooKeeper connection string a process uses: on slot 0's node of ``net``, through
    that node's relay; with no ``net``, on the host (the soak's servers). Who calls: the Spark driver paths, to build
    their driver's command line."""
    if net is None:
        return ctx.servers.endpoint_url, ctx.servers.zookeeper.hosts
    return net.endpoint_url(0), net.zookeeper(0)


def ensemble_client(ensemble: ZooKeeperEnsemble) -> Any:
    """A kazoo client of the ensemble from the host (which no fault cuts), retrying through elections."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    client = KazooClient(hosts=ensemble.hosts, timeout=10.0,
                         connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                         command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0))
    client.start(timeout=30)
    return client


@contextmanager
def network_of(ctx: PathContext, slots: Sequence[str], redis: bool = False,
               relays: bool = True) -> Iterator[NodeNet | str]:
    """The network of a path with a node per name of ``slots`` (see the module's docstring; ``relays=False``: no
    relay in the slots' nodes, whose processes reach ``bridge_url`` and the ensemble directly); yields the reason
    instead when network namespaces cannot be made here (the path then reports itself not built). Everything is
    closed on exit."""
    with NodeNetwork() as network:
        if not network.can_cut_links:
            yield f"no network namespaces here ({network.reason}): the path needs them"
            return
        with ZooKeeperEnsemble.on_new_nodes(network) as ensemble:
            zk = ensemble_client(ensemble)
            started: list[SlowLink] = []
            try:
                host = Node("host", network.host_address, None, None)
                upstream = {"kinesis": ("127.0.0.1", int(ctx.servers.endpoint_url.rsplit(":", 1)[1]))}
                if redis:
                    assert ctx.servers.redis is not None, "a path with redis=True needs the soak's Redis"
                    upstream["redis"] = ("127.0.0.1", int(ctx.servers.redis.url.rsplit(":", 1)[1].split("/")[0]))
                bridge = SlowLink(host, upstream, directory=ctx.workdir, bind=network.host_address).start()
                started.append(bridge)
                routes = {server.node.name: (server.node.address, server.client_port) for server in ensemble.servers}
                routes["kinesis"] = _split(bridge.address("kinesis"))
                if redis:  # Redis through a node of its own: a Kinesis cut (from the host) leaves it reachable
                    redis_node = network.add_node("redis")
                    started.append(SlowLink(redis_node, {"redis": _split(bridge.address("redis"))},
                                            directory=ctx.workdir, bind=redis_node.address).start())
                    routes["redis"] = _split(started[-1].address("redis"))
                nodes = [network.add_node(name) for name in slots]
                links = [SlowLink(node, routes, directory=ctx.workdir, seed=ctx.rng.randrange(10**9)).start()
                         for node in nodes] if relays else []
                started += links
                yield NodeNet(network, ensemble, zk, nodes, links, f"http://{bridge.address('kinesis')}")
            finally:
                for relay in reversed(started):
                    relay.close()
                zk.stop()
                zk.close()


def _split(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)
