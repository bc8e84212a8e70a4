"""One SubscribeToShard call: the request botocore builds and signs, and the thread that reads its streamed reply.

:func:`signed_request` lets botocore build and sign the request (its endpoint rules, credentials and signer): a
``before-send`` hook takes the signed request before botocore sends it. :class:`Subscription` sends it on botocore's
own HTTP session with a streamed reply; a thread of its own reads the reply into an
:class:`~kinesis_spout.kinesis.retrieval.eventstream.EventStreamDecoder` and hands the events over through a queue of
one:
while nobody takes them, it stops reading the connection (TCP then holds the server back), so a full buffer loses
nothing. The subscription ends after ``renew_s`` (Kinesis ends it after 5 minutes anyway), at the shard's end, on a
stream error or when the connection is lost.

Who calls: :class:`~kinesis_spout.kinesis.retrieval.fanout.FanOutGetter`, which subscribes again when a subscription
ends.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Any, Callable, Iterator

from botocore.endpoint import convert_to_response_dict
from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.botocore_errors import translate
from kinesis_spout.kinesis.retrieval.consumers import unsupported
from kinesis_spout.kinesis.retrieval.eventstream import EventStreamDecoder, SubscriptionEvent, stream_error
from kinesis_spout.positions import Position, iterator_args

__all__ = ["Subscription", "signed_request", "starting_position"]

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
