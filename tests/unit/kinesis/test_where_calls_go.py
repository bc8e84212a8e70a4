"""Where calls go, in the words of every error message that says it (region, endpoint). No servers."""

from __future__ import annotations

from kinesis_spout.kinesis.botocore_errors import where


def test_an_endpoint_is_named_after_its_region() -> None:
    assert where("eu-west-1", "http://localhost:4567") == "region eu-west-1 at endpoint http://localhost:4567"


def test_without_an_endpoint_only_the_region_is_named_and_none_is_the_default_region() -> None:
    assert where("eu-west-1", None) == "region eu-west-1"
    assert where(None, "") == "region default"
