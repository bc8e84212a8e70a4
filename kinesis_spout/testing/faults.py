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

The modules: :mod:`~kinesis_spout.testing.fault_plans` (the fault kinds and the plan that hands them out),
:mod:`~kinesis_spout.testing.kinesis_wire` (what the proxy knows of the Kinesis API: shards of iterators, listings,
refused entries), :mod:`~kinesis_spout.testing.http_proxy` (the HTTP server and the upstream connection); this
module puts them together.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.parse
import uuid
from collections import deque
from types import TracebackType
from typing import Iterator, Mapping

import pytest

from kinesis_spout.errors import SpoutStateError
from kinesis_spout.testing.fault_plans import DELAYED, DROPPED, TARGET_PREFIX, Fault, FaultPlan
from kinesis_spout.testing.http_proxy import HOP_BY_HOP, ProxyHandler, ProxyServer, UpstreamRequest, forward
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.kinesis_wire import IteratorShards, ShardListing, json_object, merge_refused, split_refused

__all__ = ["DELAYED", "DROPPED", "FaultProxy", "fault_proxy"]

log = logging.getLogger(__name__)


class FaultProxy:
    """A threaded HTTP proxy on ``127.0.0.1:<free port>`` that forwards Kinesis calls and injects scripted faults.

    Who calls: tests (directly or through the ``fault_proxy`` fixture). The constructor does no I/O; ``start()``
    binds and serves on daemon threads; ``close()`` stops serving, closes open client connections and joins the
    threads (idempotent). Scripted faults are consumed in the order they were injected, first match first.

    ``calls`` counts every Kinesis operation seen (forwarded or not); ``injected`` counts the faults delivered, by
    ``"Operation:ErrorCode"`` (``"Operation:ConnectionDropped"`` for dropped connections). Both are
    :class:`collections.Counter` objects updated under a lock (the fault plan's); read them freely.
    """

    def __init__(self, upstream_url: str) -> None:
        parsed = urllib.parse.urlsplit(upstream_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"upstream_url must be an http(s) URL, got {upstream_url!r}")
        self.upstream_url = upstream_url
        self._upstream = parsed
        self._plan = FaultPlan()  # shared with the handler threads, under its own lock
        self.calls = self._plan.calls
        self.injected = self._plan.injected
        self._iterators = IteratorShards()  # shared with the handler threads, under its own lock
        self._listing = ShardListing()  # shared with the handler threads, under its own lock
        self._rates: dict[str, float] = {}  # operation -> calls allowed per second and shard; under _rate_lock
        self._recent: dict[tuple[str, str | None], deque[float]] = {}  # (operation, shard) -> recent calls' times
        self._rate_lock = threading.Lock()
        # the life cycle: the test's thread only
        self._server: ProxyServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._closed = False

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
        server = ProxyServer(("127.0.0.1", 0), self._on_request)
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
        server.close_connections(10.0)

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
        self._plan.add(Fault(operation, error_code, times, status, message, shard_id))

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
            self._plan.add(Fault("PutRecords", None, 1, 0, "", None, entry_codes=dict(codes)))

    def drop_connections(self, operation: str, times: int = 1, *, shard_id: str | None = None) -> None:
        """Close the client's connection without answering the next ``times`` calls of ``operation``.

        The request is read but neither forwarded nor answered: the client sees the connection lost mid-call
        (botocore raises ``ConnectionClosedError``).
        """
        self._plan.add(Fault(operation, None, times, 0, "", shard_id))

    def delay(self, operation: str, seconds: float, times: int = 1, *, shard_id: str | None = None) -> None:
        """Hold the next ``times`` calls of ``operation`` for ``seconds`` before forwarding them (a slow answer:
        the call is carried out when it is forwarded, and answered as usual)."""
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        self._plan.add(Fault(operation, None, times, 0, "", shard_id, delay_s=seconds))

    def expire_shards(self, shard_ids: set[str] | list[str]) -> None:
        """Leave these shards out of ``ListShards`` and ``DescribeStream`` replies from now on, as Kinesis does once
        a closed shard is older than the stream's retention (the emulators never expire shards)."""
        self._listing.expire(shard_ids)

    def hide_hash_key_ranges(self) -> None:
        """Leave ``HashKeyRange`` out of every shard of ``ListShards`` and ``DescribeStream`` replies from now on
        (a listing that does not say which hash keys a shard serves)."""
        self._listing.hide_hash_key_ranges()

    def limit_rate(self, operation: str, per_second: float) -> None:
        """Answer ``operation`` calls beyond ``per_second`` per shard (in any sliding second, counted across every
        client of this proxy) with ``ProvisionedThroughputExceededException``, as Kinesis does for its shared read
        limit (5 GetRecords calls a second per shard, whatever the number of applications). For ``GetRecords`` and
        ``GetShardIterator`` the shard is told as for targeted faults (an untold shard shares one budget); other
        operations share one budget. Refused calls count in ``injected`` like scripted faults. Any thread."""
        if not per_second > 0:
            raise ValueError(f"per_second must be positive, got {per_second!r}")
        with self._rate_lock:
            self._rates[operation] = per_second

    def _over_rate(self, operation: str, body: bytes) -> float | None:
        """The limit this call goes beyond (it is then not counted as made), or None. Called by the handler threads,
        for every call; the windows are touched under ``_rate_lock``."""
        with self._rate_lock:
            limit = self._rates.get(operation)
        if limit is None:
            return None
        shard = self._iterators.shard_of_request(operation, body)
        now = time.monotonic()
        with self._rate_lock:
            recent = self._recent.setdefault((operation, shard), deque())
            while recent and recent[0] <= now - 1.0:
                recent.popleft()
            if len(recent) >= limit:
                return limit
            recent.append(now)
            return None

    def clear(self) -> None:
        """Forget every fault not yet delivered."""
        self._plan.clear()

    def pending(self) -> int:
        """How many scripted faults are still to be delivered (summed over their ``times``)."""
        return self._plan.pending()

    # -- answering calls (the handler threads) ------------------------------------------------------------------

    def forward(self, request: UpstreamRequest) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send a call no fault answered to the emulator; returns its status, reason, headers and body. Called on
        the client connection's thread, for each call forwarded (a ``PutRecords`` call with refused entries with the
        other entries only). A subclass may override it to watch or hold calls, calling ``super().forward``."""
        return forward(self._upstream, request)

    def shard_of(self, operation: str, body: bytes) -> str | None:
        """The shard a ``GetShardIterator`` or ``GetRecords`` request (its body) is for, as far as the proxy can
        tell (see the module docstring); None otherwise. Any thread."""
        return self._iterators.shard_of_request(operation, body)

    def _on_request(self, handler: ProxyHandler) -> None:
        """Answer one request of a client: with a scripted fault if one matches it, else forwarded upstream (with
        the listing rewritten). Called by the HTTP server on the client connection's thread."""
        body = handler.read_body()
        target = handler.headers.get("X-Amz-Target", "")
        operation = target[len(TARGET_PREFIX):] if target.startswith(TARGET_PREFIX) else ""
        fault = self._plan.take(operation, lambda: self._iterators.shard_of_request(operation, body)) \
            if operation else None
        limit = self._over_rate(operation, body) if fault is None and operation else None
        if limit is not None:
            fault = Fault(operation, "ProvisionedThroughputExceededException", 1, 400,
                          f"Rate exceeded for shard: over {limit:g} {operation} calls a second", None)
            with self._plan.lock:
                self.injected[fault.label] += 1
        if fault is not None and fault.entry_codes is not None:
            if fault.entry_codes:
                self._refuse_entries(handler, fault.entry_codes, body)
                return
            fault = None  # an empty mapping: this call goes through unchanged
        if fault is not None and fault.delay_s:
            log.info("fault proxy: holding a %s call for %g s", operation, fault.delay_s)
            time.sleep(fault.delay_s)
            fault = None
        if fault is not None and fault.error_code is None:
            log.info("fault proxy: dropping the connection of a %s call", operation)
            handler.drop()
            return
        if fault is not None:
            log.info("fault proxy: answering a %s call with %s (%d)", operation, fault.error_code, fault.status)
            payload = json.dumps({"__type": fault.error_code, "message": fault.message}).encode()
            handler.reply(fault.status, None, [("Content-Type", "application/x-amz-json-1.1"),
                                               ("x-amzn-RequestId", str(uuid.uuid4())),
                                               ("x-amzn-ErrorType", str(fault.error_code))], payload)
            return
        try:
            status, reason, reply_headers, reply = self.forward(handler.upstream_request(body))
        except (OSError, http.client.HTTPException) as exc:
            log.warning("fault proxy: upstream %s failed: %r", self.upstream_url, exc)
            payload = json.dumps({"__type": "ServiceUnavailable",
                                  "message": f"fault proxy: upstream {self.upstream_url} failed: {exc!r}"}).encode()
            handler.reply(502, None, [("Content-Type", "application/x-amz-json-1.1"),
                                      ("x-amzn-ErrorType", "ServiceUnavailable")], payload)
            return
        if operation:
            self._iterators.observe_reply(operation, body, status, reply)
            if status == 200:
                reply = self._listing.rewrite(operation, reply)
        handler.reply(status, reason, [(k, v) for k, v in reply_headers if k.lower() not in HOP_BY_HOP], reply)

    def _refuse_entries(self, handler: ProxyHandler, codes: dict[int, str], body: bytes) -> None:
        """Answer a PutRecords call with the entries of ``codes`` refused and the others forwarded (see
        :meth:`refuse_records`)."""
        request, records, refused, kept = split_refused(body, codes)
        results: list[object] = []
        encryption = "NONE"
        if kept:
            try:
                status, reason, reply_headers, reply = self.forward(
                    handler.upstream_request(json.dumps({**request, "Records": kept}).encode()))
            except (OSError, http.client.HTTPException) as exc:
                payload = json.dumps({"__type": "ServiceUnavailable",
                                      "message": f"fault proxy: upstream failed: {exc!r}"}).encode()
                handler.reply(502, None, [("Content-Type", "application/x-amz-json-1.1"),
                                          ("x-amzn-ErrorType", "ServiceUnavailable")], payload)
                return
            answer = json_object(reply)
            entries = answer.get("Records")
            if status != 200 or not isinstance(entries, list):  # the call failed as a whole
                handler.reply(status, reason, [(k, v) for k, v in reply_headers if k.lower() not in HOP_BY_HOP],
                              reply)
                return
            results = list(entries)
            encryption = str(answer.get("EncryptionType") or "NONE")
        payload = merge_refused(len(records), refused, results, encryption)
        self._plan.count_refused(refused.values())
        log.info("fault proxy: refusing %d of %d PutRecords entries", len(refused), len(records))
        handler.reply(200, None, [("Content-Type", "application/x-amz-json-1.1"),
                                  ("x-amzn-RequestId", str(uuid.uuid4()))], payload)


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
