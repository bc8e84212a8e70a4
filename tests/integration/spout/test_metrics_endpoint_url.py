"""The metrics endpoint says where it is, at INFO, as a URL a person can open (not the wildcard address)."""

from __future__ import annotations

import logging
import urllib.request

import pytest

from kinesis_spout import KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.metrics import start_metrics_server
from kinesis_spout.testing.kinesis import KinesisEndpoint


@pytest.mark.parametrize("addr, host", [("0.0.0.0", "127.0.0.1"), ("127.0.0.1", "127.0.0.1"), ("::", "[::1]")])
def test_the_endpoint_logs_a_url_that_answers(kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture,
                                               addr: str, host: str) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout.metrics")
    stream = kinesalite.create_stream(shards=1)
    config = SpoutConfig(stream_name=stream, app_name="metrics-url", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        server = start_metrics_server(0, spout, addr=addr)
        try:
            url = f"http://{host}:{server.port}/metrics"
            assert server.url == url
            (line,) = [r.getMessage() for r in caplog.records
                       if r.levelno == logging.INFO and r.name.startswith("kinesis_spout.metrics")]
            assert line.startswith(f"Prometheus metrics at {url}"), line
            with urllib.request.urlopen(url, timeout=10) as reply:
                assert b"kinesis_spout_shard_owned" in reply.read()
        finally:
            server.close()
