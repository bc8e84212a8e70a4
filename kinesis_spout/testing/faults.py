"""A fault-injecting HTTP proxy in front of a Kinesis emulator: throttling, expired iterators, lost connections.

moto and kinesalite never throttle, never expire an iterator and never drop a connection, so the faults a reader
must survive in production cannot happen against them. :class:`FaultProxy` sits between a client and the emulator,
forwards Kinesis JSON API calls (``POST`` with ``X-Amz-Target: Kinesis_20131202.<Operation>``) unchanged, and
answers scripted calls itself with an AWS JSON error or by closing the connection, or forwards them late. The
library under test talks to it through its ordinary boto3 client: nothing of the library is mocked.

    with FaultProxy(moto_url) as proxy:
        proxy.inject("GetRecords", "ProvisionedThroughputExceededException", times=3)
        client = make_client("us-east-1", proxy.endpoint_url)
        ...
        assert proxy.injected["GetRecords:ProvisionedThroughputExceededException"] == 3

``PutRecords`` calls can also be answered with chosen entries refused (``ErrorCode`` in their result entries, as
Kinesis does for a throttled or failed entry): :meth:`FaultProxy.refuse_records` forwards only the other entries and
merges the emulator's answer for them with the refusals.

Faults for ``GetRecords`` and ``GetShardIterator`` can target one shard. ``GetShardIterator`` names its shard in
the request; a ``GetRecords`` request carries only an iterator, so the proxy remembers which shard each iterator
it passed back belongs to (from ``GetShardIterator`` replies and from ``NextShardIterator`` in ``GetRecords``
replies), and falls back to decoding moto's iterators (base64 of ``stream:shard:sequence``). kinesalite encrypts
its iterators: there only the remembered iterators are known, which is every iterator a client got through the
proxy.

Only the standard library is used: a :class:`http.server.ThreadingHTTPServer` speaking HTTP/1.1 with keep-alive
(boto3 reuses connections) and one short-lived :mod:`http.client` connection upstream per request.
"""

from __future__ import annotations

import base64
import binascii
import collections
import http.client
import json
import logging
import re
import socket
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Iterator, Mapping

import pytest

from kinesis_spout.errors import SpoutStateError
from kinesis_spout.testing.kinesis import KinesisEndpoint

__all__ = ["DELAYED", "DROPPED", "FaultProxy", "fault_proxy"]

log = logging.getLogger("kinesis_spout.testing.faults")

TARGET_PREFIX = "Kinesis_20131202."
#: The code under which dropped connections are counted in :attr:`FaultProxy.injected`.
DROPPED = "ConnectionDropped"
#: The code under which calls held back before being forwarded are counted in :attr:`FaultProxy.injected`.
DELAYED = "Delayed"
SHARD_FILTERED_OPERATIONS = frozenset({"GetRecords", "GetShardIterator"})
# Headers that describe one hop of a connection, never forwarded (RFC 9110 section 7.6.1), plus the framing
# headers the proxy recomputes itself.
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length", "expect",
})
_NEXT_ITERATOR = re.compile(rb'"NextShardIterator"\s*:\s*"([^"]+)"')
_SHARD_ID = re.compile(r"shardId-[0-9]+")
_MAX_REMEMBERED_ITERATORS = 100_000


@dataclass
class _Fault:
    """One scripted fault: answer the next ``remaining`` matching calls with an error, drop them, or forward them
    after ``delay_s``."""

    operation: str
    error_code: str | None  # None: drop the connection (or, with delay_s, forward late)
    remaining: int
    status: int
    message: str
    shard_id: str | None
    delay_s: float = 0.0
    entry_codes: dict[int, str] | None = None  # PutRecords: refuse these entries (by index) with these codes

    @property
    def label(self) -> str:
        return f"{self.operation}:{self.error_code or (DELAYED if self.delay_s else DROPPED)}"


