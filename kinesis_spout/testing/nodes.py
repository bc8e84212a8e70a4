"""Nodes you can cut apart on one machine: each node a Linux network namespace with an address of its own, its
link into a private bridge, which a test can take down (a partition) or slow down (``tc netem``).

::

    from kinesis_spout.testing.nodes import NodeNetwork

    with NodeNetwork() as network:
        if network.can_cut_links:
            server = network.add_node("server")
            ...                          # start a server bound to server.address, in the node (see node_servers)
            server.link_down()           # a partition: nothing goes in or out of the node
            server.link_up()
            server.set_netem(delay_ms=50)
            server.clear_netem()

Where namespaces cannot be made (not root, ``ip netns add`` refused), ``start()`` says why on ``reason`` and the
nodes are loopback addresses (``127.0.0.2``, ``127.0.0.3``, ...): commands run in the host's network, the link
controls raise :class:`LinkControlUnavailable`, and ``can_cut_links`` is False. A kernel without the netem
qdisc (``CONFIG_NET_SCH_NETEM``) has namespaces but no delay or loss: ``can_shape_links`` is False and
``netem_reason`` says so. ``NodeNetwork(require=True)`` raises
:class:`NodesUnavailable` instead. Traffic stays on this machine (see :mod:`kinesis_spout.testing.netns`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Sequence

from kinesis_spout.testing import netns
from kinesis_spout.testing.netns import NodesUnavailable

__all__ = ["LinkControlUnavailable", "Node", "NodeNetwork", "NodeProcess", "NodesUnavailable"]

_PR_SET_PDEATHSIG = 1


class LinkControlUnavailable(RuntimeError):
    """A link control (down, up, netem) asked of a node on a loopback address: check ``can_cut_links`` first."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class NodeProcess:
    """A command started in a node: a process group of its own that dies with the test process.

    Who calls: tests, through :meth:`Node.run`. ``kill()`` SIGKILLs the whole group, ``pause()``/``resume()``
    SIGSTOP/SIGCONT it, ``stop()`` sends SIGTERM and waits (SIGKILL after ``grace_s``); all idempotent."""

    def __init__(self, popen: "subprocess.Popen[bytes]") -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to every process of the group (nothing when it has ended)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def pause(self) -> None:
        self.signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal_group(signal.SIGCONT)

    def stop(self, grace_s: float = 10.0) -> None:
        if not self.running:
            return
        self.signal_group(signal.SIGCONT)
        self.signal_group(signal.SIGTERM)
        try:
            self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()


