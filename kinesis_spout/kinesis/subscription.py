"""Enhanced fan-out reading: one SubscribeToShard subscription per shard, seen by the readers as a shard getter.

:class:`Subscription` is one SubscribeToShard call: botocore builds and signs the request (its endpoint rules,
credentials and signer), a ``before-send`` hook takes the signed request before botocore sends it, and the request
is sent on botocore's own HTTP session with a streamed reply. A thread of its own reads the reply into an
:class:`~kinesis_spout.kinesis.eventstream.EventStreamDecoder` and hands the events over through a queue of one:
while nobody takes them, it stops reading the connection (TCP then holds the server back), so a full buffer loses
nothing. The subscription ends after ``renew_s`` (Kinesis ends it after 5 minutes anyway), at the shard's end, on
a stream error or when the connection is lost.

:class:`FanOutGetter` is a :class:`~kinesis_spout.kinesis.getter.ShardGetter` whose ``fetch()`` takes the next
event without blocking: the same record conversion (KPL de-aggregation, foreign user records), the same
``position`` (after the last record handed out), the same ``FetchResult``. When a subscription ends it subscribes
again from ``position``, so events read from the connection but never handed out are read again, and nothing
handed out is. ``pushed`` tells the :class:`~kinesis_spout.kinesis.reader.BufferedShardReader` to park on an empty
fetch and wait for ``on_pending`` (called by the subscription's thread) instead of polling.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from botocore.endpoint import convert_to_response_dict
from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.client import translate
from kinesis_spout.kinesis.consumers import unsupported
from kinesis_spout.kinesis.eventstream import EventStreamDecoder, SubscriptionEvent, stream_error
from kinesis_spout.kinesis.getter import LATEST_MARGIN, FetchResult, ShardGetter
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.positions import Kind, Position, after, at_timestamp, iterator_args
from kinesis_spout.retry import Backoff, RetryPolicy

__all__ = ["DEFAULT_RENEW_S", "RESUBSCRIBE_S", "SUBSCRIBE_RETRY", "FanOutGetter", "Subscription", "WaitingFanOut",
           "starting_position"]

log = logging.getLogger("kinesis_spout.kinesis")

#: Kinesis ends a subscription after 5 minutes; the getter renews it then at the latest.
DEFAULT_RENEW_S = 300.0
#: Kinesis refuses a new subscription of a consumer to a shard for about this long after the last one was accepted.
RESUBSCRIBE_S = 5.0
#: Retries of a refused or lost subscription by a task: a second apart at first (one SubscribeToShard a second per
#: consumer and shard), then longer, past ``RESUBSCRIBE_S`` by the third.
SUBSCRIBE_RETRY = RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=10.0, jitter=0.5)
_CHUNK = 64 << 10
_ENDED = object()  # queued by the thread when the subscription ended without an error


class _Captured(Exception):
    """Raised by the ``before-send`` hook: botocore's signed request was taken, nothing is sent by botocore."""


def starting_position(position: Position) -> dict[str, Any]:
    """SubscribeToShard's ``StartingPosition`` for a read after ``position`` (as GetShardIterator's arguments)."""
    args = iterator_args(position)
    if args is None:
        raise ValueError("a shard end has nothing left to subscribe to")
    out: dict[str, Any] = {"Type": args.shard_iterator_type}
    if args.starting_sequence_number is not None:
        out["SequenceNumber"] = args.starting_sequence_number
    if args.timestamp is not None:
        out["Timestamp"] = args.timestamp
    return out


_capturing = threading.local()
_hooked: set[int] = set()
_hook_lock = threading.Lock()


def _capture(request: Any, **_: Any) -> None:
    if getattr(_capturing, "active", False):
        _capturing.request = request
        raise _Captured


def signed_request(client: Any, consumer_arn: str, shard_id: str, start: dict[str, Any]) -> Any:
    """botocore's signed SubscribeToShard request (an ``AWSPreparedRequest`` with a streamed reply), not sent."""
    with _hook_lock:
        if id(client) not in _hooked:
            client.meta.events.register("before-send.kinesis.SubscribeToShard", _capture)
            _hooked.add(id(client))
    _capturing.active = True
    _capturing.request = None
    try:
        client.subscribe_to_shard(ConsumerARN=consumer_arn, ShardId=shard_id, StartingPosition=start)
    except _Captured:
        pass
    finally:
        _capturing.active = False
    request = _capturing.request
    _capturing.request = None
    if request is None:  # pragma: no cover - the hook always captures
        raise KinesisError("SubscribeToShard: botocore's request was not captured")
    return request


