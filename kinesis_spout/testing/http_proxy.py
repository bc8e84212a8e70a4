"""The HTTP side of a :class:`~kinesis_spout.testing.faults.FaultProxy`: a threaded HTTP/1.1 server with
keep-alive (boto3 reuses connections), one handler per client connection, and one short-lived :mod:`http.client`
connection upstream per forwarded request. It knows nothing of faults: each request is handed to the server's
``on_request`` callback, which answers it through the handler's methods.

Shared state: the server's map of open client connections (so that they can be ended and joined at close) is
touched under the server's own lock; a handler belongs to its connection's thread.
"""

from __future__ import annotations

import http.client
import logging
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["HOP_BY_HOP", "ProxyHandler", "ProxyServer", "UpstreamRequest", "forward"]

log = logging.getLogger(__name__)

# Headers that describe one hop of a connection, never forwarded (RFC 9110 section 7.6.1), plus the framing
# headers the proxy recomputes itself.
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length", "expect",
})


@dataclass(frozen=True)
class UpstreamRequest:
    """A client's request as the proxy forwards it: method, path, end-to-end headers and body, and the two ends
    of the client's connection (its address and the proxy's), which tell which client process sent it."""

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    client_address: tuple[str, int]
    proxy_address: tuple[str, int]


def forward(upstream: urllib.parse.SplitResult, request: UpstreamRequest
            ) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """Send the request upstream on a fresh connection; returns status, reason, headers and body. Called by a
    handler thread; raises ``OSError`` or ``http.client.HTTPException`` when the upstream fails."""
    conn_class = http.client.HTTPSConnection if upstream.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(upstream.hostname or "127.0.0.1", upstream.port, timeout=60.0)
    try:
        conn.putrequest(request.method, request.path, skip_host=True, skip_accept_encoding=True)
        for name, value in request.headers:
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(request.body)))
        conn.putheader("Connection", "close")
        conn.endheaders(request.body)
        response = conn.getresponse()
        data = response.read()
        return response.status, response.reason, response.getheaders(), data
    finally:
        conn.close()


class ProxyServer(ThreadingHTTPServer):
    """Serves each client connection on its own daemon thread, remembered so that :meth:`close_connections` can
    end and join it. ``on_request`` answers every request (see :class:`ProxyHandler`)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], on_request: Callable[[ProxyHandler], None]) -> None:
        self.on_request = on_request
        self._lock = threading.Lock()
        self._connections: dict[threading.Thread, socket.socket] = {}  # under _lock
        super().__init__(address, ProxyHandler)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name=f"fault-proxy-conn-{client_address}", daemon=True)
        with self._lock:
            self._connections[thread] = request
        thread.start()

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections.pop(threading.current_thread(), None)

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that went away mid-request (killed, timed out, cut by a fault) is logged at DEBUG, not printed
        as a traceback; any other error of a connection's thread is logged with its traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            log.debug("fault proxy: client %s went away: %s", client_address, error)
        else:
            log.exception("fault proxy: error serving client %s", client_address)

    def close_connections(self, timeout_s: float = 10.0) -> None:
        """Shut down the client connections still open and join their threads. Called by the proxy's close(),
        after the server stopped accepting."""
        with self._lock:
            connections = list(self._connections.items())
        for _thread, sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread, _sock in connections:
            thread.join(timeout_s)


class ProxyHandler(BaseHTTPRequestHandler):
    """One client connection: reads requests (keep-alive) and hands each to the server's ``on_request``, which
    answers with :meth:`reply` or :meth:`drop`. Replies carry a Content-Length."""

    protocol_version = "HTTP/1.1"
    server: ProxyServer
    timeout = 120.0  # an idle keep-alive connection is closed after this

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's signature
        log.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:
        self.server.on_request(self)

    def do_GET(self) -> None:
        self.server.on_request(self)

    def do_PUT(self) -> None:
        self.server.on_request(self)

    def do_DELETE(self) -> None:
        self.server.on_request(self)

    def do_HEAD(self) -> None:
        self.server.on_request(self)

    def read_body(self) -> bytes:
        """The request's body (Content-Length or chunked). Called once per request, by ``on_request``."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def upstream_request(self, body: bytes) -> UpstreamRequest:
        """The request to forward upstream with ``body``: its headers without the hop-by-hop ones."""
        client, proxy = self.client_address, self.server.server_address
        return UpstreamRequest(self.command, self.path,
                               [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP], body,
                               (str(client[0]), int(client[1])), (str(proxy[0]), int(proxy[1])))

    def drop(self) -> None:
        """Close the client's connection without an answer (the client sees it lost mid-call)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def reply(self, status: int, reason: str | None, headers: list[tuple[str, str]], body: bytes) -> None:
        """Answer the request: ``status``, ``headers`` (our own Server and Date kept) and ``body``."""
        self.send_response(status, reason)
        for name, value in headers:
            if name.lower() not in ("server", "date"):  # send_response wrote ours
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()
