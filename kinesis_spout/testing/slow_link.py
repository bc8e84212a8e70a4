"""A model of a slow, lossy link: a TCP relay that a node's clients connect through, which can delay what it
forwards (``tc netem`` where the kernel has no netem qdisc).

::

    from kinesis_spout.testing.slow_link import SlowLink

    link = SlowLink(worker_node, {"zookeeper": ("10.200.0.3", 2181)}, directory=tmp_path).start()
    link.address("zookeeper")        # "127.0.0.1:PORT", in worker_node: give the worker this address
    link.slow()                      # from now on: each chunk late by 300 ms +- 100, 5 % of them 1 s more
    link.fast()                      # straight through again

What it models, and what not: each chunk read from one side (what one ``recv`` returned, up to 64 KiB) is written
to the other ``delay_ms`` +- ``jitter_ms`` later (uniform), in order; with probability ``stall_pct`` % a chunk
waits ``stall_ms`` more, as a TCP stream does while it retransmits a lost segment (Linux's first retransmission
comes after at least 200 ms; RFC 6298's initial time-out is 1 s). No byte is lost or reordered: the relay models
the *delays* a lossy link causes to a TCP stream, not the loss of packets, and one direction's delay does not hold
up the other. The delay applies per direction, so a round trip through a slow link takes about twice
``delay_ms`` more. Connections opened while slow stay open when it turns fast (later chunks overtake no earlier one).

The relay runs inside the node (``python -m kinesis_spout.testing.slow_link``), so its upstream connections leave
from the node's address and partitions of the node (:mod:`kinesis_spout.testing.partitions`) cut them as well.
SIGUSR1 turns the delays on, SIGUSR2 off. Who calls: tests and the soak.
"""

from __future__ import annotations

import argparse
import queue
import random
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Sequence

from kinesis_spout.testing.nodes import Node, NodeProcess
from kinesis_spout.testing.process import free_port, wait_until

__all__ = ["SlowLink", "main"]

CHUNK = 65536


class SlowLink:
    """A relay in ``node`` from a local port per route to ``(host, port)`` upstream, fast until :meth:`slow`.

    The constructor does no I/O; ``start()`` launches the relay and waits until it listens; ``close()`` ends it.
    ``routes``: name -> upstream address. ``address(name)``: where a process in ``node`` connects instead.
    ``bind``: the address the relay listens on (another than ``127.0.0.1`` to serve other nodes: a relay on the
    host's bridge address, in a :class:`Node` without namespace, lets nodes reach a server of the host's loopback)."""

    def __init__(self, node: Node, routes: dict[str, tuple[str, int]], *, directory: Path, delay_ms: float = 300.0,
                 jitter_ms: float = 100.0, stall_pct: float = 5.0, stall_ms: float = 1000.0,
                 seed: int | None = None, bind: str = "127.0.0.1") -> None:
        if delay_ms < 0 or jitter_ms < 0 or jitter_ms > delay_ms or stall_ms < 0 or not 0 <= stall_pct <= 100:
            raise ValueError(f"SlowLink: delay_ms, jitter_ms and stall_ms must be >= 0 with jitter_ms <= delay_ms, "
                             f"and stall_pct within 0..100 (got delay_ms={delay_ms}, jitter_ms={jitter_ms}, "
                             f"stall_ms={stall_ms}, stall_pct={stall_pct})")
        if not routes:
            raise ValueError("SlowLink: routes is empty; give at least one name -> (host, port)")
        self.node = node
        self.routes = dict(routes)
        self.ports = {name: free_port() for name in routes}
        self.directory = directory
        self.bind = bind
        self.settings = [f"--delay-ms={delay_ms}", f"--jitter-ms={jitter_ms}", f"--stall-pct={stall_pct}",
                         f"--stall-ms={stall_ms}", f"--seed={seed if seed is not None else random.randrange(10**9)}"]
        self._process: NodeProcess | None = None
        self.is_slow = False

    def address(self, name: str) -> str:
        """``BIND:PORT``: the relay's port for route ``name`` (on ``127.0.0.1``, the default ``bind``, reachable
        from inside the node only)."""
        return f"{self.bind}:{self.ports[name]}"

    def start(self, timeout_s: float = 30.0) -> "SlowLink":
        ready = self.directory / f"slow-link-{self.node.name}-{id(self)}.ready"
        ready.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "kinesis_spout.testing.slow_link", f"--ready={ready}", f"--bind={self.bind}",
                *self.settings]
        argv += [f"--route={self.ports[name]}={host}:{port}" for name, (host, port) in self.routes.items()]
        process = self._process = self.node.run(argv, log=self.directory / f"slow-link-{self.node.name}.log")
        if not wait_until(lambda: ready.exists() or not process.running, timeout_s) or not ready.exists():
            self.close()
            raise RuntimeError(f"the slow link relay of node {self.node.name!r} did not start within {timeout_s:g} s; "
                               f"see {self.directory / f'slow-link-{self.node.name}.log'}")
        return self

    def _signal(self, sig: int) -> None:
        if self._process is None or not self._process.running:
            raise RuntimeError(f"the slow link relay of node {self.node.name!r} is not running: start() it first")
        self._process.signal_group(sig)

    def slow(self) -> None:
        """Delay what the relay forwards from now on (see the module docstring)."""
        self._signal(signal.SIGUSR1)
        self.is_slow = True

    def fast(self) -> None:
        """Forward straight through again."""
        self._signal(signal.SIGUSR2)
        self.is_slow = False

    def close(self) -> None:
        """End the relay (its connections close). Idempotent."""
        if self._process is not None:
            self._process.kill()
            self._process = None


