"""Renewals of an enhanced fan-out subscription on kinesis-local: the subscription that follows one which delivered
records starts after the last of them, so nothing handed out comes again.

The getter is read here as its callers read it (the Spark driver's cursor, a task's ``WaitingFanOut``, the spout's
reader): ``fetch()`` again and again, a retriable refusal tried again later. Of those callers only the spout drops a
record delivered twice (its span tracker skips replays), so a renewal that starts too early is seen here, as a
record handed out twice, and not in the spout's tuples.

A renewal is made early by ``subscription_renewal_s`` at its least (0.5 s), below the second kinesis-local waits
between two events: every subscription hands over its first event, then ends and is renewed. kinesis-local refuses
the renewal ("another active subscription") for about two seconds; each refusal is tried again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.consumers import ensure_consumer
from kinesis_spout.kinesis.retrieval.fanout import FanOutGetter
from kinesis_spout.positions import LATEST, TRIM_HORIZON
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

from ..support import TcpCutter

#: ``subscription_renewal_s``'s least value (ReadingSettings): shorter than kinesis-local's second between events.
RENEW_S = 0.5


class Reader:
    """Reads a :class:`FanOutGetter` as its callers do: ``handed`` holds the data of each record handed out, in
    order, and ``last_renewals`` the getter's renewals when the last of them was (its subscription's number, less
    one: a subscription's events are all taken before its end is)."""

    def __init__(self, getter: FanOutGetter) -> None:
        self.getter = getter
        self.handed: list[str] = []
        self.last_renewals = -1  # renewals when the last record was handed out
        self.refusals = 0

    def step(self) -> None:
        try:
            result = self.getter.fetch()
        except KinesisError as exc:  # kinesis-local still holds the previous subscription: subscribe again later
            assert exc.retriable, exc
            self.refusals += 1
            return
        if result.records:
            self.handed += [r.data.decode() for r in result.records]
            self.last_renewals = self.getter.renewals

    def read_past_the_next_renewal(self, count: int, timeout_s: float = 60.0) -> bool:
        """Read until ``count`` records were handed out and the subscription after the one that delivered the last
        of them ended too: everything that subscription brought was handed out (it ends cleanly only after its
        first event, and ``fetch`` takes its events before its end). Stops as soon as more than ``count`` came."""

        def done() -> bool:
            self.step()
            if len(self.handed) > count:  # more than were put: a record came twice
                return True
            return len(self.handed) == count and self.getter.renewals >= self.last_renewals + 2

        return wait_until(done, timeout_s, interval_s=0.1)


@pytest.fixture
def renewing(kinesis_local: KinesisEndpoint) -> Iterator[tuple[str, Reader]]:
    stream = kinesis_local.create_stream(shards=1)
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    consumer = ensure_consumer(client, stream, "tests")
    shard = kinesis_local.shard_ids(stream)[0]
    getter = FanOutGetter(client, stream, shard, TRIM_HORIZON, consumer.arn, renew_s=RENEW_S, end_probe_s=None)
    try:
        yield stream, Reader(getter)
    finally:
        getter.close()


def test_a_renewal_after_records_were_delivered_resumes_after_the_last_one(
        kinesis_local: KinesisEndpoint, renewing: tuple[str, Reader]) -> None:
    """The first subscription delivers four records in one event; the records put meanwhile come with the renewal
    that follows, and the renewal after that brings nothing: no record twice, whether the renewal starts from the
    shard's beginning (where the first subscription began), at the first record of the last event, or after it."""
    stream, reader = renewing
    first = [f"first-{i}" for i in range(4)]
    kinesis_local.put(stream, [d.encode() for d in first])
    assert wait_until(lambda: reader.step() or len(reader.handed) >= 4, 30.0, interval_s=0.1), reader.handed
    second = [f"second-{i}" for i in range(3)]
    kinesis_local.put(stream, [d.encode() for d in second])  # read by a renewal
    assert reader.read_past_the_next_renewal(7), (reader.handed, reader.getter.renewals)
    assert reader.handed == first + second
    assert reader.getter.renewals >= 2



def test_a_latest_subscription_lost_before_its_first_event_resubscribes_from_its_own_start(
        kinesis_local: KinesisEndpoint) -> None:
    """A subscription at ``LATEST`` whose connection is lost before any event (every event of kinesis-local, even on
    a quiet shard, names a continuation sequence number, so only such a subscription leaves the position at
    ``LATEST``): the records put before the next subscription come with it, which starts where the lost one did
    (its time), not at a later tip."""
    stream = kinesis_local.create_stream(shards=1)
    with TcpCutter(kinesis_local.endpoint_url) as cutter:
        client = make_client(kinesis_local.region, cutter.endpoint_url)
        consumer = ensure_consumer(client, stream, "tests")
        getter = FanOutGetter(client, stream, kinesis_local.shard_ids(stream)[0], LATEST, consumer.arn,
                              end_probe_s=None)
        reader = Reader(getter)
        try:
            getter.prepare()  # subscribed at LATEST, as a reader's open() does; its first event is a second away
            assert cutter.cut() >= 1
            put = [f"meanwhile-{i}" for i in range(3)]
            kinesis_local.put(stream, [d.encode() for d in put])  # before the getter subscribes again
            assert wait_until(lambda: reader.step() or len(reader.handed) >= 3, 30.0, interval_s=0.1), reader.handed
            assert reader.handed == put
            assert getter.subscriptions >= 2
        finally:
            getter.close()
