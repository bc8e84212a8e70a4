"""Helpers shared by the integration tests of several areas: KPL aggregates made by aws-kinesis-agg (a producer
nobody here wrote) and the spout configuration the KPL tests read them with."""

from __future__ import annotations

from typing import Any

from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_spout import InitialPosition, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint


def aggregate(users: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    """(the aggregate's own partition key, its data), made by aws-kinesis-agg."""
    aggregator = RecordAggregator()
    for pk, data in users:
        assert aggregator.add_user_record(pk, data) is None
    pk, _, blob = aggregator.clear_and_get().get_contents()
    return pk, bytes(blob)


def make_config(endpoint: KinesisEndpoint, stream: str, **extra: Any) -> SpoutConfig:
    """A spout from TRIM_HORIZON of ``stream`` with app name "kpl", quick to poll an idle shard and checkpointing
    at every chance."""
    return SpoutConfig(stream_name=stream, app_name="kpl", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                       empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, **extra)
