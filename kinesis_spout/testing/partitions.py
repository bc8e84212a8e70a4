"""Partitions between two nodes of a :class:`~kinesis_spout.testing.nodes.NodeNetwork`, each still reaching the
others: the packets between the two go nowhere, so a TCP connection between them hangs (no refusal, no reset) and
ends only by its own time-outs, as across a real network partition.

::

    from kinesis_spout.testing.partitions import heal, partition

    partition(worker, zookeeper)       # worker and zookeeper no longer reach each other; both reach kinesis
    ...
    heal(worker, zookeeper)
    partition_from_host(network, worker)   # cut from what the host serves on its bridge address

How: without iptables or nftables, each side gets a permanent neighbour (ARP) entry for the other's address that
names a MAC address no interface has (:data:`UNREACHABLE_MAC`); the bridge floods those frames and every node
drops them. Measured on the bridge of the harness: a connect across such a cut times out (4.0 s of a 4 s timeout)
where a ``blackhole`` or ``unreachable`` route fails at once (``EINVAL``, ``EHOSTUNREACH``): a route tells the
process, a partition does not. :func:`heal` deletes the entries and the kernel resolves the address again.
Who calls: tests and the soak; a cut lasts until healed or until the network is closed.
"""

from __future__ import annotations

from typing import Iterable

from kinesis_spout.testing import netns
from kinesis_spout.testing.nodes import LinkControlUnavailable, Node, NodeNetwork

__all__ = ["UNREACHABLE_MAC", "heal", "heal_from_host", "heal_groups", "partition", "partition_from_host",
           "partition_groups"]

#: a locally administered unicast address that no interface of the harness has
UNREACHABLE_MAC = "02:00:00:00:00:01"


def _namespace(node: Node, what: str) -> str:
    if node.namespace is None:
        raise LinkControlUnavailable(f"node {node.name!r} is a loopback address ({node.address}), so {what} is not "
                                     f"possible: network namespaces could not be made (see NodeNetwork.reason); "
                                     f"check NodeNetwork.can_cut_links first")
    return node.namespace


def _check_pair(a: Node, b: Node, what: str) -> tuple[str, str]:
    if a is b or a.address == b.address:
        raise ValueError(f"{what}: a node cannot be cut from itself (got {a.name!r} twice)")
    return _namespace(a, what), _namespace(b, what)


def partition(a: Node, b: Node) -> None:
    """Cut ``a`` and ``b`` apart, both ways; each keeps reaching every other node and the host. Idempotent."""
    ns_a, ns_b = _check_pair(a, b, "partition")
    for namespace, peer in ((ns_a, b), (ns_b, a)):
        netns.run(netns.in_namespace(namespace, ["ip", "neigh", "replace", peer.address, "lladdr", UNREACHABLE_MAC,
                                                 "nud", "permanent", "dev", "eth0"]))


def heal(a: Node, b: Node) -> None:
    """Undo :func:`partition` of ``a`` and ``b`` (nothing when they were not cut). Idempotent."""
    ns_a, ns_b = _check_pair(a, b, "heal")
    for namespace, peer in ((ns_a, b), (ns_b, a)):
        netns.run(netns.in_namespace(namespace, ["ip", "neigh", "del", peer.address, "dev", "eth0"]), check=False)


def partition_groups(side: Iterable[Node], other_side: Iterable[Node]) -> None:
    """Cut every node of ``side`` from every node of ``other_side`` (nodes within a side still reach each other)."""
    others = list(other_side)
    for a in side:
        for b in others:
            partition(a, b)


def heal_groups(side: Iterable[Node], other_side: Iterable[Node]) -> None:
    """Undo :func:`partition_groups`."""
    others = list(other_side)
    for a in side:
        for b in others:
            heal(a, b)


def partition_from_host(network: NodeNetwork, node: Node) -> None:
    """Cut ``node`` from the host (its address on the bridge, ``network.host_address``: servers the host runs, or
    relays to them), both ways; the node keeps reaching the other nodes. Idempotent."""
    namespace = _namespace(node, "partition_from_host")
    netns.run(netns.in_namespace(namespace, ["ip", "neigh", "replace", network.host_address, "lladdr",
                                             UNREACHABLE_MAC, "nud", "permanent", "dev", "eth0"]))
    netns.run(["ip", "neigh", "replace", node.address, "lladdr", UNREACHABLE_MAC, "nud", "permanent", "dev",
               network.bridge])


def heal_from_host(network: NodeNetwork, node: Node) -> None:
    """Undo :func:`partition_from_host` (nothing when the node was not cut). Idempotent."""
    namespace = _namespace(node, "heal_from_host")
    netns.run(netns.in_namespace(namespace, ["ip", "neigh", "del", network.host_address, "dev", "eth0"]),
              check=False)
    netns.run(["ip", "neigh", "del", node.address, "dev", network.bridge], check=False)