class FaultProxy:
    """A threaded HTTP proxy on ``127.0.0.1:<free port>`` that forwards Kinesis calls and injects scripted faults.

    Who calls: tests (directly or through the ``fault_proxy`` fixture). The constructor does no I/O; ``start()``
    binds and serves on daemon threads; ``close()`` stops serving, closes open client connections and joins the
    threads (idempotent). Scripted faults are consumed in the order they were injected, first match first.

    ``calls`` counts every Kinesis operation seen (forwarded or not); ``injected`` counts the faults delivered, by
    ``"Operation:ErrorCode"`` (``"Operation:ConnectionDropped"`` for dropped connections). Both are
    :class:`collections.Counter` objects updated under a lock; read them freely.
    """

    def __init__(self, upstream_url: str) -> None:
        parsed = urllib.parse.urlsplit(upstream_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"upstream_url must be an http(s) URL, got {upstream_url!r}")
        self.upstream_url = upstream_url
        self._upstream = parsed
        self.calls: collections.Counter[str] = collections.Counter()
        self.injected: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._iterator_shards: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._server: ThreadingHTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._connections: dict[threading.Thread, socket.socket] = {}
        self._closed = False
        self._expired: set[str] = set()
        self._hide_hash_ranges = False  # ListShards/DescribeStream replies without HashKeyRange; under _lock

    # -- life cycle ---------------------------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>``, the URL clients use instead of the upstream's. Only after ``start()``."""
        if self._server is None:
            raise SpoutStateError("FaultProxy.endpoint_url: the proxy is not started; call start() first")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "FaultProxy":
        """Bind a free loopback port and serve on a daemon thread. Idempotent; a closed proxy cannot restart."""
        if self._closed:
            raise SpoutStateError("FaultProxy.start: the proxy was closed; create a new one")
        if self._server is not None:
            return self
        server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        server.proxy = self
        self._server = server
        self._serve_thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                              name=f"fault-proxy-{server.server_address[1]}", daemon=True)
        self._serve_thread.start()
        return self

    def close(self) -> None:
        """Stop serving, close client connections still open and join every thread. Idempotent."""
        self._closed = True
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join(10.0)
            self._serve_thread = None
        with self._lock:
            connections = list(self._connections.items())
        for _thread, sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread, _sock in connections:
            thread.join(10.0)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- scripting faults ---------------------------------------------------------------------------------------

    def inject(self, operation: str, error_code: str, *, times: int = 1, status: int = 400,
               message: str = "injected fault", shard_id: str | None = None) -> None:
        """Answer the next ``times`` calls of ``operation`` with an AWS JSON error instead of forwarding them.

        The reply has HTTP ``status``, header ``x-amzn-ErrorType: error_code`` and body
        ``{"__type": error_code, "message": message}``, which botocore raises as a ``ClientError`` with that code.
        For ``GetRecords`` and ``GetShardIterator``, ``shard_id`` limits the fault to calls for that shard.
        """
        self._add(_Fault(operation, error_code, times, status, message, shard_id))

    def refuse_records(self, *calls: Mapping[int, str]) -> None:
        """Answer the next ``len(calls)`` ``PutRecords`` calls, one mapping each in turn, with the entries at the
        mapping's indexes (0-based, in the call's ``Records``) refused with its error codes (``"InternalFailure"``,
        ``"ProvisionedThroughputExceededException"``): only the other entries are forwarded, the reply merges the
        emulator's results for them with ``{"ErrorCode": code, "ErrorMessage": ...}`` for the refused ones, and
        ``FailedRecordCount`` counts both. An empty mapping lets its call through unchanged; an index beyond the
        call's entries is ignored. Each refused entry counts once in ``injected["PutRecords:<code>"]``.

        Example: ``refuse_records({1: "ProvisionedThroughputExceededException"}, {0: "InternalFailure"})`` refuses
        the second entry of a call, then the first entry of the next call (its retry, when it is sent alone).
        """
        if not calls:
            raise ValueError("refuse_records needs one mapping {entry index: error code} per call")
        for codes in calls:
            if not all(isinstance(i, int) and i >= 0 and isinstance(c, str) and c for i, c in codes.items()):
                raise ValueError(f"refuse_records takes mappings of entry index (0 or more) to an error code, "
                                 f"got {dict(codes)!r}")
        for codes in calls:
            self._add(_Fault("PutRecords", None, 1, 0, "", None, entry_codes=dict(codes)))

    def drop_connections(self, operation: str, times: int = 1, *, shard_id: str | None = None) -> None:
        """Close the client's connection without answering the next ``times`` calls of ``operation``.

        The request is read but neither forwarded nor answered: the client sees the connection lost mid-call
        (botocore raises ``ConnectionClosedError``).
        """
        self._add(_Fault(operation, None, times, 0, "", shard_id))

    def delay(self, operation: str, seconds: float, times: int = 1, *, shard_id: str | None = None) -> None:
        """Hold the next ``times`` calls of ``operation`` for ``seconds`` before forwarding them (a slow answer:
        the call is carried out when it is forwarded, and answered as usual)."""
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        self._add(_Fault(operation, None, times, 0, "", shard_id, delay_s=seconds))

    def expire_shards(self, shard_ids: set[str] | list[str]) -> None:
        """Leave these shards out of ``ListShards`` and ``DescribeStream`` replies from now on, as Kinesis does once
        a closed shard is older than the stream's retention (the emulators never expire shards)."""
        with self._lock:
            self._expired.update(shard_ids)

    def hide_hash_key_ranges(self) -> None:
        """Leave ``HashKeyRange`` out of every shard of ``ListShards`` and ``DescribeStream`` replies from now on
        (a listing that does not say which hash keys a shard serves)."""
        with self._lock:
            self._hide_hash_ranges = True

    def _without_expired(self, operation: str, reply: bytes) -> bytes:
        """A listing reply with the expired shards taken out, and the hash key ranges if hidden (other replies
        unchanged)."""
        with self._lock:
            expired, hide = set(self._expired), self._hide_hash_ranges
        if not expired and not hide or operation not in ("ListShards", "DescribeStream"):
            return reply
        doc = _json_object(reply)
        holder = doc.get("StreamDescription") if operation == "DescribeStream" else doc
        if not isinstance(holder, dict) or not isinstance(holder.get("Shards"), list):
            return reply
        holder["Shards"] = [s for s in holder["Shards"] if not (isinstance(s, dict) and s.get("ShardId") in expired)]
        if hide:
            for shard in holder["Shards"]:
                if isinstance(shard, dict):
                    shard.pop("HashKeyRange", None)
        return json.dumps(doc).encode()

    def clear(self) -> None:
        """Forget every fault not yet delivered."""
        with self._lock:
            self._faults.clear()

    def pending(self) -> int:
        """How many scripted faults are still to be delivered (summed over their ``times``)."""
        with self._lock:
            return sum(f.remaining for f in self._faults)

    def _add(self, fault: _Fault) -> None:
        if not fault.operation or fault.operation.startswith(TARGET_PREFIX):
            raise ValueError(f"operation must be a bare Kinesis operation name like 'GetRecords', "
                             f"got {fault.operation!r}")
        if fault.remaining < 1:
            raise ValueError(f"times must be at least 1, got {fault.remaining}")
        if fault.error_code is not None and not 400 <= fault.status <= 599:
            raise ValueError(f"status must be an HTTP error status (400-599), got {fault.status}")
        if fault.shard_id is not None and fault.operation not in SHARD_FILTERED_OPERATIONS:
            raise ValueError(f"shard_id can only limit faults of {sorted(SHARD_FILTERED_OPERATIONS)}, "
                             f"not {fault.operation!r}")
        with self._lock:
            self._faults.append(fault)

    # -- used by the handler threads ----------------------------------------------------------------------------

    def _take_fault(self, operation: str, body: bytes) -> _Fault | None:
        """Count the call and consume the first scripted fault that matches it, if any."""
        with self._lock:
            self.calls[operation] += 1
            candidates = [f for f in self._faults if f.operation == operation]
        if not candidates:
            return None
        shard = self._shard_of(operation, body) if any(f.shard_id for f in candidates) else None
        with self._lock:
            for fault in self._faults:
                if fault.operation != operation or fault.remaining < 1:
                    continue
                if fault.shard_id is not None and fault.shard_id != shard:
                    continue
                fault.remaining -= 1
                if fault.remaining == 0:
                    self._faults.remove(fault)
                if fault.entry_codes is None:  # refused entries are counted one by one when answered
                    self.injected[fault.label] += 1
                return fault
        return None

    def _shard_of(self, operation: str, body: bytes) -> str | None:
        request = _json_object(body)
        if operation == "GetShardIterator":
            shard = request.get("ShardId")
            return shard if isinstance(shard, str) else None
        iterator = request.get("ShardIterator")
        return self._iterator_shard(iterator) if isinstance(iterator, str) else None

    def _iterator_shard(self, iterator: str) -> str | None:
        with self._lock:
            shard = self._iterator_shards.get(iterator)
        return shard if shard is not None else _decode_moto_iterator(iterator)

    def _remember(self, iterator: str, shard: str | None) -> None:
        if not shard:
            return
        with self._lock:
            self._iterator_shards[iterator] = shard
            while len(self._iterator_shards) > _MAX_REMEMBERED_ITERATORS:
                self._iterator_shards.popitem(last=False)

    def _observe_reply(self, operation: str, request_body: bytes, status: int, reply_body: bytes) -> None:
        """Remember the shard of each iterator handed to the client, for shard-limited GetRecords faults."""
        if status != 200 or operation not in SHARD_FILTERED_OPERATIONS:
            return
        if operation == "GetShardIterator":
            shard = _json_object(request_body).get("ShardId")
            iterator = _json_object(reply_body).get("ShardIterator")
            if isinstance(shard, str) and isinstance(iterator, str):
                self._remember(iterator, shard)
            return
        match = _NEXT_ITERATOR.search(reply_body)
        if match is None:
            return
        current = _json_object(request_body).get("ShardIterator")
        if isinstance(current, str):
            try:
                next_iterator = json.loads(b'"' + match.group(1) + b'"')  # undo JSON escapes such as \\n
            except ValueError:
                return
            self._remember(next_iterator, self._iterator_shard(current))

    def _forward(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
                 ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send the request upstream on a fresh connection; returns status, reason, headers and body."""
        up = self._upstream
        conn_class = http.client.HTTPSConnection if up.scheme == "https" else http.client.HTTPConnection
        conn = conn_class(up.hostname or "127.0.0.1", up.port, timeout=60.0)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.putheader("Connection", "close")
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            conn.close()



class _ProxyServer(ThreadingHTTPServer):
    """Serves each client connection on its own daemon thread, remembered so that close() can end and join it."""

    daemon_threads = True
    allow_reuse_address = True
    proxy: FaultProxy

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name=f"fault-proxy-conn-{client_address}", daemon=True)
        with self.proxy._lock:
            self.proxy._connections[thread] = request
        thread.start()

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.proxy._lock:
                self.proxy._connections.pop(threading.current_thread(), None)


class _ProxyHandler(BaseHTTPRequestHandler):
    """One client connection: reads requests (keep-alive), injects or forwards, answers with Content-Length."""

    protocol_version = "HTTP/1.1"
    server: _ProxyServer
    timeout = 120.0  # an idle keep-alive connection is closed after this

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's signature
        log.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
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

    def _handle(self) -> None:
        proxy = self.server.proxy
        body = self._read_body()
        target = self.headers.get("X-Amz-Target", "")
        operation = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
        fault = proxy._take_fault(operation, body) if operation else None
        if fault is not None and fault.entry_codes is not None:
            if fault.entry_codes:
                self._refuse_entries(fault.entry_codes, body)
                return
            fault = None  # an empty mapping: this call goes through unchanged
        if fault is not None and fault.delay_s:
            log.info("fault proxy: holding a %s call for %g s", operation, fault.delay_s)
            time.sleep(fault.delay_s)
            fault = None
        if fault is not None and fault.error_code is None:
            log.info("fault proxy: dropping the connection of a %s call", operation)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault is not None:
            log.info("fault proxy: answering a %s call with %s (%d)", operation, fault.error_code, fault.status)
            payload = json.dumps({"__type": fault.error_code, "message": fault.message}).encode()
            self._reply(fault.status, None, [("Content-Type", "application/x-amz-json-1.1"),
                                             ("x-amzn-RequestId", str(uuid.uuid4())),
                                             ("x-amzn-ErrorType", str(fault.error_code))], payload)
            return
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
        try:
            status, reason, reply_headers, reply = proxy._forward(self.command, self.path, headers, body)
        except (OSError, http.client.HTTPException) as exc:
            log.warning("fault proxy: upstream %s failed: %r", proxy.upstream_url, exc)
            payload = json.dumps({"__type": "ServiceUnavailable",
                                  "message": f"fault proxy: upstream {proxy.upstream_url} failed: {exc!r}"}).encode()
            self._reply(502, None, [("Content-Type", "application/x-amz-json-1.1"),
                                    ("x-amzn-ErrorType", "ServiceUnavailable")], payload)
            return
        if operation:
            proxy._observe_reply(operation, body, status, reply)
            if status == 200:
                reply = proxy._without_expired(operation, reply)
        self._reply(status, reason, [(k, v) for k, v in reply_headers if k.lower() not in _HOP_BY_HOP], reply)

    def _refuse_entries(self, codes: dict[int, str], body: bytes) -> None:
        """Answer a PutRecords call with the entries of ``codes`` refused and the others forwarded (see
        :meth:`FaultProxy.refuse_records`)."""
        proxy = self.server.proxy
        request = _json_object(body)
        records = request.get("Records")
        records = records if isinstance(records, list) else []
        refused = {i: code for i, code in codes.items() if i < len(records)}
        kept = [record for i, record in enumerate(records) if i not in refused]
        results: list[object] = []
        encryption = "NONE"
        if kept:
            headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
            try:
                status, reason, reply_headers, reply = proxy._forward(
                    self.command, self.path, headers, json.dumps({**request, "Records": kept}).encode())
            except (OSError, http.client.HTTPException) as exc:
                payload = json.dumps({"__type": "ServiceUnavailable",
                                      "message": f"fault proxy: upstream failed: {exc!r}"}).encode()
                self._reply(502, None, [("Content-Type", "application/x-amz-json-1.1"),
                                        ("x-amzn-ErrorType", "ServiceUnavailable")], payload)
                return
            answer = _json_object(reply)
            entries = answer.get("Records")
            if status != 200 or not isinstance(entries, list):  # the call failed as a whole
                self._reply(status, reason, [(k, v) for k, v in reply_headers if k.lower() not in _HOP_BY_HOP], reply)
                return
            results = list(entries)
            encryption = str(answer.get("EncryptionType") or "NONE")
        merged: list[object] = []
        for i in range(len(records)):
            if i in refused:
                merged.append({"ErrorCode": refused[i], "ErrorMessage": "injected fault: entry refused"})
            else:
                merged.append(results.pop(0))
        failed = sum(1 for r in merged if isinstance(r, dict) and r.get("ErrorCode"))
        with proxy._lock:
            for code in refused.values():
                proxy.injected[f"PutRecords:{code}"] += 1
        log.info("fault proxy: refusing %d of %d PutRecords entries", len(refused), len(records))
        payload = json.dumps({"FailedRecordCount": failed, "Records": merged, "EncryptionType": encryption}).encode()
        self._reply(200, None, [("Content-Type", "application/x-amz-json-1.1"),
                                ("x-amzn-RequestId", str(uuid.uuid4()))], payload)

    def _reply(self, status: int, reason: str | None, headers: list[tuple[str, str]], body: bytes) -> None:
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


def _json_object(body: bytes) -> dict[str, object]:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _decode_moto_iterator(iterator: str) -> str | None:
    """The shard of a moto iterator (base64 of ``stream:shard:sequence``); None for others (kinesalite's)."""
    try:
        text = base64.b64decode(iterator.encode("ascii"), validate=False).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    parts = text.split(":")
    if len(parts) == 3 and _SHARD_ID.fullmatch(parts[1]):
        return parts[1]
    return None


@pytest.fixture
def fault_proxy(kinesis_backend: KinesisEndpoint) -> Iterator[tuple[FaultProxy, KinesisEndpoint]]:
    """A :class:`FaultProxy` in front of ``kinesis_backend`` (moto and kinesalite), and an endpoint through it.

    Create streams and put records through ``kinesis_backend`` (no faults), read through the yielded endpoint,
    whose ``endpoint_url`` is the proxy's. The proxy is closed after the test.
    """
    with FaultProxy(kinesis_backend.endpoint_url) as proxy:
        through = KinesisEndpoint(f"{kinesis_backend.name}+faults", proxy.endpoint_url,
                                  region=kinesis_backend.region,
                                  real_sequence_numbers=kinesis_backend.real_sequence_numbers)
        yield proxy, through
