"""An endpoint URL without a scheme (``localhost:4567``) is refused when the config is built, naming the setting in
each of its spellings and the fix, instead of botocore's ``ValueError`` at ``open()``."""

from __future__ import annotations

import pytest

from kinesis_spout import ConfigError, SpoutConfig
from kinesis_spout.spark.source.offsets import parse_source_options


@pytest.mark.parametrize("url, fix", [("localhost:4567", "http://localhost:4567"),
                                      ("127.0.0.1:4567", "http://127.0.0.1:4567"),
                                      ("kinesis.eu-west-1.amazonaws.com", "https://kinesis.eu-west-1.amazonaws.com")])
def test_an_endpoint_without_a_scheme_is_refused_with_the_fix(url: str, fix: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SpoutConfig(stream_name="s", app_name="a", endpoint_url=url)
    text = str(caught.value)
    assert text.startswith(f"endpoint_url {url!r} has no scheme")
    assert repr(fix) in text
    assert "KinesisSettings.endpoint_url" in text and "option 'endpointUrl'" in text
    assert "KINESIS_SPOUT_ENDPOINT_URL" in text


def test_the_spark_option_names_the_option_as_typed() -> None:
    with pytest.raises(ConfigError, match=r"^option 'endpointUrl': endpoint_url 'localhost:4567' has no scheme.*"
                                          r"'http://localhost:4567'"):
        parse_source_options({"streamName": "s", "appName": "a", "endpointurl": "localhost:4567"})
    with pytest.raises(ConfigError, match=r"^option 'endpointUrl': endpoint_url 'ftp://host:21' must be an http"):
        SpoutConfig.from_options({"streamName": "s", "appName": "a", "endpointUrl": "ftp://host:21"})


@pytest.mark.parametrize("url", [None, "http://localhost:4567", "https://kinesis.eu-west-1.amazonaws.com",
                                 "HTTP://127.0.0.1:4567/"])
def test_urls_with_a_scheme_and_host_are_taken_as_given(url: str | None) -> None:
    assert SpoutConfig(stream_name="s", app_name="a", endpoint_url=url).endpoint_url == url
