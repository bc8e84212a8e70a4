"""Enhanced fan-out stream consumers: register one (or find it), wait until it is ACTIVE, list and deregister them.

A registered consumer gets its own 2 MiB/s per shard pushed through SubscribeToShard. A stream holds at most 20
consumers; registration takes a few seconds on Kinesis (well under one on kinesis-local).

Who calls: the spout's ``open()`` and the Spark source (through :func:`ensure_consumer`) and the
``kinesis-spout consumers`` command. Every function does its I/O on the caller's thread and keeps no state.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.botocore_errors import translate
from kinesis_spout.retry import Backoff, RetryPolicy

__all__ = ["CONSUMER_LIMIT", "Consumer", "deregister_consumer", "ensure_consumer", "list_consumers", "stream_arn"]

#: Consumers a stream may have at once (a Kinesis quota).
CONSUMER_LIMIT = 20

_UNSUPPORTED_CODES = frozenset({"UnknownOperationException", "UnknownOperation", "NotImplemented",
                                "InvalidAction"})


class Consumer(NamedTuple):
    """A registered stream consumer as Kinesis describes it."""

    name: str
    arn: str
    status: str

    @classmethod
    def of(cls, described: dict[str, Any]) -> "Consumer":
        """The consumer a reply of Kinesis describes (``ConsumerName``, ``ConsumerARN``, ``ConsumerStatus``)."""
        return cls(str(described["ConsumerName"]), str(described["ConsumerARN"]), str(described["ConsumerStatus"]))


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def unsupported(endpoint: str | None, what: str) -> KinesisError:
    """The error for an endpoint that does not offer enhanced fan-out."""
    return KinesisError(f"{what}: the Kinesis endpoint {endpoint or '(default)'} does not support enhanced fan-out "
                        f"(RegisterStreamConsumer/SubscribeToShard); read with retrieval='polling' (option "
                        f"retrieval=polling), or point endpoint_url at Kinesis or kinesis-local",
                        code="Unsupported", retriable=False)


def _fail(client: Any, exc: ClientError | BotoCoreError, what: str) -> KinesisError:
    if isinstance(exc, ClientError):
        code = _code(exc)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in _UNSUPPORTED_CODES or status in (404, 501):
            return unsupported(client.meta.endpoint_url, what)
        if code in ("AccessDeniedException", "AccessDenied"):
            return KinesisError(f"{what}: access denied; the credentials need the IAM permissions "
                                f"kinesis:RegisterStreamConsumer, kinesis:DescribeStreamConsumer and "
                                f"kinesis:SubscribeToShard for enhanced fan-out: grant them, or read with "
                                f"retrieval='polling'", code=code, retriable=False)
    return translate(exc, what)


def stream_arn(client: Any, stream_name: str) -> str:
    """The stream's ARN (DescribeStreamSummary)."""
    try:
        summary = client.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
    except (ClientError, BotoCoreError) as exc:
        raise _fail(client, exc, f"describing stream {stream_name!r}") from exc
    return str(summary["StreamARN"])


def describe_consumer(client: Any, arn: str, name: str) -> Consumer | None:
    """The consumer ``name`` of the stream ``arn``, or None when there is none."""
    try:
        found = client.describe_stream_consumer(StreamARN=arn, ConsumerName=name)["ConsumerDescription"]
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return None
        raise _fail(client, exc, f"describing stream consumer {name!r}") from exc
    except BotoCoreError as exc:
        raise _fail(client, exc, f"describing stream consumer {name!r}") from exc
    return Consumer.of(found)


