"""A three-server (or any odd size) ZooKeeper ensemble, each server on a node of its own, so that a test can
partition the leader away, kill it, and watch a new one elected.

::

    from kinesis_spout.testing.nodes import NodeNetwork
    from kinesis_spout.testing.partitions import heal_groups, partition_groups
    from kinesis_spout.testing.zk_ensemble import ZooKeeperEnsemble

    with NodeNetwork() as network, ZooKeeperEnsemble.on_new_nodes(network) as ensemble:
        client = KazooClient(hosts=ensemble.hosts)   # "10.200.0.2:P,10.200.0.3:P,10.200.0.4:P"
        leader = ensemble.wait_leader()
        partition_groups([leader], ensemble.others(leader))
        new_leader = ensemble.wait_leader(other_than=leader)

The servers run ``QuorumPeerMain`` of the ZooKeeper the project installs (see
:mod:`kinesis_spout.testing.zookeeper` for the jar), with a short tick (500 ms): a follower gives up on a silent
leader after ``sync_limit`` ticks (2 s) and an election follows. The leader is read from each server's ``srvr``
four-letter word (``Mode: leader``); a server cut from the quorum answers that it is not serving. Where
namespaces cannot be made the nodes are loopback addresses: the ensemble still runs, without partitions.
Who calls: tests (the ``zookeeper_ensemble`` fixture of the node tests) and the soak's network path.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Sequence

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing.nodes import Node, NodeNetwork
from kinesis_spout.testing.process import ServerProcess, free_port, wait_until
from kinesis_spout.testing.zookeeper import check_runtime, default_jar, four_letter, server_classpath

__all__ = ["EnsembleServer", "ZooKeeperEnsemble"]


@dataclass
class EnsembleServer:
    """One server of an ensemble: its id (``myid``), node, ports and process (None until started)."""

    sid: int
    node: Node
    client_port: int
    quorum_port: int
    election_port: int
    process: ServerProcess | None = None

    @property
    def hosts(self) -> str:
        return f"{self.node.address}:{self.client_port}"

    def mode(self) -> str:
        """``leader``, ``follower``, or ``""`` (not serving: down, electing, or cut from the quorum)."""
        reply = four_letter(self.node.address, self.client_port, "srvr")
        for line in reply.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""


class ZooKeeperEnsemble:
    """ZooKeeper servers on ``nodes`` (one each, an odd number), with temporary data dirs.

    The constructor does no I/O. ``start()`` starts every server and waits until one leads and the others follow;
    ``kill(node)`` and ``start_server(node)`` crash and restart one (same ports and data); ``close()`` stops all and
    removes the data. ``hosts`` is the connect string of all servers."""

    def __init__(self, nodes: Sequence[Node], *, tick_ms: int = 500, sync_limit: int = 4, init_limit: int = 20,
                 jar: Path | None = None, start_timeout_s: float = 120.0) -> None:
        if len(nodes) < 3 or len(nodes) % 2 == 0:
            raise ValueError(f"ZooKeeperEnsemble: give an odd number of nodes, 3 or more (got {len(nodes)}): an "
                             f"ensemble of n servers survives the loss of (n - 1) / 2")
        self.servers = [EnsembleServer(sid, node, free_port(), free_port(), free_port())
                        for sid, node in enumerate(nodes, 1)]
        self.tick_ms, self.sync_limit, self.init_limit = tick_ms, sync_limit, init_limit
        self.jar = jar if jar is not None else default_jar()
        self.start_timeout_s = start_timeout_s
        self.directory: Path | None = None

    @classmethod
    def on_new_nodes(cls, network: NodeNetwork, size: int = 3, prefix: str = "zk") -> "ZooKeeperEnsemble":
        """An ensemble (not started) on ``size`` new nodes of ``network`` named ``zk1``, ``zk2``, ..."""
        return cls([network.add_node(f"{prefix}{i}") for i in range(1, size + 1)])

    @property
    def hosts(self) -> str:
        """The connect string: every server, ``ADDRESS:PORT,...``."""
        return ",".join(server.hosts for server in self.servers)

    @property
    def nodes(self) -> list[Node]:
        return [server.node for server in self.servers]

    def server(self, node: Node) -> EnsembleServer:
        for server in self.servers:
            if server.node is node:
                return server
        raise ValueError(f"node {node.name!r} runs no server of this ensemble")

    def others(self, node: Node) -> list[Node]:
        """The nodes of the other servers."""
        return [server.node for server in self.servers if server.node is not node]

    def modes(self) -> dict[str, str]:
        """Node name -> ``leader``, ``follower`` or ``""``."""
        return {server.node.name: server.mode() for server in self.servers}

    def leader(self) -> Node | None:
        """The node whose server says it leads, when exactly one does and a majority serves; else None."""
        modes = {server.node.name: server.mode() for server in self.servers}
        leaders = [server.node for server in self.servers if modes[server.node.name] == "leader"]
        serving = sum(1 for mode in modes.values() if mode)
        return leaders[0] if len(leaders) == 1 and serving > len(self.servers) // 2 else None

    def wait_leader(self, timeout_s: float = 60.0, other_than: Node | None = None) -> Node:
        """Wait until a leader serves with a majority (one other than ``other_than`` when given) and return it."""
        found: list[Node] = []

        def elected() -> bool:
            leader = self.leader()
            if leader is None or leader is other_than:
                return False
            found.append(leader)
            return True

        if not wait_until(elected, timeout_s, interval_s=0.2):
            raise AssertionError(f"no leader{' other than ' + other_than.name if other_than else ''} within "
                                 f"{timeout_s:g} s; modes {self.modes()}")
        return found[-1]

    def formed(self) -> bool:
        """True when every server serves: one leads, the others follow."""
        modes = sorted(self.modes().values())
        return modes == ["follower"] * (len(self.servers) - 1) + ["leader"]

    def wait_formed(self, timeout_s: float = 60.0) -> bool:
        """Wait until every server serves (after a heal or a restart, a server takes a moment to rejoin); returns
        whether it did within ``timeout_s``. Cutting the leader before then is two faults at once: measured, the two
        servers left then took 13 to more than 30 s to elect a leader, where one fault on a formed ensemble takes
        about 3 s."""
        return wait_until(self.formed, timeout_s, interval_s=0.2)

    def _write_config(self, server: EnsembleServer) -> Path:
        assert self.directory is not None
        home = self.directory / f"server{server.sid}"
        (home / "data").mkdir(parents=True, exist_ok=True)
        (home / "data" / "myid").write_text(f"{server.sid}\n")
        lines = [f"tickTime={self.tick_ms}", f"initLimit={self.init_limit}", f"syncLimit={self.sync_limit}",
                 f"dataDir={home / 'data'}", f"clientPort={server.client_port}",
                 f"clientPortAddress={server.node.address}", "maxClientCnxns=200", "admin.enableServer=false",
                 "4lw.commands.whitelist=srvr,ruok,stat,mntr", f"minSessionTimeout={2 * self.tick_ms}",
                 "maxSessionTimeout=60000", "reconfigEnabled=false", "standaloneEnabled=false"]
        lines += [f"server.{s.sid}={s.node.address}:{s.quorum_port}:{s.election_port}" for s in self.servers]
        cfg = home / "zoo.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        return cfg

    def start_server(self, node: Node) -> None:
        """Start (or restart) the server on ``node``; does not wait for it to join."""
        server = self.server(node)
        if server.process is not None and server.process.running:
            return
        cfg = self._write_config(server)
        argv = node.command(["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                             "-Dzookeeper.cnxTimeout=1000", "-cp", server_classpath(self.jar),
                             "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)])
        server.process = ServerProcess(f"ZooKeeper {node.name}", argv, cfg.parent / "zookeeper.log")
        server.process.start()

    def start(self) -> "ZooKeeperEnsemble":
        """Start every server and wait until one leads and the others follow."""
        check_runtime(self.jar)
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="kinesis-spout-zk-ensemble-"))
        for server in self.servers:
            self.start_server(server.node)

        if not self.wait_formed(self.start_timeout_s):
            tails = "\n".join(f"--- {s.node.name} ---\n{s.process.log_tail(10) if s.process else ''}"
                              for s in self.servers)
            self.close()
            raise ServerStartError(f"the ZooKeeper ensemble did not form within {self.start_timeout_s:g} s; "
                                   f"modes {self.modes()}\n{tails}")
        return self

    def kill(self, node: Node) -> None:
        """SIGKILL the server on ``node``, as a crash would (its data stays for :meth:`start_server`)."""
        process = self.server(node).process
        if process is not None:
            process.kill()

    def close(self) -> None:
        """Stop every server and remove the data. Idempotent."""
        for server in self.servers:
            if server.process is not None:
                server.process.stop(grace_s=5.0)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> "ZooKeeperEnsemble":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
