"""The node harness (kinesis_spout.testing.nodes): ZooKeeper on a node of its own, a client on the host, the node's
link cut (the client loses its connection) and restored (it reconnects); netem latency in round trips; nothing left
behind by close() or by a run that died; loopback addresses where namespaces cannot be made."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, Iterator

import pytest

from kinesis_spout.testing import netns
from kinesis_spout.testing.node_servers import zookeeper_on
from kinesis_spout.testing.nodes import LinkControlUnavailable, NodeNetwork, NodesUnavailable
from kinesis_spout.testing.process import wait_until

REASON = netns.unavailable_reason()
needs_namespaces = pytest.mark.skipif(REASON is not None, reason=f"network namespaces cannot be made: {REASON}")
pytestmark = [pytest.mark.zookeeper]


@pytest.fixture
def network() -> Iterator[NodeNetwork]:
    with NodeNetwork(require=True) as net:
        yield net


def _client(hosts: str, states: list[str]) -> Any:
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    client = KazooClient(hosts=hosts, timeout=4.0, connection_retry=KazooRetry(max_tries=-1, delay=0.1,
                                                                               max_delay=0.5))
    client.add_listener(lambda state: states.append(str(state)))
    client.start(timeout=30)
    return client


@needs_namespaces
def test_a_cut_link_loses_the_client_and_a_restored_one_reconnects_it(network: NodeNetwork) -> None:
    node = network.add_node("zookeeper")
    states: list[str] = []
    with zookeeper_on(node) as zk:
        assert zk.hosts.startswith(f"{node.address}:")
        client = _client(zk.hosts, states)
        try:
            client.create("/before-the-cut", b"x")
            node.link_down()
            assert wait_until(lambda: "SUSPENDED" in states, 30), f"the client never lost ZooKeeper: {states}"
            assert client.connected is False
            states.clear()
            node.link_up()
            assert wait_until(lambda: client.connected, 60), f"the client did not reconnect: {states}"
            assert client.exists("/before-the-cut") is not None
        finally:
            client.stop()
            client.close()


@needs_namespaces
def test_a_cut_link_cuts_the_node_off_from_other_nodes_too(network: NodeNetwork) -> None:
    server, other = network.add_node("server"), network.add_node("other")
    listener = server.run([sys.executable, "-m", "http.server", "--bind", server.address, "8000"])
    probe = [sys.executable, "-c", f"import socket; socket.create_connection(('{server.address}', 8000), 2)"]

    def reaches() -> bool:
        return subprocess.run(other.command(probe), capture_output=True, timeout=30).returncode == 0

    assert wait_until(reaches, 30), "a node could not reach the other's server"
    server.link_down()
    assert not reaches()
    server.link_up()
    assert wait_until(reaches, 30)
    listener.kill()
    assert not listener.running


@needs_namespaces
@pytest.mark.skipif(REASON is None and netns.netem_unavailable_reason() is not None,
                    reason=f"no netem here: {netns.netem_unavailable_reason() if REASON is None else ''}")
def test_netem_delay_shows_in_every_round_trip_and_goes_when_cleared(network: NodeNetwork) -> None:
    node = network.add_node("zookeeper")
    with zookeeper_on(node) as zk:
        client = _client(zk.hosts, [])
        try:
            node.set_netem(delay_ms=200)
            started = time.monotonic()
            client.exists("/")
            assert time.monotonic() - started >= 0.2
            node.clear_netem()
            node.clear_netem()  # idempotent
            assert client.exists("/") is not None
        finally:
            client.stop()
            client.close()


@needs_namespaces
def test_close_removes_namespaces_links_and_processes_and_is_idempotent() -> None:
    network = NodeNetwork(require=True).start()
    node = network.add_node("a")
    network.add_node("b")
    sleeper = node.run(["sleep", "600"])
    assert netns.namespaces_of(network.network_id) and netns.links_of(network.network_id)
    network.close()
    assert netns.namespaces_of(network.network_id) == []
    assert netns.links_of(network.network_id) == []
    assert not sleeper.running
    network.close()


@needs_namespaces
def test_the_leftovers_of_a_run_that_died_are_removed_by_the_next_start(tmp_path: Any) -> None:
    script = textwrap.dedent("""
        import os, sys
        from kinesis_spout.testing.nodes import NodeNetwork
        network = NodeNetwork(require=True).start()
        network.add_node("a").run(["sleep", "600"])
        print(network.network_id, flush=True)
        os.kill(os.getpid(), 9)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    dead = done.stdout.strip()
    assert netns.namespaces_of(dead), "the dying run made no namespace"
    with NodeNetwork(require=True) as network:
        assert network.network_id != dead
        assert netns.namespaces_of(dead) == []
        assert netns.links_of(dead) == []


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is not installed")
def test_without_root_the_nodes_are_loopback_addresses_without_link_controls() -> None:
    script = textwrap.dedent("""
        from kinesis_spout.testing.nodes import LinkControlUnavailable, NodeNetwork, NodesUnavailable
        with NodeNetwork() as network:
            node = network.add_node("a")
            print(network.can_cut_links, network.can_shape_links, node.address, network.nodes["a"] is node)
            print(network.reason)
            try:
                node.link_down()
            except LinkControlUnavailable as exc:
                print("refused:", exc)
        try:
            NodeNetwork(require=True).start()
        except NodesUnavailable as exc:
            print("required:", exc)
    """)
    # a user namespace without a uid mapping: this process is not root in it (it still reads its own files)
    done = subprocess.run(["unshare", "--user", sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "False False 127.0.0.2 True"
    assert "need root" in lines[1]
    assert lines[2].startswith("refused:") and "can_cut_links" in lines[2]
    assert lines[3].startswith("required:") and "need root" in lines[3]


def test_bad_netem_settings_are_refused_by_name() -> None:
    from kinesis_spout.testing.nodes import Node

    with pytest.raises(ValueError, match="loss_pct"):
        Node("a", "127.0.0.2", None, None).set_netem(loss_pct=200)
    with pytest.raises(LinkControlUnavailable, match="loopback"):
        Node("a", "127.0.0.2", None, None).set_netem(delay_ms=10)
    assert issubclass(NodesUnavailable, RuntimeError)


@needs_namespaces
def test_when_every_subnet_is_taken_start_waits_then_says_which_setting_to_raise() -> None:
    held: list[NodeNetwork] = []
    try:
        with pytest.raises(NodesUnavailable, match="slot_wait_s") as refused:
            for _ in range(len(netns.slots()) + 1):  # other runs on this machine may hold some slots already
                held.append(NodeNetwork(require=True, slot_wait_s=0.5).start())
        assert "in use by other runs" in str(refused.value)
        assert len({network.subnet for network in held}) == len(held)
    finally:
        for network in held:
            network.close()
    with NodeNetwork(require=True, slot_wait_s=30) as network:  # a slot is free again once they closed
        assert network.can_cut_links
