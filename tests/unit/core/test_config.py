"""SpoutConfig validation and the string-option parser: bad input names the field and the fix."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from kinesis_spout import ConfigError, InitialPosition, JsonScheme, RetryBackoff, SpoutConfig
from kinesis_spout.config import OPTION_NAMES


def test_defaults_are_sane() -> None:
    cfg = SpoutConfig(stream_name="s", app_name="a")
    assert cfg.initial_position is InitialPosition.LATEST
    assert cfg.retry_limit == 3 and cfg.message_timeout_s == 30.0 and cfg.reliable
    assert cfg.checkpoint_path == "/kinesis_spout/a/s/checkpoints"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.retry_limit = 5  # type: ignore[misc]  # frozen


@pytest.mark.parametrize("kwargs, message", [
    ({"stream_name": ""}, "stream_name must be a non-empty string"),
    ({"app_name": "a/b"}, "app_name must not contain '/'"),
    ({"max_records_per_call": 0}, "max_records_per_call must be a whole number from 1 to 10,000, got 0"),
    ({"max_records_per_call": 10_001}, "from 1 to 10,000"),
    ({"retry_limit": -1}, "retry_limit must be a whole number from 0"),
    ({"retry_limit": True}, "retry_limit must be a whole number"),
    ({"empty_record_backoff_s": 0.05}, "empty_record_backoff_s must be a number from 0.2"),
    ({"checkpoint_interval_s": -1}, "checkpoint_interval_s must be a number from 0"),
    ({"message_timeout_s": 0}, "message_timeout_s must be a number"),
    ({"zookeeper_prefix": "relative"}, "zookeeper_prefix must be an absolute path"),
    ({"initial_position": "EARLIEST"}, "initial_position must be one of TRIM_HORIZON, LATEST, AT_TIMESTAMP"),
    ({"initial_position": InitialPosition.AT_TIMESTAMP}, "AT_TIMESTAMP needs initial_timestamp"),
    ({"initial_timestamp": datetime(2026, 1, 1)}, "only used with initial_position AT_TIMESTAMP"),
    ({"task_index": 2, "task_count": 2}, "task_index must be a whole number from 0 to 1, got 2"),
    ({"scheme": lambda r: r}, "scheme must be a callable with a 'fields' tuple"),
    ({"dead_letter": "log"}, "dead_letter must be a callable (record, reason) -> None or a destination"),
    ({"dead_letter_deadline_s": 0.5}, "dead_letter_deadline_s must be a number from 1 to 86400, got 0.5"),
    ({"metrics_port": 70_000}, "metrics_port must be a whole number from 0 to 65,535, got 70000"),
    ({"metrics_port": "9108"}, "metrics_port must be a whole number"),
    ({"retry_backoff": (0.1, 2.0, 10.0)}, "retry_backoff must be a RetryBackoff"),
])
def test_bad_values_raise_config_error_naming_the_field(kwargs: dict, message: str) -> None:
    base = {"stream_name": "s", "app_name": "a"}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SpoutConfig(**{**base, **kwargs})


def test_dead_letter_takes_a_handler_or_a_destination_and_metrics_port_parses_from_options(tmp_path) -> None:
    from kinesis_spout.deadletters import JsonLinesDeadLetters, KinesisDeadLetters

    for target in (print, KinesisDeadLetters("dlq"), JsonLinesDeadLetters(str(tmp_path / "dead.jsonl"))):
        assert SpoutConfig(stream_name="s", app_name="a", dead_letter=target).dead_letter is target
    cfg = SpoutConfig.from_options({"streamName": "s", "appName": "a", "metricsPort": "9108",
                                    "deadLetterDeadlineS": "30"})
    assert (cfg.metrics_port, cfg.dead_letter_deadline_s) == (9108, 30.0)
    assert SpoutConfig.from_options({"streamName": "s", "appName": "a", "metricsPort": "none"}).metrics_port is None
    assert SpoutConfig(stream_name="s", app_name="a").metrics_port is None  # opt-in
    with pytest.raises(ConfigError, match="option 'metricsPort' must be a port number"):
        SpoutConfig.from_options({"streamName": "s", "appName": "a", "metricsPort": "http"})


def test_retry_backoff_validates_itself() -> None:
    with pytest.raises(ConfigError, match="multiplier must be >= 1"):
        RetryBackoff(initial_s=0.1, multiplier=0.5, max_s=1.0)


def test_initial_position_accepts_strings_and_naive_timestamps_become_utc() -> None:
    cfg = SpoutConfig(stream_name="s", app_name="a", initial_position="trim-horizon")  # type: ignore[arg-type]
    assert cfg.initial_position is InitialPosition.TRIM_HORIZON
    cfg = SpoutConfig(stream_name="s", app_name="a", initial_position=InitialPosition.AT_TIMESTAMP,
                      initial_timestamp=datetime(2026, 1, 2, 3, 4, 5))
    assert cfg.initial_timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_from_options_parses_every_kind_of_value() -> None:
    cfg = SpoutConfig.from_options({
        "streamName": "sentences", "appName": "wordcount", "zookeeper": "zk:2181", "endpointUrl": "http://x",
        "initialPosition": "AT_TIMESTAMP", "initialTimestamp": "2026-03-01T00:00:00Z", "maxRecordsPerCall": "500",
        "checkpointIntervalS": "0.5", "retryLimit": "0", "retryBackoffInitialS": "0.2", "retryBackoffMaxS": "4",
        "messageTimeoutS": "none", "reliable": "false", "scheme": "json", "taskIndex": "1", "taskCount": "3",
    })
    assert cfg.stream_name == "sentences" and cfg.endpoint_url == "http://x"
    assert cfg.initial_timestamp == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert cfg.max_records_per_call == 500 and cfg.checkpoint_interval_s == 0.5 and cfg.retry_limit == 0
    assert cfg.retry_backoff == RetryBackoff(initial_s=0.2, multiplier=2.0, max_s=4.0)
    assert cfg.message_timeout_s is None and cfg.reliable is False and isinstance(cfg.scheme, JsonScheme)
    assert (cfg.task_index, cfg.task_count) == (1, 3)
    # snake_case names work too
    assert SpoutConfig.from_options({"stream_name": "s", "app_name": "a"}).stream_name == "s"


@pytest.mark.parametrize("options, message", [
    ({"streamName": "s", "appName": "a", "maxRecords": "5"},
     "unknown option 'maxRecords': did you mean 'maxRecordsPerCall'\\? Known options: "),
    ({"streamName": "s", "appName": "a", "retryLimit": "three"}, "option 'retryLimit' must be a whole number"),
    ({"streamName": "s", "appName": "a", "reliable": "maybe"}, "option 'reliable' must be true or false"),
    ({"streamName": "s", "appName": "a", "scheme": "avro"}, "option 'scheme' must be one of raw, text, json"),
    ({"streamName": "s", "appName": "a", "initialTimestamp": "yesterday"}, "must be an ISO-8601 time"),
    ({"appName": "a"}, "option 'streamName' is required"),
])
def test_from_options_errors_name_the_option(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SpoutConfig.from_options(options)


def test_every_field_with_a_string_form_has_an_option_name() -> None:
    assert OPTION_NAMES["checkpointIntervalS"] == "checkpoint_interval_s"
    assert "deadLetter" not in OPTION_NAMES  # Python-only
    assert len(set(OPTION_NAMES.values())) == len(OPTION_NAMES)


def test_zookeeper_auth_is_validated_without_echoing_and_hidden_from_repr() -> None:
    config = SpoutConfig(stream_name="s", app_name="a", zookeeper_auth="spout:pa55word")
    assert "pa55word" not in repr(config)
    for bad in ("no-colon-pa55word", ":pa55word", "user:"):
        with pytest.raises(ConfigError, match="zookeeper_auth must be 'user:password'") as info:
            SpoutConfig(stream_name="s", app_name="a", zookeeper_auth=bad)
        assert "pa55word" not in str(info.value)


def test_zookeeper_tls_options(tmp_path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    with pytest.raises(ConfigError, match="zookeeper_tls is False"):
        SpoutConfig(stream_name="s", app_name="a", zookeeper_tls_ca_file=str(ca))
    with pytest.raises(ConfigError, match="readable PEM file"):
        SpoutConfig(stream_name="s", app_name="a", zookeeper_tls=True, zookeeper_tls_ca_file=str(tmp_path / "no"))
    with pytest.raises(ConfigError, match="go together"):
        SpoutConfig(stream_name="s", app_name="a", zookeeper_tls=True, zookeeper_tls_cert_file=str(ca))
    config = SpoutConfig.from_options({"streamName": "s", "appName": "a", "zookeeperTls": "true",
                                       "zookeeperTlsCaFile": str(ca), "zookeeperDeadlineS": "5",
                                       "zookeeperWorldReadable": "no"})
    assert config.zookeeper_tls and config.zookeeper_tls_ca_file == str(ca)
    assert config.zookeeper_deadline_s == 5.0 and config.zookeeper_world_readable is False


def test_auto_coordination_is_leases_with_zookeeper_checkpoints_and_static_otherwise() -> None:
    auto = SpoutConfig(stream_name="s", app_name="a")
    assert auto.coordination == "auto"
    assert auto.worker.mode(zookeeper_store=True) == "leases"
    assert auto.worker.mode(zookeeper_store=False) == "static"
    split = SpoutConfig(stream_name="s", app_name="a", task_index=1, task_count=3)
    assert split.worker.mode(zookeeper_store=True) == "static", "task_count > 1 asks for Storm's static split"
    for chosen in ("static", "leases"):
        config = SpoutConfig(stream_name="s", app_name="a", coordination=chosen)
        assert {config.worker.mode(True), config.worker.mode(False)} == {chosen}



def test_the_dead_letter_storm_rules_parse_from_options_and_off_disables_one() -> None:
    base = {"streamName": "s", "appName": "a"}
    cfg = SpoutConfig.from_options({**base, "maxDeadLettersInARow": "50", "maxDeadLetterRatio": "0.25",
                                    "deadLetterWindow": "2_000", "minDeadLettersInWindow": "20"})
    assert (cfg.max_dead_letters_in_a_row, cfg.max_dead_letter_ratio, cfg.dead_letter_window,
            cfg.min_dead_letters_in_window) == (50, 0.25, 2000, 20)
    off = SpoutConfig.from_options({**base, "maxDeadLettersInARow": "off", "maxDeadLetterRatio": "none"})
    assert off.max_dead_letters_in_a_row is None and off.max_dead_letter_ratio is None
    with pytest.raises(ConfigError, match="option 'maxDeadLettersInARow' must be a whole number, or 'off'"):
        SpoutConfig.from_options({**base, "maxDeadLettersInARow": "many"})