class Node:
    """One node: its name, address and (isolated networks) its namespace and the host side of its veth pair.

    Made by :meth:`NodeNetwork.add_node`; its methods change the node's link or start commands in it."""

    def __init__(self, name: str, address: str, namespace: str | None, host_link: str | None,
                 netem_reason: str | None = None) -> None:
        self.name = name
        self.netem_reason = netem_reason
        self.address = address
        self.namespace = namespace
        self.host_link = host_link
        self._processes: list[NodeProcess] = []

    @property
    def isolated(self) -> bool:
        """True when the node is a network namespace (its link can be cut); False on a loopback address."""
        return self.namespace is not None

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run inside this node (``ip netns exec NS ...``; unchanged on a loopback node). For server
        classes that take a command prefix (``ZooKeeperServer(command_prefix=node.command([]))``)."""
        return netns.in_namespace(self.namespace, argv) if self.namespace is not None else list(argv)

    def run(self, argv: Sequence[str], *, log: Path | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> NodeProcess:
        """Start ``argv`` in this node as a process group of its own (stdout and stderr to ``log``, else
        discarded), which is SIGKILLed when the test process dies and by :meth:`NodeNetwork.close`."""
        out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it
        try:
            popen = subprocess.Popen(self.command(argv), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, cwd=cwd,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            if log is not None:
                out.close()  # type: ignore[union-attr]
        process = NodeProcess(popen)
        self._processes.append(process)
        return process

    def _require_namespace(self, what: str) -> str:
        if self.namespace is None or self.host_link is None:
            raise LinkControlUnavailable(f"node {self.name!r} is a loopback address ({self.address}), so {what} is "
                                         f"not possible: network namespaces could not be made (see "
                                         f"NodeNetwork.reason); check NodeNetwork.can_cut_links first")
        return self.namespace

    def link_down(self) -> None:
        """Cut the node off: its veth's host side goes down, so nothing reaches or leaves the node (connections
        stay open on both sides and time out as after a network partition)."""
        self._require_namespace("taking its link down")
        netns.run(["ip", "link", "set", str(self.host_link), "down"])

    def link_up(self) -> None:
        """Restore the node's link after :meth:`link_down`."""
        self._require_namespace("bringing its link up")
        netns.run(["ip", "link", "set", str(self.host_link), "up"])

    def set_netem(self, *, delay_ms: float = 0.0, jitter_ms: float = 0.0, loss_pct: float = 0.0) -> None:
        """Slow or lossy link: every packet the node sends is delayed by ``delay_ms`` (± ``jitter_ms``) and dropped
        with probability ``loss_pct`` % (``tc qdisc replace ... netem`` on the node's side of its veth), so a
        round trip to the node takes at least ``delay_ms`` more. Replaces the previous setting."""
        if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100:
            raise ValueError(f"set_netem: delay_ms and jitter_ms must be >= 0 and loss_pct within 0..100 (got "
                             f"delay_ms={delay_ms}, jitter_ms={jitter_ms}, loss_pct={loss_pct})")
        namespace = self._require_namespace("netem")
        if self.netem_reason is not None:
            raise LinkControlUnavailable(f"node {self.name!r}: no netem here: {self.netem_reason}; check "
                                         f"NodeNetwork.can_shape_links first")
        argv = ["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", f"{delay_ms}ms"]
        if jitter_ms:
            argv.append(f"{jitter_ms}ms")
        if loss_pct:
            argv += ["loss", f"{loss_pct}%"]
        netns.run(netns.in_namespace(namespace, argv))

    def clear_netem(self) -> None:
        """Remove what :meth:`set_netem` added (nothing when there is none)."""
        namespace = self._require_namespace("netem")
        netns.run(netns.in_namespace(namespace, ["tc", "qdisc", "del", "dev", "eth0", "root"]), check=False)

    def kill_processes(self) -> None:
        """SIGKILL every process group started with :meth:`run`. Idempotent."""
        for process in self._processes:
            process.kill()


