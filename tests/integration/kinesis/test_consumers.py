"""Enhanced fan-out consumers on kinesis-local: registered once and found afterwards, ACTIVE before use, listed and
deregistered; an endpoint without fan-out (kinesalite) is refused with the fix."""

from __future__ import annotations

import pytest

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.consumers import deregister_consumer, ensure_consumer, list_consumers
from kinesis_spout.testing.kinesis import KinesisEndpoint


def test_a_consumer_is_registered_once_then_found_and_active(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    first = ensure_consumer(client, stream, "billing", timeout_s=15)
    again = ensure_consumer(client, stream, "billing", timeout_s=15)
    assert first.status == again.status == "ACTIVE"
    assert again.arn == first.arn  # found, not registered anew
    assert [c.name for c in list_consumers(client, stream)] == ["billing"]
    assert deregister_consumer(client, stream, "billing")
    assert not deregister_consumer(client, stream, "nobody")


def test_an_endpoint_without_fan_out_is_refused_naming_the_fix(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    client = make_client(kinesalite.region, kinesalite.endpoint_url)
    with pytest.raises(KinesisError, match="does not support enhanced fan-out.*retrieval='polling'") as info:
        ensure_consumer(client, stream, "billing", timeout_s=5)
    assert not info.value.retriable


def test_the_consumer_limit_is_named_with_what_to_do(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    arn = client.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    for group in range(4):  # Kinesis lets 5 consumers be CREATING at once
        names = [f"other-{group}-{i}" for i in range(5)]
        for name in names:
            client.register_stream_consumer(StreamARN=arn, ConsumerName=name)
        for name in names:
            ensure_consumer(client, stream, name, timeout_s=15)
    with pytest.raises(KinesisError, match="has its 20 consumers already.*deregister one.*retrieval='polling'"):
        ensure_consumer(client, stream, "billing", timeout_s=15)


def test_a_consumer_being_deleted_is_named_with_what_to_do(kinesis_local: KinesisEndpoint) -> None:
    stream = kinesis_local.create_stream(shards=1)
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    ensure_consumer(client, stream, "billing", timeout_s=15)
    deregister_consumer(client, stream, "billing")
    with pytest.raises(KinesisError, match="being deleted.*choose another consumer_name"):
        ensure_consumer(client, stream, "billing", timeout_s=15)
