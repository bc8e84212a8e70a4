"""Partitions between two nodes (kinesis_spout.testing.partitions): a connection across the cut hangs rather than
fails, a third node still reaches both, and heal restores it; the slow-link relay delays what it forwards only
while slow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from kinesis_spout.testing import netns
from kinesis_spout.testing.nodes import LinkControlUnavailable, Node, NodeNetwork
from kinesis_spout.testing.partitions import heal, heal_from_host, partition, partition_from_host
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.slow_link import SlowLink

REASON = netns.unavailable_reason()
needs_namespaces = pytest.mark.skipif(REASON is not None, reason=f"network namespaces cannot be made: {REASON}")

ECHO = """
import socket, sys, threading
listener = socket.socket(); listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind((sys.argv[1], 9000)); listener.listen()
def echo(conn):
    while data := conn.recv(65536):
        conn.sendall(data)
while True:
    threading.Thread(target=echo, args=(listener.accept()[0],), daemon=True).start()
"""

CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 9000), timeout=float(sys.argv[2])).close()
    print("connected")
except socket.timeout:
    print("timed out")
except OSError as exc:
    print(f"failed {exc.errno}")
"""


@pytest.fixture
def network() -> Iterator[NodeNetwork]:
    with NodeNetwork(require=True) as net:
        yield net


def connect_from(node: Node, address: str, timeout_s: float = 1.0) -> str:
    done = subprocess.run(node.command([sys.executable, "-c", CONNECT, address, str(timeout_s)]),
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip()


@needs_namespaces
def test_a_partition_hangs_connections_between_two_nodes_only_until_healed(network: NodeNetwork) -> None:
    server, cut, bystander = (network.add_node(name) for name in ("server", "cut", "bystander"))
    server.run([sys.executable, "-c", ECHO, server.address])
    assert wait_until(lambda: connect_from(bystander, server.address) == "connected", 30)
    partition(cut, server)
    partition(cut, server)  # idempotent
    assert connect_from(cut, server.address) == "timed out"  # silence, not a refusal: a partition
    assert connect_from(bystander, server.address) == "connected"
    heal(cut, server)
    heal(cut, server)  # idempotent
    assert wait_until(lambda: connect_from(cut, server.address) == "connected", 30)
    partition_from_host(network, server)  # the host's side: a server of the host, or a relay to one
    assert connect_from(server, network.host_address) == "timed out"
    assert connect_from(bystander, server.address) == "connected"
    heal_from_host(network, server)
    assert wait_until(lambda: connect_from(server, network.host_address) != "timed out", 30)


def test_partitions_need_namespaces_and_two_nodes() -> None:
    a, b = Node("a", "127.0.0.2", None, None), Node("b", "127.0.0.3", None, None)
    with pytest.raises(LinkControlUnavailable, match="can_cut_links"):
        partition(a, b)
    with pytest.raises(ValueError, match="itself"):
        partition(a, a)
    with pytest.raises(ValueError, match="stall_pct"):
        SlowLink(a, {"x": ("127.0.0.1", 1)}, directory=Path("."), stall_pct=120)


@needs_namespaces
def test_the_slow_link_delays_both_ways_while_slow_and_forwards_in_order(network: NodeNetwork,
                                                                         tmp_path: Path) -> None:
    server, client = network.add_node("server"), network.add_node("client")
    server.run([sys.executable, "-c", ECHO, server.address])
    link = SlowLink(client, {"echo": (server.address, 9000)}, directory=tmp_path, delay_ms=200, jitter_ms=0,
                    stall_pct=0).start()
    port = link.ports["echo"]
    probe = f"""
import socket, time
def rtt(sock):
    t = time.monotonic(); sock.sendall(b"ping"); assert sock.recv(16) == b"ping"; return time.monotonic() - t
sock = socket.create_connection(("127.0.0.1", {port}), timeout=30)
fast = rtt(sock)
open({str(tmp_path / 'go')!r}, "w").close()
while not __import__("os").path.exists({str(tmp_path / 'slowed')!r}):
    time.sleep(0.05)
slow = rtt(sock)
sock.sendall(b"".join(b"%06d" % i for i in range(20000)))
got = b""
while len(got) < 120000:
    got += sock.recv(65536)
print(fast, slow, got == b"".join(b"%06d" % i for i in range(20000)))
"""
    try:
        assert wait_until(lambda: connect_from(server, server.address) == "connected", 30)
        proc = subprocess.Popen(client.command([sys.executable, "-c", probe]), stdout=subprocess.PIPE, text=True)
        assert wait_until(lambda: (tmp_path / "go").exists(), 30)
        link.slow()
        (tmp_path / "slowed").touch()
        out, _ = proc.communicate(timeout=60)
        _fast, slow, in_order = out.split()
        assert float(slow) >= 0.4  # at least 200 ms each way while slow: the model's floor, not a timing
        assert in_order == "True"
    finally:
        link.close()