class NodeNetwork:
    """A private network of nodes on this machine: a bridge with an address of the host's, and one namespace per
    node with a veth pair into the bridge (see the module docstring).

    Who calls: tests and benchmarks. The constructor does no I/O. ``start()`` removes the leftovers of crashed runs,
    then makes the bridge (or falls back to loopback addresses, ``reason`` saying why); ``add_node()`` makes a
    node; ``close()`` kills the nodes' processes and removes namespaces, veths and bridge; it is idempotent and
    also runs at interpreter exit. ``require=True``: raise :class:`NodesUnavailable` rather than fall back. At most
four networks exist on a machine at once: ``start()`` waits up to ``slot_wait_s`` for one of them to close.
    """

    def __init__(self, *, require: bool = False, slot_wait_s: float = 120.0) -> None:
        self.require = require
        self.slot_wait_s = slot_wait_s  # how long start() waits for a free subnet while other runs hold them all
        self.network_id = uuid.uuid4().hex[:6]
        self.reason: str | None = None
        self.netem_reason: str | None = None
        self.subnet: ipaddress.IPv4Network | None = None
        self.nodes: dict[str, Node] = {}
        self._started = False
        self._closed = False

    @property
    def can_cut_links(self) -> bool:
        """True when the nodes are namespaces (link down/up and netem work); False on loopback addresses."""
        return self._started and self.subnet is not None

    @property
    def can_shape_links(self) -> bool:
        """True when :meth:`Node.set_netem` works: namespaces, and a kernel with the netem qdisc."""
        return self.can_cut_links and self.netem_reason is None

    @property
    def bridge(self) -> str:
        return f"{netns.PREFIX}{self.network_id}b"

    @property
    def host_address(self) -> str:
        """The host's address on the bridge (what a node sees a connection from the test process come from)."""
        if self.subnet is None:
            return "127.0.0.1"
        return str(self.subnet.network_address + 1)

    def start(self) -> "NodeNetwork":
        if self._started:
            return self
        self.reason = netns.unavailable_reason()
        self.netem_reason = self.reason if self.reason is not None else netns.netem_unavailable_reason()
        if self.reason is not None:
            if self.require:
                raise NodesUnavailable(f"network namespaces cannot be made: {self.reason}")
            self._started = True
            return self
        deadline = time.monotonic() + self.slot_wait_s
        while (subnet := self._make_bridge()) is None:
            if time.monotonic() >= deadline:
                raise NodesUnavailable(f"every node subnet of {netns.SUBNET} was in use by other runs on this "
                                       f"machine for {self.slot_wait_s:g} s (networks "
                                       f"{sorted(netns.existing_ids())}); wait for them to end, or raise slot_wait_s")
            time.sleep(1.0)  # another run holds every slot: it frees one when it closes
        self.subnet = subnet
        self._started = True
        atexit.register(self.close)
        return self

    def _make_bridge(self) -> ipaddress.IPv4Network | None:
        """Under the machine-wide lock: remove leftovers, take a free slot and make the bridge on it; None when
        every slot is taken."""
        with netns.allocation_lock():
            netns.cleanup_leftovers()
            subnet = netns.free_slot()
            if subnet is None:
                return None
            netns.record_owner(self.network_id)
            try:
                netns.run(["ip", "link", "add", self.bridge, "type", "bridge"])
                netns.run(["ip", "addr", "add", f"{subnet.network_address + 1}/{subnet.prefixlen}", "dev",
                           self.bridge])
                netns.run(["ip", "link", "set", self.bridge, "up"])
            except netns.NetnsCommandError:
                netns.remove_network(self.network_id)
                raise
            return subnet

    def add_node(self, name: str) -> Node:
        """Make node ``name`` (a namespace with lo up and ``eth0`` at the next address, or the next loopback
        address) and return it."""
        if not self._started:
            raise RuntimeError("NodeNetwork.start() first")
        if name in self.nodes:
            raise ValueError(f"a node named {name!r} exists already in this network")
        index = len(self.nodes) + 1
        if self.subnet is None:
            node = Node(name, f"127.0.0.{index + 1}", None, None, self.netem_reason)
        else:
            if index + 1 >= self.subnet.num_addresses - 1:
                raise ValueError(f"a network holds at most {self.subnet.num_addresses - 3} nodes")
            namespace = f"{netns.PREFIX}-{self.network_id}-{index}"
            host_link = f"{netns.PREFIX}{self.network_id}h{index}"
            address = self.subnet.network_address + 1 + index
            run = netns.run
            run(["ip", "netns", "add", namespace])
            run(["ip", "link", "add", host_link, "type", "veth", "peer", "name", "eth0", "netns", namespace])
            run(["ip", "link", "set", host_link, "master", self.bridge])
            run(["ip", "link", "set", host_link, "up"])
            run(netns.in_namespace(namespace, ["ip", "link", "set", "lo", "up"]))
            run(netns.in_namespace(namespace, ["ip", "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev",
                                               "eth0"]))
            run(netns.in_namespace(namespace, ["ip", "link", "set", "eth0", "up"]))
            node = Node(name, str(address), namespace, host_link, self.netem_reason)
        self.nodes[name] = node
        return node

    def close(self) -> None:
        """Kill every node's processes and remove namespaces, veths and bridge. Idempotent."""
        if self._closed or not self._started:
            return
        self._closed = True
        for node in self.nodes.values():
            node.kill_processes()
        if self.subnet is not None:
            netns.remove_network(self.network_id)
        atexit.unregister(self.close)

    def __enter__(self) -> "NodeNetwork":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
