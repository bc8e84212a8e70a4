"""One Kinesis client per connection for every task of a Spark Python process, the source's and the sink's alike:
the same configuration gets the same client; another endpoint or another read time-out gets its own."""

from __future__ import annotations

from kinesis_spout.config import KinesisSettings
from kinesis_spout.spark.shared.clients import WORKER_CLIENTS, ClientCache
from kinesis_spout.spark.source import clients as source_clients


def config(endpoint: str) -> KinesisSettings:
    return KinesisSettings(endpoint_url=endpoint, region="us-east-1")


def test_the_same_connection_gets_the_same_client_and_another_its_own() -> None:
    cache = ClientCache()
    first = cache.kinesis(config("http://127.0.0.1:9"))
    assert cache.kinesis(config("http://127.0.0.1:9")) is first
    assert cache.kinesis(config("http://127.0.0.1:10")) is not first
    quick = cache.kinesis(config("http://127.0.0.1:9"), read_timeout_s=5.0)
    assert quick is not first and quick.meta.config.read_timeout == 5.0
    assert first.meta.config.read_timeout == 30.0


def test_the_source_and_the_sink_share_the_process_cache() -> None:
    assert source_clients.WORKER_CLIENTS is WORKER_CLIENTS
