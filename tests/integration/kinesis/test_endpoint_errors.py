"""Errors about where Kinesis is: a connection that fails names the endpoint, the setting and its environment
variable; a stream that is not found names the region and the endpoint that were asked."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_spout import KinesisError, KinesisSpout, SpoutConfig, StreamNotFoundError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.shards import list_shards
from kinesis_spout.testing.process import free_port


def test_a_refused_connection_names_the_endpoint_the_setting_and_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")  # credentials, so that the client gets as far as connecting
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(KinesisError) as caught:
        list_shards(make_client("us-east-1", url), "clicks")
    text = str(caught.value)
    assert f"cannot connect to Kinesis at {url}" in text
    assert "endpoint_url" in text and "endpointUrl" in text and "KINESIS_SPOUT_ENDPOINT_URL" in text
    assert caught.value.retriable  # a server that is starting may answer later


def test_a_missing_stream_names_the_region_and_the_endpoint_asked(kinesalite: Any, zookeeper: Any) -> None:
    with pytest.raises(StreamNotFoundError) as caught:
        list_shards(make_client("eu-west-1", kinesalite.endpoint_url), "no-such-stream")
    text = str(caught.value)
    assert "stream 'no-such-stream' not found" in text
    assert "region eu-west-1" in text and f"endpoint {kinesalite.endpoint_url}" in text
    config = SpoutConfig(stream_name="no-such-stream", app_name="a", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region)
    with pytest.raises(StreamNotFoundError, match=f"region {kinesalite.region} at endpoint {kinesalite.endpoint_url}"):
        with KinesisSpout(config):
            pass


def test_the_spark_source_load_check_names_the_region_and_the_endpoint(kinesalite: Any) -> None:
    from kinesis_spout.spark.source.datasource import check_stream_exists

    config = SpoutConfig(stream_name="no-such-stream", app_name="a", endpoint_url=kinesalite.endpoint_url,
                         region="eu-west-1")
    with pytest.raises(StreamNotFoundError, match=f"stream 'no-such-stream' does not exist in region eu-west-1 at "
                                                  f"endpoint {kinesalite.endpoint_url}"):
        check_stream_exists(config)


def test_a_spout_whose_endpoint_does_not_answer_says_so_at_open(zookeeper: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    url = f"http://127.0.0.1:{free_port()}"
    config = SpoutConfig(stream_name="clicks", app_name="a", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=url, region="us-east-1")
    with pytest.raises(KinesisError, match=f"cannot connect to Kinesis at {url}.*endpoint_url.*"
                                           f"KINESIS_SPOUT_ENDPOINT_URL"):
        with KinesisSpout(config):
            pass
