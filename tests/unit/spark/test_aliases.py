"""Option names of the AWS Scala connector: read under this source's names where they mean the same, refused with
what to use instead where they do not."""

from __future__ import annotations

import pytest

from kinesis_spout import ConfigError, InitialPosition
from kinesis_spout.spark.source.aliases import resolve_aliases
from kinesis_spout.spark.source.offsets import parse_source_options


def test_the_connector_options_that_mean_the_same_are_read_under_our_names() -> None:
    config, limits = parse_source_options({
        "kinesis.streamname": "orders", "appName": "a", "kinesis.region": "eu-west-1",
        "kinesis.endpointUrl": "http://127.0.0.1:4567", "kinesis.startingPosition": "EARLIEST",
        "kinesis.getRecords.numberOfRecordsPerFetch": "500", "kinesis.describeShardInterval": "500ms",
        "kinesis.consumerType": "GetRecords", "maxRecordsPerTrigger": "10"})
    assert (config.stream_name, config.region, config.endpoint_url) == ("orders", "eu-west-1", "http://127.0.0.1:4567")
    assert config.initial_position is InitialPosition.TRIM_HORIZON
    assert (config.max_records_per_call, config.shard_sync_interval_s, limits.max_records) == (500, 0.5, 10)


def test_a_starting_timestamp_and_durations_are_translated() -> None:
    config, _ = parse_source_options({"kinesis.streamName": "s", "appName": "a", "kinesis.describeShardInterval": "2m",
                                      "kinesis.startingPosition": "AT_TIMESTAMP 2026-11-22T10:00:00Z"})
    assert config.initial_position is InitialPosition.AT_TIMESTAMP
    assert config.initial_timestamp is not None and config.initial_timestamp.isoformat() == "2026-11-22T10:00:00+00:00"
    assert config.shard_sync_interval_s == 120.0
    assert resolve_aliases({"kinesis.startingPosition": "latest"}) == {"initialPosition": "LATEST"}


@pytest.mark.parametrize("option, value, message", [
    ("kinesis.maxFetchRecordsPerShard", "100", "maxRecordsPerTrigger limits the whole batch"),
    ("kinesis.metadataCommitterType", "HDFS", "ZooKeeper"),
    ("kinesis.awsSecretKey", "x", "option 'awsSecretAccessKey' is set without option 'awsAccessKeyId'"),
    ("kinesis.consumerType", "EnhancedFanOut", r"must be GetRecords \(polling\) or SubscribeToShard"),
    ("kinesis.startingPosition", "SOMEWHERE", "must be LATEST, TRIM_HORIZON, EARLIEST"),
    ("kinesis.describeShardInterval", "often", "must be a duration"),
])
def test_connector_options_with_another_meaning_are_refused_saying_what_to_use(option: str, value: str,
                                                                               message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options({"streamName": "s", "appName": "a", option: value})


def test_the_connector_credential_options_set_this_sources_credentials() -> None:
    config, _ = parse_source_options({
        "streamName": "s", "appName": "a", "kinesis.awsAccessKeyId": "AKIAEXAMPLEEXAMPLE00",
        "kinesis.awsSecretKey": "secret-value", "kinesis.stsRoleArn": "arn:aws:iam::123456789012:role/reader",
        "kinesis.stsSessionName": "etl-job", "kinesis.stsEndpointUrl": "https://sts.eu-west-1.amazonaws.com"})
    creds = config.credentials
    assert creds is not None
    assert (creds.access_key_id, creds.secret_access_key) == ("AKIAEXAMPLEEXAMPLE00", "secret-value")
    assert (creds.role_arn, creds.role_session_name, creds.sts_endpoint_url) == (
        "arn:aws:iam::123456789012:role/reader", "etl-job", "https://sts.eu-west-1.amazonaws.com")
    assert "secret-value" not in repr(config)


def test_an_alias_next_to_the_option_it_stands_for_is_refused() -> None:
    with pytest.raises(ConfigError, match="options 'kinesis.streamName' and 'streamName' both set streamName"):
        resolve_aliases({"streamName": "a", "kinesis.streamName": "b"})


def test_the_connector_fan_out_options_read_through_this_sources_fan_out_consumer() -> None:
    config, _ = parse_source_options({"streamName": "s", "appName": "a", "kinesis.consumerType": "SubscribeToShard",
                                      "kinesis.consumerName": "billing-efo"})
    assert (config.retrieval, config.consumer_name) == ("fanout", "billing-efo")
    config, _ = parse_source_options({"streamName": "s", "appName": "a", "kinesis.consumertype": "getrecords"})
    assert (config.retrieval, config.consumer_name) == ("polling", None)


def test_a_connector_consumer_name_without_fan_out_is_refused_naming_the_option_that_turns_it_on() -> None:
    with pytest.raises(ConfigError, match=r"option 'kinesis.consumerName' names an enhanced fan-out consumer, but "
                                          r"this read polls.*kinesis.consumerType.*SubscribeToShard.*retrieval"):
        parse_source_options({"streamName": "s", "appName": "a", "kinesis.consumerName": "billing-efo"})
    with pytest.raises(ConfigError, match="options 'kinesis.consumerType' and 'retrieval' both set retrieval"):
        parse_source_options({"streamName": "s", "appName": "a", "kinesis.consumerType": "SubscribeToShard",
                              "retrieval": "fanout"})
