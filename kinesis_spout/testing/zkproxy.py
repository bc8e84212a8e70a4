"""A fault-injecting TCP proxy in front of ZooKeeper: a connection cut in place of a chosen reply (or of a chosen
request), a reply held back while a test changes the tree, an error code in place of a reply (or of a request).

ZooKeeper never drops a connection in the middle of a pipeline of requests (before or after carrying one out),
never lets another client act between two of our requests at a moment a test chooses, and never answers with an
error it has no reason for. Those are the moments where a checkpoint store's fallbacks run.
:class:`ZooKeeperFaultProxy` sits between a kazoo client and the server and reads ZooKeeper's framing (every packet
is a 4-byte big-endian length and its body; after the session's first packet, a request starts with its xid and
operation code, a reply with its xid, zxid and error code), so it knows which request each reply
answers. Scripted replies are acted on:

    with ZooKeeperFaultProxy(zookeeper.hosts) as proxy:
        store = ZooKeeperCheckpointStore(proxy.hosts, path)
        proxy.cut(Op.GET_DATA, nth=2, hold=True)  # the connection drops in place of the 2nd read's reply
        ...                                       # (in another thread: the store's call)
        proxy.wait_acted()                        # the cut happened; reconnecting is refused meanwhile
        client.delete(...)                        # the tree changes while the store is away
        proxy.release()                           # the store reconnects and resumes its session

The server itself is untouched: a request whose reply was cut was carried out, a request cut by :meth:`cut_request`
never reached it, a held reply is forwarded on :meth:`release`, and an error reply replaces the answer to a request
the server did carry out (:meth:`answer_error`) or to one it never saw (:meth:`refuse`).

Only the standard library; one accepting thread and two pumping threads per client connection.
"""

from __future__ import annotations

import enum
import logging
import socket
import struct
import threading
from dataclasses import dataclass
from types import TracebackType

from kinesis_spout.errors import SpoutStateError

__all__ = ["Op", "ZooKeeperFaultProxy", "ZK_NO_NODE", "ZK_NODE_EXISTS", "ZK_OPERATION_TIMEOUT",
           "ZK_RUNTIME_INCONSISTENCY"]

log = logging.getLogger(__name__)

#: ZooKeeper's error codes (as the server sends them in a reply header) that tests inject.
ZK_RUNTIME_INCONSISTENCY = -2
ZK_OPERATION_TIMEOUT = -7
ZK_NO_NODE = -101
ZK_NODE_EXISTS = -110


class Op(enum.IntEnum):
    """ZooKeeper's operation codes of the requests a checkpoint store sends."""

    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_CHILDREN = 8
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15


def _op(code: int) -> Op | int:
    try:
        return Op(code)
    except ValueError:
        return code


@dataclass
class _Rule:
    op: int
    action: str  # "cut", "hold" or "error"
    nth: int  # act from the nth reply to ``op`` after the rule was set
    times: int
    error: int = 0
    hold: bool = False  # "cut": refuse new connections until release()
    seen: int = 0
    request: bool = False  # acts on the client's request (never sent on) instead of the server's reply