def _error_of(client: Any, response: Any, what: str) -> KinesisError:
    """The error of a SubscribeToShard reply with an error status, as botocore parses it."""
    model = client.meta.service_model.operation_model("SubscribeToShard")
    try:
        parser = client._endpoint._response_parser_factory.create_parser(model.metadata["protocol"])
        parsed = parser.parse(convert_to_response_dict(response, model), model.output_shape)
        code = str(parsed.get("Error", {}).get("Code") or "")
    except Exception:  # noqa: BLE001 - a reply botocore cannot read: name its status
        parsed, code = {"Error": {"Code": "", "Message": ""}}, ""
    status = response.status_code
    if code in ("UnknownOperationException", "UnknownOperation", "NotImplemented", "InvalidAction") or \
            status in (404, 501) or (not code and status < 500):
        return unsupported(client.meta.endpoint_url, what)
    message = str(parsed.get("Error", {}).get("Message") or "")
    if code in ("ResourceInUseException", "AccessDeniedException", "AccessDenied", "LimitExceededException",
                "ResourceNotFoundException"):
        return stream_error(code, message, what)
    parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = status
    return translate(ClientError(parsed, "SubscribeToShard"), what)


class Subscription:
    """One SubscribeToShard call and the thread reading its reply (see the module docstring).

    Who calls: :class:`FanOutGetter` (``open``, ``take``, ``close``); ``on_pending`` is called by the reading
    thread when an event or the end is queued. Thread-safety: the queue is the only thing both threads touch; the
    counters are the reading thread's, read by others as snapshots.
    """

    def __init__(self, client: Any, consumer_arn: str, shard_id: str, start: Position, *, renew_s: float,
                 on_pending: Callable[[], None]) -> None:
        self.client = client
        self.consumer_arn = consumer_arn
        self.shard_id = shard_id
        self.start = start
        self.renew_s = renew_s
        self.what = f"subscription of consumer {consumer_arn} to shard {shard_id}"
        self._on_pending = on_pending
        self._queue: queue.Queue[object] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None
        self.initial_response = False
        self.events = 0

    def open(self) -> None:
        """Send the request and check its status (on the caller's thread), then start the reading thread. Raises
        a ``KinesisError`` for a refusal (another subscription holds the shard, access denied, no fan-out...)."""
        try:
            request = signed_request(self.client, self.consumer_arn, self.shard_id, starting_position(self.start))
            response = self.client._endpoint.http_session.send(request)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, self.what) from exc
        if response.status_code >= 300:
            raise _error_of(self.client, response, self.what)
        kind = str(response.headers.get("content-type", ""))
        if "eventstream" not in kind:
            _close(response)
            raise unsupported(self.client.meta.endpoint_url, f"{self.what}: a reply of type {kind!r}")
        self._response = response
        self._thread = threading.Thread(target=self._read, name=f"kinesis-subscription-{self.shard_id}",
                                        daemon=True)
        self._thread.start()

    def _read(self) -> None:
        """The reading thread: decode events until the renewal time, the shard's end, an error or ``close()``."""
        decoder = EventStreamDecoder(self.what)
        raw = self._response.raw
        deadline = time.monotonic() + self.renew_s
        outcome: object = _ENDED
        try:
            for chunk in _chunks(raw):  # ends when the server ends the subscription (after 5 minutes, at shard end)
                events = decoder.feed(chunk)
                self.initial_response = decoder.initial_response
                for event in events:  # what was read is handed over first: a short renewal never starves a shard
                    self.events += 1
                    if not self._put(event):
                        return
                    if event.shard_end:
                        return
                if self._stop.is_set() or time.monotonic() >= deadline:
                    break
        except KinesisError as exc:
            outcome = exc
        except Exception as exc:  # noqa: BLE001 - a lost connection: subscribe again
            if not self._stop.is_set():
                outcome = KinesisError(f"{self.what}: the connection was lost ({exc!r}); subscribing again",
                                       code=type(exc).__name__, retriable=True)
        finally:
            _close(self._response)
            if not self._stop.is_set():
                self._put(outcome)

    def _put(self, item: object) -> bool:
        """Queue ``item`` once the taker made room (blocks: backpressure, the connection is not read meanwhile);
        False when the subscription was closed first (the event is read again by the next subscription). Events
        read before the renewal time are all handed over: a renewal never starves a slow shard."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
            except queue.Full:
                continue
            self._on_pending()
            return True
        return False

    @property
    def pending(self) -> bool:
        """True when ``take`` has something (an event, the end or an error)."""
        return not self._queue.empty()

    def take(self) -> SubscriptionEvent | KinesisError | None:
        """The next event without blocking: a :class:`SubscriptionEvent`, the error that ended the subscription,
        ``None`` for nothing yet. Raises ``EOFError`` once the subscription ended without an error."""
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            return None
        if item is _ENDED:
            raise EOFError
        assert isinstance(item, (SubscriptionEvent, KinesisError))
        return item

    def close(self, timeout_s: float = 5.0) -> None:
        """End the subscription: stop the thread (its blocked read is cut) and drop what it queued. Idempotent."""
        self._stop.set()
        response = self._response
        if response is not None:
            _cut(response)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)


def _chunks(raw: Any) -> Iterator[bytes]:
    """The reply's bytes as they arrive: ``read1`` (urllib3 2) returns what one read of the socket brought; urllib3
    1.26 has no ``read1``, and its ``stream`` yields the chunks of a chunked reply as they come."""
    read1 = getattr(raw, "read1", None)
    if read1 is None:
        yield from raw.stream(_CHUNK, decode_content=False)
        return
    while chunk := read1(_CHUNK):
        yield chunk


def _cut(response: Any) -> None:
    """Shut the reply's socket down so that a read blocked on it returns (closing alone does not wake it)."""
    raw = getattr(response, "raw", None)
    conn = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _close(response: Any) -> None:
    raw = getattr(response, "raw", None)
    if raw is not None:
        try:
            raw.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass


