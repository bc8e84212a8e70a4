"""Several streams in one SpoutConfig: the list, its checks, and the per-stream initial positions."""

from __future__ import annotations

import pytest

from kinesis_spout.config import InitialPosition, SpoutConfig
from kinesis_spout.errors import ConfigError


def test_a_list_or_a_comma_separated_option_names_the_streams_sorted() -> None:
    from_python = SpoutConfig(stream_name=["orders", "clicks"], app_name="a")
    from_option = SpoutConfig.from_options({"streamName": " orders , clicks", "appName": "a"})
    assert from_python.stream_name == from_option.stream_name
    assert from_python.stream_names == ("clicks", "orders") and from_python.stream_name == "clicks,orders"
    assert SpoutConfig(stream_name="s", app_name="a").stream_names == ("s",)
    assert from_python.for_stream("orders").stream_name == "orders"


@pytest.mark.parametrize("value, problem", [
    ("", "non-empty string"),
    ([], "non-empty string"),
    ("a,,b", "empty name"),
    ("a,b,a", "'a' more than once"),
    (["a", "a"], "'a' more than once"),
    ("a,b/c", "must not contain '/'"),
])
def test_a_bad_stream_list_is_refused_naming_the_option_and_the_fix(value: object, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        SpoutConfig(stream_name=value, app_name="a")  # type: ignore[arg-type]
    text = str(info.value)
    assert problem in text and "stream_name" in text and "'streamName'" in text


def test_initial_position_as_a_map_gives_each_stream_its_own_start() -> None:
    config = SpoutConfig.from_options({"streamName": "clicks,orders", "appName": "a",
                                       "initialPosition": '{"orders": "trim_horizon"}'})
    assert config.for_stream("orders").initial_position is InitialPosition.TRIM_HORIZON
    assert config.for_stream("clicks").initial_position is InitialPosition.LATEST  # left out: the default
    assert config.replace(retry_limit=0).stream_positions == config.stream_positions
    one = SpoutConfig(stream_name="s", app_name="a", initial_position={"s": "TRIM_HORIZON"})  # type: ignore[dict-item]
    assert one.initial_position is InitialPosition.TRIM_HORIZON


@pytest.mark.parametrize("raw, problem", [
    ('{"nope": "LATEST"}', "not in stream_name"),
    ('{"orders": "AT_TIMESTAMP"}', "AT_TIMESTAMP"),
    ('{"orders": "SOMEWHERE"}', "must be one of"),
    ("{orders: LATEST}", "JSON object"),
])
def test_a_bad_position_map_is_refused_naming_the_option(raw: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        SpoutConfig.from_options({"streamName": "clicks,orders", "appName": "a", "initialPosition": raw})
    assert problem in str(info.value) and "'initialPosition'" in str(info.value)
