"""The machines of a scale run, each a node of its own (:mod:`kinesis_spout.testing.nodes`): ZooKeeper, kinesalite
(``--shardLimit`` the stream's shards, its requests counted by ``count_requests.js``) and one node per lease worker.
Where namespaces cannot be made, the nodes are loopback addresses and the report says so.

Who calls: :mod:`benchmarks.scale.runner` (life cycle) and :mod:`benchmarks.scale.leases` (everything else). The
constructor does no I/O; ``start()`` starts the servers and makes the stream; ``close()`` stops the workers, the
servers and the network (idempotent).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from kinesis_spout.testing.emulators import KinesaliteServer
from kinesis_spout.testing.kinesis import kinesis_client, wait_for_stream
from kinesis_spout.testing.lease_worker import WorkerProcesses
from kinesis_spout.testing.node_servers import kinesalite_on, start_lease_worker, zookeeper_on
from kinesis_spout.testing.nodes import NodeNetwork
from kinesis_spout.testing.zookeeper import ZooKeeperServer

COUNTER_JS = Path(__file__).with_name("count_requests.js")
PREFIX = "/kinesis-spout-scale"


def start_servers(network: NodeNetwork, counts_file: Path, stream: str, shards: int
                  ) -> tuple[ZooKeeperServer, KinesaliteServer, Any]:
    """Start ZooKeeper and kinesalite (its requests counted into ``counts_file``) on nodes of their own in the
    started ``network``, and ask for ``stream`` of ``shards`` shards (not waited for: the caller waits when it needs
    the stream).

    Who calls: :meth:`ScaleCluster.start` and :meth:`benchmarks.scale.spark_nodes.SparkNodes.start`; the servers
    returned are the caller's to stop. Returns them and a Kinesis client on kinesalite.
    """
    zookeeper = zookeeper_on(network.add_node("zookeeper"), start_timeout_s=180).start()
    node = network.add_node("kinesis")
    # kinesalite runs under env(1), which sets the counter's preload and its file, then execs node
    counting = ["env", f"NODE_OPTIONS=--require {COUNTER_JS}", f"KINESIS_SPOUT_COUNT_FILE={counts_file}"]
    kinesalite = kinesalite_on(node, shard_limit=max(shards, 10), start_timeout_s=180)
    kinesalite.command_prefix = node.command(counting)
    kinesalite.start()
    client = kinesis_client(kinesalite.endpoint_url)
    client.create_stream(StreamName=stream, ShardCount=shards)
    return zookeeper, kinesalite, client


class ScaleCluster:
    """ZooKeeper, kinesalite and the lease workers of one run, each on a node of its own."""

    def __init__(self, *, shards: int, session_timeout_s: float, keep_logs: bool = False) -> None:
        self.shards = shards
        self.session_timeout_s = session_timeout_s
        self.keep_logs = keep_logs  # the workers log at INFO, and their directory stays after close()
        self.network = NodeNetwork()
        self.directory = Path(tempfile.mkdtemp(prefix="kinesis-spout-scale-"))
        self.counts_file = self.directory / "kinesalite-requests.json"
        self.zookeeper: ZooKeeperServer | None = None
        self.kinesalite: KinesaliteServer | None = None
        self.stream = f"scale-{uuid.uuid4().hex[:8]}"
        self.app = f"scale-{uuid.uuid4().hex[:6]}"
        self.workers: WorkerProcesses | None = None
        self._zk_client: Any = None
        self._closed = False

    @property
    def base(self) -> str:
        """The ZooKeeper path of the app's stream: ``{prefix}/{app}/{stream}`` (leases, workers)."""
        return f"{PREFIX}/{self.app}/{self.stream}"

    @property
    def isolated(self) -> bool:
        return self.network.can_cut_links

    def start(self) -> "ScaleCluster":
        self.network.start()
        self.zookeeper, self.kinesalite, client = start_servers(self.network, self.counts_file, self.stream,
                                                                self.shards)
        wait_for_stream(client, self.stream, timeout_s=600)
        self.workers = WorkerProcesses(stream=self.stream, endpoint_url=self.kinesalite.endpoint_url,
                                       zookeeper=self.zookeeper.hosts, prefix=PREFIX, app=self.app,
                                       directory=self.directory, session_timeout_s=self.session_timeout_s,
                                       log_level="INFO" if self.keep_logs else "WARNING")
        return self

    def zk_client(self) -> Any:
        """A started kazoo client on the run's ZooKeeper (closed by ``close()``)."""
        from kazoo.client import KazooClient

        assert self.zookeeper is not None, "ScaleCluster.start() first"
        if self._zk_client is None:
            self._zk_client = KazooClient(hosts=self.zookeeper.hosts, timeout=30.0)
            self._zk_client.start(timeout=60)
        return self._zk_client

    def make_nodes(self, names: list[str]) -> None:
        """Make the nodes of workers ``names`` now (a few ``ip`` commands each), so that starting them later times
        the workers alone."""
        for name in names:
            if name not in self.network.nodes:
                self.network.add_node(name)

    def start_worker(self, name: str) -> int:
        """Start lease worker ``name`` on a node of its own; returns its pid."""
        assert self.workers is not None, "ScaleCluster.start() first"
        node = self.network.nodes.get(name) or self.network.add_node(name)
        start_lease_worker(self.workers, name, node)
        return self.workers.procs[name].pid

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.workers is not None:
            self.workers.stop_all()
        if self._zk_client is not None:
            self._zk_client.stop()
            self._zk_client.close()
        for server in (self.kinesalite, self.zookeeper):
            if server is not None:
                server.close()
        self.network.close()
        if not self.keep_logs:
            shutil.rmtree(self.directory, ignore_errors=True)
