"""``kinesis-spout consumers list|deregister --stream S``: a stream's enhanced fan-out consumers on kinesis-local,
and the refusals that name the fix."""

from __future__ import annotations

import pytest

from kinesis_spout.cli import main
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.consumers import ensure_consumer, list_consumers
from kinesis_spout.testing.kinesis import KinesisEndpoint


def test_consumers_are_listed_and_one_is_deregistered(kinesis_local: KinesisEndpoint,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    stream = kinesis_local.create_stream(shards=1)
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    billing = ensure_consumer(client, stream, "billing")
    where = ["--stream", stream, "--endpoint-url", kinesis_local.endpoint_url, "--region", kinesis_local.region]
    assert main(["consumers", "list", *where]) == 0
    out = capsys.readouterr().out
    assert f"stream {stream!r}: 1 of 20 enhanced fan-out consumers" in out
    assert "billing" in out and "ACTIVE" in out and billing.arn in out
    assert main(["consumers", "deregister", *where, "--name", "billing"]) == 0
    assert "deregistered consumer 'billing'" in capsys.readouterr().out
    assert [c.status for c in list_consumers(client, stream)] in ([], ["DELETING"])
    assert main(["consumers", "deregister", *where, "--name", "nobody"]) == 1
    assert "has no consumer 'nobody'" in capsys.readouterr().out


def test_deregister_without_a_name_and_an_endpoint_without_fan_out_are_errors(
        kinesalite: KinesisEndpoint, capsys: pytest.CaptureFixture[str]) -> None:
    stream = kinesalite.create_stream(shards=1)
    where = ["--stream", stream, "--endpoint-url", kinesalite.endpoint_url, "--region", kinesalite.region]
    assert main(["consumers", "deregister", *where]) == 1
    assert "consumers deregister needs --name" in capsys.readouterr().err
    assert main(["consumers", "list", *where]) == 1
    assert "does not support enhanced fan-out" in capsys.readouterr().err