class FanOutGetter(ShardGetter):
    """Reads one shard through an enhanced fan-out subscription of ``consumer_arn`` (see the module docstring).

    Who calls: one :class:`~kinesis_spout.kinesis.reader.BufferedShardReader` (``fetch``, ``prepare``, ``close``,
    ``pending``; it sets ``on_pending``). Not thread-safe beyond that: the reader's poll owns it; the subscription's
    thread only queues events and calls ``on_pending``. Counters: ``subscriptions`` (subscribe calls that
    succeeded), ``renewals`` (subscriptions that ended cleanly and were renewed), ``resubscribes`` (after an error).
    """

    pushed = True

    def __init__(self, client: Any, stream_name: str, shard_id: str, start: Position, consumer_arn: str, *,
                 renew_s: float = DEFAULT_RENEW_S, deaggregate: bool = False,
                 hash_range: HashKeyRange | None = None, end_probe_s: float | None = 10.0) -> None:
        super().__init__(client, stream_name, shard_id, start, deaggregate=deaggregate, hash_range=hash_range)
        self.consumer_arn = consumer_arn
        self.renew_s = renew_s
        # a caught-up subscription asks at most this often whether its shard is closed and read to its end (kinesis-
        # mock never sends ChildShards, so its subscriptions never end a closed shard); None: never
        self.end_probe_s = end_probe_s
        self._next_probe = time.monotonic() + (end_probe_s or 0.0)
        self.end_probes = 0
        self.on_pending: Callable[[], None] = lambda: None
        self._sub: Subscription | None = None
        self.subscriptions = 0
        self.renewals = 0
        self.resubscribes = 0
        self.initial_responses = 0  # subscriptions whose stream began with an initial response (real Kinesis)

    @property
    def pending(self) -> bool:
        """True when ``fetch`` has work: no subscription yet, or one with an event, an end or an error queued. Read
        by any thread (the reader's room check) as a snapshot."""
        sub = self._sub
        return not self.shard_end and (sub is None or sub.pending)

    def prepare(self) -> None:
        """Subscribe now (a ``LATEST`` start is pinned to when ``open()`` runs)."""
        if self._sub is None and not self.shard_end:
            self._subscribe()

    def _subscribe(self) -> Subscription:
        pos = self.position
        asked_at = datetime.now(timezone.utc) - LATEST_MARGIN
        sub = Subscription(self.client, self.consumer_arn, self.shard_id, pos, renew_s=self.renew_s,
                           on_pending=self._pending)
        sub.open()
        if pos.kind is Kind.LATEST:  # as polling does: a renewal starts where this one did, not at a later tip
            self.position = at_timestamp(asked_at)
        self._sub = sub
        self.subscriptions += 1
        log.debug("subscribed %s to %s at %s", self.consumer_arn, self.shard_id, pos.describe())
        return sub

    def _pending(self) -> None:
        self.on_pending()

    def fetch(self) -> FetchResult:
        """The next event as a ``FetchResult`` without blocking (empty when none is there yet); subscribes when
        needed. Raises the ``KinesisError`` that refused or ended a subscription (the next call subscribes again
        from ``position``)."""
        if self.shard_end:
            return FetchResult([], 0, True, 0)
        sub = self._sub if self._sub is not None else self._subscribe()
        try:
            item = sub.take()
        except EOFError:  # renewal time, or Kinesis ended it: subscribe again from the last position handed out
            self._drop()
            self.renewals += 1
            self._subscribe()
            return FetchResult([], None, False, 0)
        if item is None:
            return FetchResult([], None, False, 0)
        if isinstance(item, KinesisError):
            self._drop()
            self.resubscribes += 1
            raise item
        if sub.initial_response and self.initial_responses < self.subscriptions:
            self.initial_responses = self.subscriptions
        return self._event(item)

    def _event(self, event: SubscriptionEvent) -> FetchResult:
        raw = event.records
        records = self._records(raw)
        if raw:
            self.position = after(raw[-1]["SequenceNumber"])
        elif event.continuation is not None and self._before(int(event.continuation)):
            self.position = after(event.continuation)
        if event.shard_end or (not raw and event.millis_behind_latest == 0 and self._read_to_end()):
            self.shard_end = True
            self._drop()
        return FetchResult(records, event.millis_behind_latest, self.shard_end, len(raw))

    def _read_to_end(self) -> bool:
        """True when the shard is closed and nothing is left after ``position`` (GetRecords from there returns no
        record and no next iterator). Asked at most every ``end_probe_s``, only by a caught-up subscription."""
        if self.end_probe_s is None or time.monotonic() < self._next_probe:
            return False
        self._next_probe = time.monotonic() + self.end_probe_s
        self.end_probes += 1
        probe = ShardGetter(self.client, self.stream_name, self.shard_id, self.position, 1)
        try:
            result = probe.fetch()
        except KinesisError as exc:
            log.debug("probing whether %s ended failed (asked again later): %s", self.shard_id, exc)
            return False
        if result.shard_end and not result.fetched:
            log.info("shard %s is closed and its subscription read it to its end (no ChildShards came: found by "
                     "GetRecords)", self.shard_id)
            return True
        return False

    def _before(self, sequence: int) -> bool:
        """True when ``sequence`` lies beyond what ``position`` says was handed out."""
        key = self.position.key
        return self.position.kind is not Kind.AFTER or key is None or key.sequence < sequence

    def _drop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()

    def close(self) -> None:
        """End the subscription (the reader's ``close``). Idempotent."""
        self._drop()