class _Link:
    """One client connection and its upstream connection; ``ops`` maps a pending request's xid to its
    operation (written by the client pump before the request is passed on, read by the server pump)."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.ops: dict[int, int] = {}
        self.refused: dict[int, int] = {}  # xid of a refused request -> the error code to answer it with

    def close(self) -> None:
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class ZooKeeperFaultProxy:
    """A proxy for one ZooKeeper server (``upstream``: "host:port"); clients connect to :attr:`hosts`.

    Rules are shared between the test's thread and the pumping threads: touched under
    ``_lock`` only. A rule set by :meth:`cut`, :meth:`hold` or :meth:`answer_error` applies to the replies to its
    operation counted from when it was set; :meth:`wait_acted` waits until any rule acted."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.split(",")[0].rpartition(":")
        self.upstream = (host or "127.0.0.1", int(port))
        self.acted = 0
        self._counts: dict[int, int] = {}  # operation code -> requests passed on to the server (pings too)
        self._rules: list[_Rule] = []
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._acted = threading.Condition(self._lock)
        self._released = threading.Event()
        self._released.set()
        self._refusing = False
        self._listener: socket.socket | None = None
        self._closed = False

    @property
    def hosts(self) -> str:
        """The connect string of the proxy (after :meth:`start`)."""
        if self._listener is None:
            raise SpoutStateError("ZooKeeperFaultProxy is not started: call start() or use it in a with block")
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def requests(self) -> dict[Op | int, int]:
        """How many requests of each operation the clients sent through the proxy so far (pings and session
        closes included, session connects not; a multi counts once). A test takes two readings and subtracts."""
        with self._lock:
            return {_op(code): n for code, n in self._counts.items()}

    def start(self) -> "ZooKeeperFaultProxy":
        if self._listener is None:
            listener = socket.create_server(("127.0.0.1", 0))
            self._listener = listener
            threading.Thread(target=self._accept, args=(listener,), name="zk-fault-proxy", daemon=True).start()
        return self

    def close(self) -> None:
        """Stop accepting, drop every connection and let held replies go (idempotent)."""
        with self._lock:
            self._closed = True
            links, self._links = self._links, []
            listener, self._listener = self._listener, None
        self._released.set()
        if listener is not None:
            listener.close()
        for link in links:
            link.close()

    def __enter__(self) -> "ZooKeeperFaultProxy":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def cut(self, op: Op, *, nth: int = 1, hold: bool = False) -> None:
        """Drop the client's connection in place of the ``nth`` reply to ``op`` (the server carried the request
        out; the client sees the connection lost, and so do all its requests still unanswered). ``hold``: refuse
        new connections until :meth:`release`, so the test can act while the client is away."""
        self._add(_Rule(op, "cut", nth, 1, hold=hold))

    def cut_request(self, op: Op, *, nth: int = 1, hold: bool = False) -> None:
        """Drop the client's connection in place of passing on the ``nth`` request of ``op``: the server never
        sees it (the write did not happen), and the client sees the connection lost. ``hold``: refuse new
        connections until :meth:`release`, so the client stays away longer than its operation deadline."""
        self._add(_Rule(op, "cut", nth, 1, hold=hold, request=True))

    def refuse(self, op: Op, error: int, *, nth: int = 1, times: int = 1) -> None:
        """Answer ``times`` requests of ``op`` from the ``nth`` with ZooKeeper error ``error`` (a ``ZK_*`` code)
        without passing them on: the server never carries them out, and the connection stays up."""
        self._add(_Rule(op, "error", nth, times, error=error, request=True))

    def hold(self, op: Op, *, nth: int = 1) -> None:
        """Keep the ``nth`` reply to ``op`` (and every reply after it on that connection) until :meth:`release`."""
        self._add(_Rule(op, "hold", nth, 1))

    def answer_error(self, op: Op, error: int, *, nth: int = 1, times: int = 1) -> None:
        """Replace ``times`` replies to ``op`` from the ``nth`` with ZooKeeper error ``error`` (a ``ZK_*``
        code)."""
        self._add(_Rule(op, "error", nth, times, error=error))

    def clear(self) -> None:
        """Forget the rules that have not finished acting (held replies stay held until :meth:`release`)."""
        with self._lock:
            self._rules.clear()

    def release(self) -> None:
        """Forward the held replies and accept connections again."""
        with self._lock:
            self._refusing = False
        self._released.set()

    def wait_acted(self, count: int = 1, timeout_s: float = 20.0) -> None:
        """Wait until rules acted ``count`` times in all; a clear error if they did not within ``timeout_s``."""
        with self._acted:
            if not self._acted.wait_for(lambda: self.acted >= count, timeout_s):
                raise SpoutStateError(f"the proxy acted {self.acted} times within {timeout_s:g} s, not {count}: "
                                      f"the client never sent the scripted requests (rules left: {self._rules})")

    def _add(self, rule: _Rule) -> None:
        if rule.nth < 1 or rule.times < 1:
            raise ValueError(f"nth and times count from 1, got nth={rule.nth} times={rule.times}")
        with self._lock:
            self._rules.append(rule)

    def _take(self, op: int | None, request: bool = False) -> _Rule | None:
        """The rule acting on this reply (or, ``request``, on this request), if any (its counts moved on); under
        ``_lock``."""
        if op is None:
            return None
        for rule in self._rules:
            if rule.op != op or rule.request != request:
                continue
            rule.seen += 1
            if rule.seen < rule.nth:
                continue
            if rule.seen >= rule.nth + rule.times - 1:
                self._rules.remove(rule)
            self.acted += 1
            self._acted.notify_all()
            return rule
        return None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                refuse = self._refusing or self._closed
            if refuse:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5.0)
            except OSError as exc:
                log.warning("ZooKeeper at %s:%d not reachable: %s", *self.upstream, exc)
                client.close()
                continue
            server.settimeout(None)
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), name="zk-fault-proxy-up", daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), name="zk-fault-proxy-down", daemon=True).start()

    def _requests(self, link: _Link) -> None:
        first = True  # the session's connect request has no xid or operation
        while (packet := _read_packet(link.client)) is not None:
            rule = None
            if not first and len(packet) >= 12:
                xid, code = struct.unpack_from(">ii", packet, 4)
                with self._lock:
                    link.ops[xid] = code
                    self._counts[code] = self._counts.get(code, 0) + 1
                    rule = self._take(code, request=True)
                    if rule is not None and rule.hold:
                        self._released.clear()
                        self._refusing = True
                    if rule is not None and rule.action == "error":
                        link.refused[xid] = rule.error
                if rule is not None and rule.action == "error":
                    # the server gets a harmless request in its place (exists("/"), same xid), so that the answer
                    # comes back in order among the others; the reply pump turns it into the error
                    body = struct.pack(">iii", xid, Op.EXISTS, 1) + b"/\x00"
                    packet = struct.pack(">i", len(body)) + body
                    rule = None
                if rule is not None:
                    break  # the request is never passed on: the connection drops in its place
            first = False
            if not _send(link.server, packet):
                break
        link.close()

    def _replies(self, link: _Link) -> None:
        first = True  # the session's connect response has no header
        while (packet := _read_packet(link.server)) is not None:
            if not first and len(packet) >= 20:
                xid, zxid = struct.unpack_from(">iq", packet, 4)
                with self._lock:
                    refused = link.refused.pop(xid, None)
                    op = link.ops.pop(xid, None)
                    rule = self._take(op) if refused is None else None
                    if rule is not None and (rule.action == "hold" or rule.hold):
                        self._released.clear()
                        self._refusing = rule.action == "cut"
                if refused is not None:
                    packet = struct.pack(">iiqi", 16, xid, zxid, refused)
                if rule is not None and rule.action == "cut":
                    link.close()
                    return
                if rule is not None and rule.action == "hold":
                    self._released.wait()
                if rule is not None and rule.action == "error":
                    packet = struct.pack(">iiqi", 16, xid, zxid, rule.error)
            first = False
            if not _send(link.client, packet):
                break
        link.close()


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        try:
            chunk = sock.recv(n - len(chunks))
        except OSError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _read_packet(sock: socket.socket) -> bytes | None:
    """One framed packet, its length prefix included; None when the connection ended."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (length,) = struct.unpack(">i", head)
    body = _read_exactly(sock, length) if length > 0 else b""
    return None if body is None else head + body


def _send(sock: socket.socket, packet: bytes) -> bool:
    try:
        sock.sendall(packet)
        return True
    except OSError:
        return False
