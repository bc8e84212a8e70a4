"""The grouped configuration keeps every spelling it had: each flat keyword, each default, each string option and
each connector alias lands in the same group field, and the flat and nested forms build equal configs.

The tables below are written out by hand on purpose (not derived from the code): they are the old spellings.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import socket
from datetime import datetime, timezone
from typing import Any

import pytest

from kinesis_spout import AwsCredentials, ConfigError, InitialPosition, JsonScheme, RawScheme, RetryBackoff, SpoutConfig
from kinesis_spout.config import (
    FLAT_FIELDS,
    OPTION_NAMES,
    DeadLetterSettings,
    FlatSettings,
    KinesisSettings,
    MetricsSettings,
    ReadingSettings,
    TrackingSettings,
    WorkerSettings,
    ZooKeeperSettings,
)
from kinesis_spout.deadletters import LocalDeadLetters
from kinesis_spout.spark.source.aliases import ALIASES, resolve_aliases

GROUPS: dict[str, type[Any]] = {"kinesis": KinesisSettings, "reading": ReadingSettings, "tracking": TrackingSettings,
                                "zk": ZooKeeperSettings, "dead_letters": DeadLetterSettings,
                                "metrics": MetricsSettings, "worker": WorkerSettings}
RAW = RawScheme()
JSON = JsonScheme()
ROLE = "arn:aws:iam::123456789012:role/reader"

#: flat keyword -> (group, field, the default SpoutConfig had before its settings were grouped)
OLD_FLAT: dict[str, tuple[str, str, Any]] = {
    "zookeeper": ("zk", "hosts", "127.0.0.1:2181"),
    "zookeeper_prefix": ("zk", "prefix", "/kinesis_spout"),
    "zookeeper_session_timeout_s": ("zk", "session_timeout_s", 10.0),
    "zookeeper_deadline_s": ("zk", "deadline_s", 60.0),
    "zookeeper_auth": ("zk", "auth", None),
    "zookeeper_world_readable": ("zk", "world_readable", True),
    "zookeeper_tls": ("zk", "tls", False),
    "zookeeper_tls_ca_file": ("zk", "tls_ca_file", None),
    "zookeeper_tls_cert_file": ("zk", "tls_cert_file", None),
    "zookeeper_tls_key_file": ("zk", "tls_key_file", None),
    "region": ("kinesis", "region", None),
    "endpoint_url": ("kinesis", "endpoint_url", None),
    "credentials": ("kinesis", "credentials", None),
    "initial_position": ("reading", "initial_position", InitialPosition.LATEST),
    "initial_timestamp": ("reading", "initial_timestamp", None),
    "max_records_per_call": ("reading", "max_records_per_call", 10_000),
    "empty_record_backoff_s": ("reading", "empty_record_backoff_s", 1.0),
    "max_empty_record_backoff_s": ("reading", "max_empty_record_backoff_s", 2.0),
    "shard_sync_interval_s": ("reading", "shard_sync_interval_s", 10.0),
    "checkpoint_interval_s": ("tracking", "checkpoint_interval_s", 1.0),
    "retry_limit": ("tracking", "retry_limit", 3),
    "retry_backoff": ("tracking", "retry_backoff", RetryBackoff(initial_s=0.1, multiplier=2.0, max_s=10.0)),
    "message_timeout_s": ("tracking", "message_timeout_s", 30.0),
    "max_inflight_records": ("tracking", "max_inflight_records", 10_000),
    "max_inflight_bytes": ("tracking", "max_inflight_bytes", 64 << 20),
    "prefetch_records": ("reading", "prefetch_records", 20_000),
    "prefetch_bytes": ("reading", "prefetch_bytes", 32 << 20),
    "reader_threads": ("reading", "reader_threads", 8),
    "reliable": ("tracking", "reliable", True),
    "deaggregate": ("reading", "deaggregate", True),
    "drop_foreign_user_records": ("reading", "drop_foreign_user_records", True),
    "scheme": ("reading", "scheme", RawScheme),  # a fresh RawScheme(): compared by type
    "dead_letter": ("dead_letters", "target", LocalDeadLetters),  # whole letters in a local file (was: the log)
    "dead_letter_deadline_s": ("dead_letters", "deadline_s", 60.0),
    "metrics_port": ("metrics", "port", None),
    "task_index": ("worker", "task_index", 0),
    "task_count": ("worker", "task_count", 1),
    # changed on purpose: leases where the checkpoints are in ZooKeeper (WorkerSettings.mode), static otherwise
    "coordination": ("worker", "coordination", "auto"),
    "worker_id": ("worker", "worker_id", f"{socket.gethostname()}:{os.getpid()}"),
    # added with the dead-letter storm rules (new keywords, appended)
    "max_dead_letters_in_a_row": ("dead_letters", "max_in_a_row", 100),
    "max_dead_letter_ratio": ("dead_letters", "max_ratio", 0.5),
    "dead_letter_window": ("dead_letters", "window", 1000),
    "min_dead_letters_in_window": ("dead_letters", "min_in_window", 100),
    "retrieval": ("reading", "retrieval", "polling"),
    "consumer_name": ("reading", "consumer_name", None),
    "subscription_renewal_s": ("reading", "subscription_renewal_s", 300.0),
    "lease_settle_s": ("worker", "lease_settle_s", 2.0),
}
#: the string options of the storm rules: named, but parsed by config/options.py only once it knows their types
STORM_OPTIONS = {"maxDeadLettersInARow", "maxDeadLetterRatio", "deadLetterWindow", "minDeadLettersInWindow"}


def samples(tmp_path) -> dict[str, Any]:
    """A value other than the default for every flat keyword, all valid together."""
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    return {
        "zookeeper": "zk1:2181,zk2:2181", "zookeeper_prefix": "/apps", "zookeeper_session_timeout_s": 12.5,
        "zookeeper_deadline_s": 30.0, "zookeeper_auth": "spout:pa55word", "zookeeper_world_readable": False,
        "zookeeper_tls": True, "zookeeper_tls_ca_file": str(pem), "zookeeper_tls_cert_file": str(pem),
        "zookeeper_tls_key_file": str(pem), "region": "eu-west-1", "endpoint_url": "http://127.0.0.1:4567",
        "credentials": AwsCredentials(profile="etl"), "initial_position": InitialPosition.AT_TIMESTAMP,
        "initial_timestamp": datetime(2026, 3, 1, tzinfo=timezone.utc), "max_records_per_call": 500,
        "empty_record_backoff_s": 0.5, "max_empty_record_backoff_s": 4.0, "shard_sync_interval_s": 2.0,
        "checkpoint_interval_s": 0.25, "retry_limit": 7, "retry_backoff": RetryBackoff(0.2, 3.0, 5.0),
        "message_timeout_s": None, "max_inflight_records": 77, "max_inflight_bytes": 1 << 20,
        "prefetch_records": 99, "prefetch_bytes": 1 << 21, "reader_threads": 0, "reliable": False,
        "deaggregate": False, "drop_foreign_user_records": False, "scheme": JSON, "dead_letter": print,
        "dead_letter_deadline_s": 5.0, "metrics_port": 9108, "task_index": 0, "task_count": 1,
        "coordination": "leases", "worker_id": "worker-7", "max_dead_letters_in_a_row": 7,
        "max_dead_letter_ratio": 0.25, "dead_letter_window": 50, "min_dead_letters_in_window": 5,
        "lease_settle_s": 0.5,
    }


def test_the_flat_keywords_are_exactly_those_of_before() -> None:
    assert set(FLAT_FIELDS) == set(OLD_FLAT)
    assert set(FlatSettings.__annotations__) == set(OLD_FLAT)
    assert {flat: target for flat, target in FLAT_FIELDS.items()} == {f: (g, n) for f, (g, n, _) in OLD_FLAT.items()}


def test_every_default_is_the_one_of_before_read_flat_and_nested() -> None:
    config = SpoutConfig(stream_name="s", app_name="a")
    for flat, (group, name, old) in OLD_FLAT.items():
        for where, value in (("flat", getattr(config, flat)), ("nested", getattr(getattr(config, group), name)),
                             ("group default", getattr(GROUPS[group](), name))):
            if isinstance(old, type):
                assert type(value) is old, (flat, where)
            else:
                assert value == old, (flat, where, value)


def test_every_flat_keyword_lands_in_its_group_field_and_equals_the_nested_form(tmp_path) -> None:
    values = samples(tmp_path)
    flat = SpoutConfig(stream_name="s", app_name="a", **values)
    by_group: dict[str, dict[str, Any]] = {}
    for keyword, value in values.items():
        group, name, _ = OLD_FLAT[keyword]
        assert getattr(flat, keyword) == value, keyword
        assert getattr(getattr(flat, group), name) == value, keyword
        by_group.setdefault(group, {})[name] = value
    nested = SpoutConfig("s", "a", **{group: GROUPS[group](**fields) for group, fields in by_group.items()})
    assert nested == flat
    copy = pickle.loads(pickle.dumps(nested))  # to Spark executors; a scheme has no equality of its own
    assert {f: getattr(copy, f) for f in OLD_FLAT if f != "scheme"} == {f: getattr(nested, f) for f in OLD_FLAT
                                                                      if f != "scheme"}
    assert isinstance(copy.scheme, JsonScheme) and copy.zk.auth == "spout:pa55word"


def test_each_flat_keyword_alone_changes_only_its_field(tmp_path) -> None:
    values = {**samples(tmp_path), "task_index": 2, "task_count": 3}  # (leases need the defaults above)
    companions = {"task_index": {"task_count": 3},
                  "initial_timestamp": {"initial_position": InitialPosition.AT_TIMESTAMP},
                  "initial_position": {"initial_timestamp": values["initial_timestamp"]},
                  "zookeeper_tls_ca_file": {"zookeeper_tls": True}}
    base = SpoutConfig(stream_name="s", app_name="a", scheme=RAW)
    for keyword, value in values.items():
        if keyword in ("zookeeper_tls_cert_file", "zookeeper_tls_key_file"):
            continue  # they go together: covered above
        changes = {keyword: value, **companions.get(keyword, {})}
        changed = SpoutConfig(stream_name="s", app_name="a", **{"scheme": RAW, **changes})
        diff = {f for f in OLD_FLAT if getattr(changed, f) != getattr(base, f)}
        assert diff == set(changes), keyword


def test_every_string_option_and_connector_alias_lands_in_its_group_field(tmp_path) -> None:
    pem = str(tmp_path / "ca.pem")
    open(pem, "w").close()
    # option -> (text, group, field, value)
    options: dict[str, tuple[str, str, str, Any]] = {
        "streamName": ("orders", "", "stream_name", "orders"), "appName": ("billing", "", "app_name", "billing"),
        "zookeeper": ("zk:2181", "zk", "hosts", "zk:2181"), "zookeeperPrefix": ("/apps", "zk", "prefix", "/apps"),
        "zookeeperSessionTimeoutS": ("12.5", "zk", "session_timeout_s", 12.5),
        "zookeeperDeadlineS": ("30", "zk", "deadline_s", 30.0),
        "zookeeperAuth": ("u:p", "zk", "auth", "u:p"),
        "zookeeperWorldReadable": ("no", "zk", "world_readable", False), "zookeeperTls": ("true", "zk", "tls", True),
        "zookeeperTlsCaFile": (pem, "zk", "tls_ca_file", pem),
        "zookeeperTlsCertFile": (pem, "zk", "tls_cert_file", pem),
        "zookeeperTlsKeyFile": (pem, "zk", "tls_key_file", pem),
        "region": ("eu-west-1", "kinesis", "region", "eu-west-1"),
        "endpointUrl": ("http://x", "kinesis", "endpoint_url", "http://x"),
        "initialPosition": ("at_timestamp", "reading", "initial_position", InitialPosition.AT_TIMESTAMP),
        "initialTimestamp": ("2026-03-01T00:00:00Z", "reading", "initial_timestamp",
                             datetime(2026, 3, 1, tzinfo=timezone.utc)),
        "maxRecordsPerCall": ("500", "reading", "max_records_per_call", 500),
        "emptyRecordBackoffS": ("0.5", "reading", "empty_record_backoff_s", 0.5),
        "maxEmptyRecordBackoffS": ("4", "reading", "max_empty_record_backoff_s", 4.0),
        "shardSyncIntervalS": ("2", "reading", "shard_sync_interval_s", 2.0),
        "checkpointIntervalS": ("0.25", "tracking", "checkpoint_interval_s", 0.25),
        "retryLimit": ("7", "tracking", "retry_limit", 7),
        "messageTimeoutS": ("off", "tracking", "message_timeout_s", None),
        "maxInflightRecords": ("77", "tracking", "max_inflight_records", 77),
        "maxInflightBytes": ("1_048_576", "tracking", "max_inflight_bytes", 1 << 20),
        "prefetchRecords": ("99", "reading", "prefetch_records", 99),
        "prefetchBytes": ("2097152", "reading", "prefetch_bytes", 1 << 21),
        "readerThreads": ("0", "reading", "reader_threads", 0),
        "reliable": ("false", "tracking", "reliable", False),
        "deaggregate": ("0", "reading", "deaggregate", False),
        "dropForeignUserRecords": ("no", "reading", "drop_foreign_user_records", False),
        "deadLetterDeadlineS": ("5", "dead_letters", "deadline_s", 5.0),
        "metricsPort": ("9108", "metrics", "port", 9108),
        "taskIndex": ("0", "worker", "task_index", 0), "taskCount": ("1", "worker", "task_count", 1),
        "coordination": ("leases", "worker", "coordination", "leases"),
        "workerId": ("worker-7", "worker", "worker_id", "worker-7"),
        "retrieval": ("fanout", "reading", "retrieval", "fanout"),
        "consumerName": ("billing", "reading", "consumer_name", "billing"),
        "subscriptionRenewalS": ("60", "reading", "subscription_renewal_s", 60.0),
        "leaseSettleS": ("0", "worker", "lease_settle_s", 0.0),
    }
    backoff = {"retryBackoffInitialS": "0.2", "retryBackoffMultiplier": "3", "retryBackoffMaxS": "5"}
    aws = {"awsProfile": "etl", "awsRoleArn": ROLE, "awsRoleSessionName": "job-1", "awsExternalId": "ext",
           "awsRoleDurationS": "7200", "awsStsEndpointUrl": "https://sts.example"}
    static_keys = {"awsAccessKeyId": "AKIAEXAMPLE", "awsSecretAccessKey": "secret", "awsSessionToken": "token"}
    assert set(OPTION_NAMES) == {*options, *backoff, *aws, *static_keys, "scheme", *STORM_OPTIONS}

    config = SpoutConfig.from_options({**{o: t for o, (t, *_) in options.items()}, **backoff, **aws,
                                       "scheme": "json"})
    for option, (_, group, name, value) in options.items():
        holder = getattr(config, group) if group else config
        assert getattr(holder, name) == value, option
        assert getattr(config, OPTION_NAMES[option]) == value, option
    assert config.tracking.retry_backoff == RetryBackoff(initial_s=0.2, multiplier=3.0, max_s=5.0)
    assert config.kinesis.credentials == AwsCredentials(profile="etl", role_arn=ROLE, role_session_name="job-1",
                                                        external_id="ext", role_duration_s=7200,
                                                        sts_endpoint_url="https://sts.example")
    assert isinstance(config.reading.scheme, JsonScheme)
    keys = SpoutConfig.from_options({"streamName": "s", "appName": "a", **static_keys}).kinesis.credentials
    assert keys == AwsCredentials(access_key_id="AKIAEXAMPLE", secret_access_key="secret", session_token="token")

    # the AWS Scala connector's names (spark/source/aliases.py), each to its group field
    aliased: dict[str, tuple[str, str, str, Any]] = {
        "kinesis.streamName": ("orders", "", "stream_name", "orders"),
        "kinesis.region": ("eu-west-1", "kinesis", "region", "eu-west-1"),
        "kinesis.endpointUrl": ("http://x", "kinesis", "endpoint_url", "http://x"),
        "kinesis.startingPosition": ("EARLIEST", "reading", "initial_position", InitialPosition.TRIM_HORIZON),
        "kinesis.getRecords.numberOfRecordsPerFetch": ("500", "reading", "max_records_per_call", 500),
        "kinesis.describeShardInterval": ("500ms", "reading", "shard_sync_interval_s", 0.5),
        "kinesis.awsAccessKeyId": ("AKIAEXAMPLE", "kinesis", "credentials.access_key_id", "AKIAEXAMPLE"),
        "kinesis.awsSecretKey": ("secret", "kinesis", "credentials.secret_access_key", "secret"),
        "kinesis.stsRoleArn": (ROLE, "kinesis", "credentials.role_arn", ROLE),
        "kinesis.stsSessionName": ("job-1", "kinesis", "credentials.role_session_name", "job-1"),
        "kinesis.stsEndpointUrl": ("https://sts.example", "kinesis", "credentials.sts_endpoint_url",
                                   "https://sts.example"),
        "kinesis.consumerType": ("SubscribeToShard", "reading", "retrieval", "fanout"),
        "kinesis.consumerName": ("billing-efo", "reading", "consumer_name", "billing-efo"),
    }
    assert {a.lower() for a in aliased} == set(ALIASES)
    config = SpoutConfig.from_options(resolve_aliases({"appName": "a", **{a: t for a, (t, *_) in aliased.items()}}))
    for alias, (_, group, name, value) in aliased.items():
        holder: Any = getattr(config, group) if group else config
        for part in name.split("."):
            holder = getattr(holder, part)
        assert holder == value, alias


def test_replace_takes_flat_names_and_groups_and_changes_only_what_it_names() -> None:
    config = SpoutConfig(stream_name="s", app_name="a", scheme=RAW, region="eu-west-1", retry_limit=5)
    for changed in (dataclasses.replace(config, message_timeout_s=None), config.replace(message_timeout_s=None)):
        assert changed.message_timeout_s is None and changed.tracking.message_timeout_s is None
        assert (changed.retry_limit, changed.region) == (5, "eu-west-1")  # the rest of the group and config kept
        assert changed == SpoutConfig(stream_name="s", app_name="a", scheme=RAW, region="eu-west-1", retry_limit=5,
                                      message_timeout_s=None)
    regrouped = config.replace(kinesis=KinesisSettings(endpoint_url="http://x"))
    assert (regrouped.region, regrouped.endpoint_url, regrouped.retry_limit) == (None, "http://x", 5)
    with pytest.raises(ConfigError, match="retry_limit must be a whole number from 0"):
        config.replace(retry_limit=-1)


def test_a_flat_keyword_overrides_the_field_of_the_group_given_beside_it() -> None:
    config = SpoutConfig(stream_name="s", app_name="a", tracking=TrackingSettings(retry_limit=1, reliable=False),
                         retry_limit=9)
    assert (config.retry_limit, config.reliable) == (9, False)


@pytest.mark.parametrize("build, flat, field, option", [
    (lambda: ZooKeeperSettings(session_timeout_s=0), "zookeeper_session_timeout_s",
     "ZooKeeperSettings.session_timeout_s", "option 'zookeeperSessionTimeoutS'"),
    (lambda: SpoutConfig(stream_name="s", app_name="a", zookeeper_session_timeout_s=0),
     "zookeeper_session_timeout_s", "ZooKeeperSettings.session_timeout_s", "option 'zookeeperSessionTimeoutS'"),
    (lambda: ReadingSettings(max_records_per_call=0), "max_records_per_call", "ReadingSettings.max_records_per_call",
     "option 'maxRecordsPerCall'"),
    (lambda: MetricsSettings(port=-1), "metrics_port", "MetricsSettings.port", "option 'metricsPort'"),
    (lambda: DeadLetterSettings(deadline_s=0), "dead_letter_deadline_s", "DeadLetterSettings.deadline_s",
     "option 'deadLetterDeadlineS'"),
    (lambda: WorkerSettings(coordination="gossip"), "coordination", "WorkerSettings.coordination",
     "option 'coordination'"),
    (lambda: TrackingSettings(retry_backoff=RetryBackoff(0.1, 200.0, 1.0)), "retry_backoff.multiplier",
     "TrackingSettings.retry_backoff.multiplier", "option 'retryBackoffMultiplier'"),
    (lambda: SpoutConfig(stream_name="", app_name="a"), "stream_name", "SpoutConfig.stream_name",
     "option 'streamName'"),
])
def test_a_group_error_names_the_flat_keyword_the_group_field_and_the_option(build, flat: str, field: str,
                                                                             option: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    text = str(info.value)
    assert text.startswith(f"{flat} must be") and field in text and option in text


def test_a_group_of_the_wrong_kind_or_an_unknown_keyword_is_refused() -> None:
    with pytest.raises(ConfigError, match="zk must be a ZooKeeperSettings"):
        SpoutConfig(stream_name="s", app_name="a", zk="127.0.0.1:2181")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument 'retries'"):
        SpoutConfig(stream_name="s", app_name="a", retries=3)  # type: ignore[call-arg]


def test_a_destination_whose_open_writer_returns_no_writer_is_refused_when_the_writer_is_opened() -> None:
    from kinesis_spout.deadletters.base import open_writer

    class Broken:
        def open_writer(self, config: SpoutConfig) -> object:
            return "not a writer"

    config = SpoutConfig(stream_name="s", app_name="a", dead_letter=Broken())
    with pytest.raises(ConfigError, match="its open_writer returned 'not a writer', not a kinesis_spout.deadletters"):
        open_writer(config.dead_letter, config)


def test_the_readme_example_of_the_nested_form_beside_the_flat_one() -> None:
    from kinesis_spout import KinesisSettings, ReadingSettings, TrackingSettings, ZooKeeperSettings

    flat = SpoutConfig(stream_name="orders", app_name="billing", region="eu-west-1",
                       initial_position=InitialPosition.TRIM_HORIZON, retry_limit=5,
                       zookeeper="zk1:2181,zk2:2181", zookeeper_session_timeout_s=20)
    nested = SpoutConfig(stream_name="orders", app_name="billing",
                         kinesis=KinesisSettings(region="eu-west-1"),
                         reading=ReadingSettings(initial_position=InitialPosition.TRIM_HORIZON),
                         tracking=TrackingSettings(retry_limit=5),
                         zk=ZooKeeperSettings(hosts="zk1:2181,zk2:2181", session_timeout_s=20))
    assert nested.zookeeper == flat.zk.hosts and nested.retry_limit == flat.tracking.retry_limit == 5
    assert nested.replace(scheme=RAW) == flat.replace(scheme=RAW)  # a scheme has no equality of its own
    assert nested.replace(retry_limit=0).tracking == TrackingSettings(retry_limit=0)
    with pytest.raises(ConfigError) as info:
        ZooKeeperSettings(session_timeout_s=0)
    assert str(info.value) == ("zookeeper_session_timeout_s must be a number from 1 to 3600, got 0 "
                               "(ZooKeeperSettings.session_timeout_s, option 'zookeeperSessionTimeoutS')")


def test_the_names_are_checked_before_the_groups_as_before() -> None:
    with pytest.raises(ConfigError, match="^stream_name must be a non-empty string"):
        SpoutConfig(stream_name="", app_name="a", zookeeper_prefix="relative", retry_limit=-1)


@pytest.mark.parametrize("keyword, group, attribute", [
    ("zookeeper", ZooKeeperSettings(), "zk"), ("dead_letter", DeadLetterSettings(), "dead_letters"),
    ("coordination", WorkerSettings(), "worker"),
])
def test_a_group_given_to_the_flat_keyword_of_the_same_name_says_where_it_goes(keyword: str, group: Any,
                                                                                attribute: str) -> None:
    with pytest.raises(ConfigError, match=f"^{keyword} takes one setting; a {type(group).__name__} goes in "
                                          f"{attribute}="):
        SpoutConfig(stream_name="s", app_name="a", **{keyword: group})
