"""The project's servers and lease workers on a node of :mod:`kinesis_spout.testing.nodes`: each runs inside the
node's namespace and is reached at the node's address, so cutting the node's link cuts it off.

::

    with NodeNetwork() as network:
        with zookeeper_on(network.add_node("zookeeper")) as zk, kinesalite_on(network.add_node("kinesis")) as kin:
            workers = WorkerProcesses(stream=..., endpoint_url=kin.endpoint_url, zookeeper=zk.hosts, ...)
            start_lease_worker(workers, "w1", network.add_node("w1"))

ZooKeeper binds the node's address (``clientPortAddress``); kinesalite binds every interface, which inside a
namespace means the node's address and its own loopback only (on a loopback node: every interface of the host).
Who calls: tests and benchmarks. The functions only build objects (no I/O); ``start()`` them, or use ``with``.
"""

from __future__ import annotations

from pathlib import Path

from kinesis_spout.testing.emulators import KinesaliteServer
from kinesis_spout.testing.lease_worker import WorkerProcesses
from kinesis_spout.testing.nodes import Node
from kinesis_spout.testing.zookeeper import ZooKeeperServer

__all__ = ["kinesalite_on", "start_lease_worker", "zookeeper_on"]


def zookeeper_on(node: Node, *, port: int | None = None, data_dir: Path | None = None,
                 start_timeout_s: float = 60.0) -> ZooKeeperServer:
    """A ZooKeeper server (not started) that runs in ``node`` and binds its address; ``hosts`` is
    ``node.address:port``."""
    return ZooKeeperServer(port=port, data_dir=data_dir, start_timeout_s=start_timeout_s, host=node.address,
                           command_prefix=node.command([]))


def kinesalite_on(node: Node, *, shard_limit: int = 1000, port: int | None = None,
                  start_timeout_s: float = 60.0) -> KinesaliteServer:
    """A kinesalite server (not started) that runs in ``node``, reached at ``http://node.address:port``;
    ``shard_limit`` is its ``--shardLimit`` (the most shards its streams may hold in all)."""
    return KinesaliteServer(port=port, start_timeout_s=start_timeout_s, host=node.address,
                            command_prefix=node.command([]), shard_limit=shard_limit)


def start_lease_worker(workers: WorkerProcesses, name: str, node: Node) -> None:
    """Launch lease worker ``name`` of ``workers`` inside ``node`` (its ZooKeeper and Kinesis addresses must be
    nodes' addresses, or the host's bridge address: a node reaches nothing else)."""
    workers.start(name, command_prefix=node.command([]))