class _Relay:
    """The relay process's state: whether it delays, and the delay model (seeded)."""

    def __init__(self, delay_ms: float, jitter_ms: float, stall_pct: float, stall_ms: float, seed: int) -> None:
        self.slow = False
        self.delay_s, self.jitter_s = delay_ms / 1000, jitter_ms / 1000
        self.stall_p, self.stall_s = stall_pct / 100, stall_ms / 1000
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def delay(self) -> float:
        if not self.slow:
            return 0.0
        with self.lock:
            late = self.rng.uniform(self.delay_s - self.jitter_s, self.delay_s + self.jitter_s)
            return late + (self.stall_s if self.rng.random() < self.stall_p else 0.0)

    def pump(self, src: socket.socket, dst: socket.socket, finished: "_Finished") -> None:
        """Copy ``src`` to ``dst`` in order, each chunk held until its due time; ``finished`` closes both sockets
        once both directions ended (or at once on an error)."""
        chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

        def write() -> None:
            try:
                while True:
                    due, data = chunks.get()
                    time.sleep(max(0.0, due - time.monotonic()))  # the modelled delay itself
                    if not data:
                        dst.shutdown(socket.SHUT_WR)
                        finished.one()
                        return
                    dst.sendall(data)
            except OSError:
                finished.all()

        threading.Thread(target=write, daemon=True).start()
        last_due = 0.0
        try:
            while True:
                data = src.recv(CHUNK)
                last_due = max(last_due, time.monotonic() + self.delay())  # in order, like a TCP stream
                chunks.put((last_due, data))
                if not data:
                    return
        except OSError:
            chunks.put((last_due, b""))
            finished.all()

    def serve(self, listener: socket.socket, upstream: tuple[str, int]) -> None:
        while True:
            client, _ = listener.accept()
            threading.Thread(target=self.connect, args=(client, upstream), daemon=True).start()

    def connect(self, client: socket.socket, upstream: tuple[str, int]) -> None:
        try:
            server = socket.create_connection(upstream, timeout=10)
        except OSError:
            client.close()
            return
        server.settimeout(None)
        finished = _Finished(client, server)
        threading.Thread(target=self.pump, args=(server, client, finished), daemon=True).start()
        self.pump(client, server, finished)


class _Finished:
    """Closes a relayed connection's two sockets once both directions ended, or at once on an error."""

    def __init__(self, *socks: socket.socket) -> None:
        self.socks = socks
        self.ended = 0
        self.lock = threading.Lock()

    def one(self) -> None:
        with self.lock:
            self.ended += 1
            if self.ended < 2:
                return
        _close(*self.socks)

    def all(self) -> None:
        _close(*self.socks)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.close()
        except OSError:
            pass


def main(argv: Sequence[str] | None = None) -> int:
    """The relay process: ``--route LOCAL_PORT=HOST:PORT`` (repeatable), the delay model, ``--ready FILE``
    (written once every port listens). Runs until killed."""
    p = argparse.ArgumentParser(prog="python -m kinesis_spout.testing.slow_link")
    p.add_argument("--route", action="append", required=True, help="LOCAL_PORT=HOST:PORT")
    p.add_argument("--ready", type=Path, required=True)
    p.add_argument("--bind", default="127.0.0.1", help="the address the local ports listen on")
    p.add_argument("--delay-ms", type=float, default=300.0)
    p.add_argument("--jitter-ms", type=float, default=100.0)
    p.add_argument("--stall-pct", type=float, default=5.0)
    p.add_argument("--stall-ms", type=float, default=1000.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow", action="store_true", help="start slow (else fast until SIGUSR1)")
    args = p.parse_args(argv)
    relay = _Relay(args.delay_ms, args.jitter_ms, args.stall_pct, args.stall_ms, args.seed)
    relay.slow = args.slow

    def toggle(signum: int, _frame: FrameType | None) -> None:
        relay.slow = signum == signal.SIGUSR1

    signal.signal(signal.SIGUSR1, toggle)
    signal.signal(signal.SIGUSR2, toggle)
    for route in args.route:
        local, _, target = route.partition("=")
        host, _, port = target.rpartition(":")
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((args.bind, int(local)))
        listener.listen(64)
        threading.Thread(target=relay.serve, args=(listener, (host, int(port))), daemon=True).start()
    args.ready.write_text("ready\n")
    while True:
        time.sleep(3600)  # the relay threads do the work; signals arrive on this thread


if __name__ == "__main__":
    sys.exit(main())