class WaitingFanOut:
    """A :class:`FanOutGetter` read by one task that waits for its events: :meth:`subscribe` and :meth:`fetch`
    block where the getter's own calls return at once, and retriable errors (another subscription still holds the
    shard, a lost connection, throttling) are tried again after ``SUBSCRIBE_RETRY``'s delays (at least a second
    apart: Kinesis takes one SubscribeToShard a second per consumer and shard), up to ``max_retries`` in a row.

    Who calls: a Spark task reading its shard on an executor (``readMode=executors``). Not thread-safe: the task's
    thread owns it; the subscription's thread only sets the wake-up event (``on_pending``), which is cleared before
    each look at the queue, so an event queued between the look and the wait is never missed. ``events``: the events
    :meth:`fetch` returned.
    """

    def __init__(self, getter: FanOutGetter, max_retries: int) -> None:
        self.getter = getter
        self.events = 0
        self._wake = threading.Event()
        getter.on_pending = self._wake.set
        self._backoff = Backoff(replace(SUBSCRIBE_RETRY, max_attempts=max(max_retries, 0) + 1))
        self._handed_out = False

    def subscribe(self) -> float:
        """Subscribe now, waiting out retriable refusals; returns when (``time.monotonic()``) the subscription was
        accepted. Raises what retrying cannot fix, or the last error after ``max_retries`` retriable ones in a row."""
        while True:
            try:
                self.getter.prepare()
            except KinesisError as exc:
                time.sleep(self._delay(exc))
                continue
            self._backoff.reset()
            return time.monotonic()

    def fetch(self, deadline: float) -> FetchResult:
        """The next event (as :meth:`FanOutGetter.fetch`), waiting for it until ``deadline`` (``time.monotonic()``);
        a result with ``millis_behind_latest`` None and no record when none came in time. A retriable error after
        records were handed out ends the wait at the deadline rather than past it (the task keeps what it has): it
        returns once the deadline passed, never sooner, so a caller that reads until its deadline stops then
        instead of subscribing again at once."""
        while True:
            self._wake.clear()
            try:
                result = self.getter.fetch()
            except KinesisError as exc:
                pause = self._delay(exc)
                if self._handed_out and time.monotonic() + pause >= deadline:
                    log.info("%s: ending the read with what it holds", exc)
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    return FetchResult([], None, False, 0)
                time.sleep(pause)
                continue
            if result.fetched or result.shard_end or result.millis_behind_latest is not None:
                self._backoff.reset()
                self._handed_out = self._handed_out or bool(result.records)
                self.events += 1
                return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result
            self._wake.wait(remaining)

    def _delay(self, exc: KinesisError) -> float:
        """The pause before the next try after ``exc``; raises ``exc`` when it is not retriable or the retries
        ran out."""
        if not exc.retriable:
            raise exc
        pause = self._backoff.next_delay()
        if self._backoff.exhausted:
            raise exc
        log.info("%s; trying again in %.2f s", exc, pause)
        return pause

    def close(self) -> None:
        """End the subscription. Idempotent."""
        self.getter.close()
