"""Decoding a SubscribeToShard reply: the ``application/vnd.amazon.eventstream`` messages of an enhanced fan-out
subscription, as :class:`SubscriptionEvent` values.

PURE apart from botocore's event-stream framing (:class:`botocore.eventstream.EventStreamBuffer`): bytes go in as
they arrive from the connection, events come out. Real Kinesis sends an ``initial-response`` event first and then
``SubscribeToShardEvent`` messages; kinesis-mock (kinesis-local, LocalStack) leaves the initial response out, which
is why botocore's own ``subscribe_to_shard`` refuses its streams. :class:`EventStreamDecoder` accepts both shapes.
An ``exception`` or ``error`` message becomes a :class:`~kinesis_spout.errors.KinesisError` naming the problem.

Who calls: :class:`~kinesis_spout.kinesis.retrieval.fanout.Subscription` (its reading thread owns one decoder).
"""

from __future__ import annotations

import binascii
import json
from datetime import datetime, timezone
from typing import Any, NamedTuple

from botocore.eventstream import EventStreamBuffer, EventStreamMessage

from kinesis_spout.errors import KinesisError, ThrottledError

__all__ = ["EVENT_TYPE", "INITIAL_RESPONSE", "EventStreamDecoder", "SubscriptionEvent", "parse_event",
           "stream_error"]

#: The ``:event-type`` of a message that carries records.
EVENT_TYPE = "SubscribeToShardEvent"
#: The ``:event-type`` of real Kinesis's first message (an empty JSON object).
INITIAL_RESPONSE = "initial-response"

_UTC = timezone.utc

#: Exceptions a subscription may send in its stream that pass with time (a retry subscribes again).
RETRIABLE_STREAM_CODES = frozenset({
    "ResourceInUseException", "InternalFailureException", "InternalFailure", "KMSThrottlingException",
    "ServiceUnavailableException",
})
_THROTTLE_CODES = frozenset({"LimitExceededException", "KMSThrottlingException", "ThrottlingException"})


class SubscriptionEvent(NamedTuple):
    """One ``SubscribeToShardEvent``. ``records`` are dicts as GetRecords replies hold them (``Data`` as bytes,
    ``ApproximateArrivalTimestamp`` as an aware datetime). ``continuation`` is the ``ContinuationSequenceNumber``
    (None at the shard's end); ``child_shards`` the ``ChildShards`` (a list at the shard's end, else None)."""

    records: list[dict[str, Any]]
    continuation: str | None
    millis_behind_latest: int | None
    child_shards: list[dict[str, Any]] | None

    @property
    def shard_end(self) -> bool:
        """True for the last event of a closed shard: no continuation, and its children named (maybe none)."""
        return self.continuation is None and self.child_shards is not None


def parse_event(payload: bytes) -> SubscriptionEvent:
    """A ``SubscribeToShardEvent``'s JSON payload as a :class:`SubscriptionEvent`. Raises ``ValueError`` (or
    ``KeyError``/``TypeError``) for a payload that is not such an event."""
    doc = json.loads(payload)
    if not isinstance(doc, dict):
        raise ValueError(f"a SubscribeToShardEvent is a JSON object, got {type(doc).__name__}")
    records = doc.get("Records") or []
    for r in records:
        r["Data"] = binascii.a2b_base64(r["Data"])
        arrived = r.get("ApproximateArrivalTimestamp")
        if isinstance(arrived, (int, float)):
            r["ApproximateArrivalTimestamp"] = datetime.fromtimestamp(arrived, _UTC)
        for name in [k for k, v in r.items() if v is None]:
            del r[name]
    continuation = doc.get("ContinuationSequenceNumber")
    behind = doc.get("MillisBehindLatest")
    children = doc.get("ChildShards")
    return SubscriptionEvent(records, str(continuation) if continuation is not None else None,
                             int(behind) if behind is not None else None,
                             list(children) if children is not None else None)