def ensure_consumer(client: Any, stream_name: str, name: str, *, timeout_s: float = 120.0, poll_s: float = 0.1,
                    sleep: Callable[[float], object] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> Consumer:
    """The ACTIVE consumer ``name`` of ``stream_name``: registered when missing (or found when it exists), then
    waited for until ACTIVE (at most ``timeout_s``, looking every ``poll_s``; registrations throttled by Kinesis
    are tried again every ``poll_s``, at least 0.5 s). Raises a ``KinesisError`` naming the fix when the stream's
    consumer limit is reached, the consumer is being deleted, the endpoint has no fan-out or the wait times out.
    ``sleep`` and ``clock`` are injectable for tests."""
    if not timeout_s > 0 or not 0 <= poll_s < math.inf:
        raise ValueError(f"ensure_consumer: timeout_s must be > 0 and poll_s >= 0 seconds, got timeout_s="
                         f"{timeout_s!r} and poll_s={poll_s!r}")
    arn = stream_arn(client, stream_name)
    what = f"registering stream consumer {name!r} of stream {stream_name!r} (retrieval='fanout')"
    # one deadline for the registration and the wait, from now; a look may start up to the deadline
    looks = Backoff(RetryPolicy(initial_s=poll_s, multiplier=1.0, max_s=poll_s, deadline_s=timeout_s), clock=clock,
                    sleep=sleep)
    looks.start()
    consumer = describe_consumer(client, arn, name)
    while consumer is None:
        try:
            reply = client.register_stream_consumer(StreamARN=arn, ConsumerName=name)["Consumer"]
            consumer = Consumer.of(reply)
        except ClientError as exc:
            code = _code(exc)
            if code == "ResourceInUseException":  # registered meanwhile by another worker of the app
                consumer = describe_consumer(client, arn, name)
                if consumer is None and looks.expired:
                    raise _fail(client, exc, what) from exc
                continue
            if code != "LimitExceededException":
                raise _fail(client, exc, what) from exc
            # the stream's 20 consumers, or too many registrations at once (5 may be CREATING): only the first
            # is for the user to fix
            if len(list_consumers(client, stream_name)) >= CONSUMER_LIMIT:
                raise KinesisError(
                    f"{what}: the stream has its {CONSUMER_LIMIT} consumers already (a Kinesis quota); deregister one "
                    f"you no longer use (kinesis-spout consumers list / deregister --stream {stream_name}), share "
                    f"one consumer_name between apps reading the same records, or read with retrieval='polling'",
                    code=code, retriable=False) from exc
            if looks.expired:
                raise _fail(client, exc, what) from exc
            looks.wait(max(looks.next_delay(), 0.5))
        except BotoCoreError as exc:
            raise _fail(client, exc, what) from exc
    while True:
        if consumer is not None:
            if consumer.status == "ACTIVE":
                return consumer
            if consumer.status == "DELETING":
                raise KinesisError(
                    f"{what}: the consumer is being deleted (status DELETING); wait until the deregistration ends "
                    f"and open again (it is then registered anew), or choose another consumer_name",
                    code="ResourceInUseException", retriable=True)
        if looks.expired:
            raise KinesisError(f"{what}: the consumer is not ACTIVE after {timeout_s:.0f} s (status "
                               f"{consumer.status if consumer else 'missing'}); check it with kinesis-spout consumers "
                               f"list --stream {stream_name}", code="Timeout", retriable=True)
        looks.wait(looks.next_delay())
        consumer = describe_consumer(client, arn, name)


def list_consumers(client: Any, stream_name: str) -> list[Consumer]:
    """Every consumer registered on the stream (ListStreamConsumers, all pages)."""
    arn = stream_arn(client, stream_name)
    out: list[Consumer] = []
    kwargs: dict[str, Any] = {"StreamARN": arn}
    while True:
        try:
            page = client.list_stream_consumers(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise _fail(client, exc, f"listing the consumers of stream {stream_name!r}") from exc
        out.extend(map(Consumer.of, page.get("Consumers") or ()))
        token = page.get("NextToken")
        if not token:
            return out
        kwargs = {"StreamARN": arn, "NextToken": token}


def deregister_consumer(client: Any, stream_name: str, name: str) -> bool:
    """Deregister the consumer ``name`` of the stream; False when there was none."""
    arn = stream_arn(client, stream_name)
    try:
        client.deregister_stream_consumer(StreamARN=arn, ConsumerName=name)
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return False
        raise _fail(client, exc, f"deregistering stream consumer {name!r} of {stream_name!r}") from exc
    except BotoCoreError as exc:
        raise _fail(client, exc, f"deregistering stream consumer {name!r} of {stream_name!r}") from exc
    return True
