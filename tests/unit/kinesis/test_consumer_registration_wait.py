"""When ensure_consumer stops waiting, without a server: a stand-in for the boto3 client answers the fan-out calls
(as kinesis-local does, with a consumer that stays CREATING, or registrations refused for a while), and the clock
and sleep are the test's."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.retrieval.consumers import ensure_consumer

ARN = "arn:aws:kinesis:eu-west-1:000000000000:stream/orders"


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": 400}},
                       operation)


class FakeFanOut:
    """Fan-out calls of one stream: registrations refused with LimitExceededException ``refusals`` times, then a
    consumer that stays ``status``; ``looks`` records the clock at each DescribeStreamConsumer."""

    class meta:  # noqa: N801 - as botocore names it
        endpoint_url = "http://localhost:4567"

    def __init__(self, t: FakeTime, *, refusals: int = 0, status: str = "CREATING") -> None:
        self.t = t
        self.refusals = refusals
        self.status = status
        self.registered = False
        self.looks: list[float] = []
        self.registrations: list[float] = []

    def describe_stream_summary(self, StreamName: str) -> dict[str, Any]:  # noqa: N803
        return {"StreamDescriptionSummary": {"StreamARN": ARN}}

    def describe_stream_consumer(self, StreamARN: str, ConsumerName: str) -> dict[str, Any]:  # noqa: N803
        self.looks.append(self.t.now)
        if not self.registered:
            raise _error("ResourceNotFoundException", "DescribeStreamConsumer")
        return {"ConsumerDescription": self._consumer(ConsumerName)}

    def register_stream_consumer(self, StreamARN: str, ConsumerName: str) -> dict[str, Any]:  # noqa: N803
        self.registrations.append(self.t.now)
        if self.refusals:
            self.refusals -= 1
            raise _error("LimitExceededException", "RegisterStreamConsumer")
        self.registered = True
        return {"Consumer": self._consumer(ConsumerName)}

    def list_stream_consumers(self, StreamARN: str) -> dict[str, Any]:  # noqa: N803
        return {"Consumers": []}

    def _consumer(self, name: str) -> dict[str, str]:
        return {"ConsumerName": name, "ConsumerARN": f"{ARN}/consumer/{name}:1", "ConsumerStatus": self.status}


def test_the_wait_for_active_looks_every_poll_up_to_the_timeout_and_then_names_the_status() -> None:
    t = FakeTime()
    client = FakeFanOut(t)
    with pytest.raises(KinesisError, match=r"the consumer is not ACTIVE after 1 s \(status CREATING\); check it "
                                           r"with kinesis-spout consumers list --stream orders") as raised:
        ensure_consumer(client, "orders", "billing", timeout_s=1.0, poll_s=0.25, sleep=t.sleep, clock=t.clock)
    assert raised.value.code == "Timeout" and raised.value.retriable
    assert t.sleeps == [0.25] * 4, "a look may start up to the deadline itself"
    assert client.looks == [0.0, 0.25, 0.5, 0.75, 1.0], "the first look, then one after each pause"


def test_a_consumer_active_at_a_look_is_returned_at_once() -> None:
    t = FakeTime()
    client = FakeFanOut(t, status="ACTIVE")
    consumer = ensure_consumer(client, "orders", "billing", timeout_s=1.0, sleep=t.sleep, clock=t.clock)
    assert (consumer.name, consumer.status) == ("billing", "ACTIVE") and t.sleeps == []


def test_throttled_registrations_are_tried_again_every_half_second_at_least_within_the_same_deadline() -> None:
    t = FakeTime()
    client = FakeFanOut(t, refusals=2, status="ACTIVE")
    assert ensure_consumer(client, "orders", "billing", timeout_s=5.0, poll_s=0.1, sleep=t.sleep,
                           clock=t.clock).status == "ACTIVE"
    assert client.registrations == [0.0, 0.5, 1.0] and t.sleeps == [0.5, 0.5]
    t = FakeTime()
    refused = FakeFanOut(t, refusals=100)
    with pytest.raises(KinesisError, match="registering stream consumer 'billing' of stream 'orders'"):
        ensure_consumer(refused, "orders", "billing", timeout_s=2.0, poll_s=0.1, sleep=t.sleep, clock=t.clock)
    assert refused.registrations == [0.0, 0.5, 1.0, 1.5, 2.0], "refused until the deadline has passed"


def test_bad_waits_are_refused_naming_them() -> None:
    t = FakeTime()
    with pytest.raises(ValueError, match=r"ensure_consumer: timeout_s must be > 0 and poll_s >= 0 seconds, got "
                                         r"timeout_s=0 and poll_s=0.1"):
        ensure_consumer(FakeFanOut(t), "orders", "billing", timeout_s=0, sleep=t.sleep, clock=t.clock)
    with pytest.raises(ValueError, match="poll_s=-1"):
        ensure_consumer(FakeFanOut(t), "orders", "billing", poll_s=-1, sleep=t.sleep, clock=t.clock)