def stream_error(code: str, message: str, what: str) -> KinesisError:
    """The error for an ``exception``/``error`` message of a subscription's stream (``code`` its type): retriable
    for what passes with time (another subscription still holds the shard, throttling, server trouble)."""
    if code == "ResourceInUseException":
        return KinesisError(
            f"{what}: another subscription of this consumer still reads the shard ({message}); usually the shard's "
            f"previous owner, whose subscription ends within the renewal period, or on Spark the previous batch's "
            f"task (Kinesis refuses a new subscription for about 5 s after the last) or a speculative copy of the "
            f"task: subscribing again with backoff",
            code=code, retriable=True)
    if code == "ResourceNotFoundException":
        return KinesisError(
            f"{what}: the consumer or the shard does not exist ({message}); if the consumer was deregistered while "
            f"the app read (kinesis-spout consumers deregister), open the spout again, or restart the Spark query, "
            f"to register it anew",
            code=code, retriable=False)
    if code in _THROTTLE_CODES:
        return ThrottledError(f"{what}: throttled ({code}): {message}", code=code)
    if code in ("AccessDeniedException", "AccessDenied"):
        return KinesisError(
            f"{what}: access denied ({message}); the credentials need the IAM permission kinesis:SubscribeToShard on "
            f"the consumer's ARN (and kinesis:DescribeStreamConsumer, kinesis:RegisterStreamConsumer on the "
            f"stream): grant them, or read with retrieval='polling'", code=code, retriable=False)
    return KinesisError(f"{what}: {message} ({code})", code=code, retriable=code in RETRIABLE_STREAM_CODES)


class EventStreamDecoder:
    """Turns the bytes of one subscription's reply into events, with or without a leading ``initial-response``.

    ``feed(data)`` returns the complete events of the bytes seen so far (a message split across reads is kept until
    its end arrives) and raises the stream's error message as a ``KinesisError``. ``initial_response`` is True once
    an initial response was seen. Not thread-safe: one reading thread owns it.
    """

    def __init__(self, what: str = "subscription") -> None:
        self.what = what
        self._buffer = EventStreamBuffer()
        self.initial_response = False
        self.events = 0

    def feed(self, data: bytes) -> list[SubscriptionEvent]:
        """The events completed by ``data``; raises the first error message met (events before it are lost with
        the stream: the caller subscribes again from the last position it delivered)."""
        self._buffer.add_data(data)
        out: list[SubscriptionEvent] = []
        for message in self._buffer:
            event = self._event(message)
            if event is not None:
                out.append(event)
        return out

    def _event(self, message: EventStreamMessage) -> SubscriptionEvent | None:
        headers = message.headers
        kind = headers.get(":message-type")
        if kind == "event":
            event_type = headers.get(":event-type")
            if event_type == INITIAL_RESPONSE:
                self.initial_response = True
                return None
            if event_type != EVENT_TYPE:
                return None  # an event type added later: nothing of ours
            self.events += 1
            try:
                return parse_event(message.payload)
            except (ValueError, KeyError, TypeError) as exc:
                raise KinesisError(f"{self.what}: a SubscribeToShardEvent that does not decode ({exc!r})",
                                   code="MalformedEvent", retriable=True) from exc
        if kind == "exception":
            code = str(headers.get(":exception-type", "UnknownException"))
            raise stream_error(code, _message_of(message.payload), self.what)
        if kind == "error":
            code = str(headers.get(":error-code", "UnknownError"))
            raise stream_error(code, str(headers.get(":error-message", "")), self.what)
        raise KinesisError(f"{self.what}: an event-stream message of unknown type {kind!r}", code="MalformedEvent",
                           retriable=True)


def _message_of(payload: bytes) -> str:
    try:
        doc = json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", "replace")[:300]
    if isinstance(doc, dict):
        return str(doc.get("message") or doc.get("Message") or doc)[:300]
    return str(doc)[:300]
