"""No AWS credentials at all, with an emulator's endpoint set: the error says that any dummy keys do, and how to set
them (emulators check no signature); without an endpoint (AWS) it does not suggest dummy keys. Against moto."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinesis_spout import KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.shards import list_shards
from kinesis_spout.testing.kinesis import KinesisEndpoint


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A process environment where boto's default chain finds nothing (and asks no instance metadata)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_missing_credentials_with_an_emulator_endpoint_say_that_dummy_keys_do(
        moto_kinesis: KinesisEndpoint, no_credentials: None) -> None:
    stream = moto_kinesis.create_stream()
    client = make_client("us-east-1", moto_kinesis.endpoint_url)
    with pytest.raises(KinesisError) as caught:
        list_shards(client, stream)
    text = str(caught.value)
    assert moto_kinesis.endpoint_url in text, text
    assert "AWS_ACCESS_KEY_ID=dummy AWS_SECRET_ACCESS_KEY=dummy" in text, text
    assert not caught.value.retriable


def test_missing_credentials_for_aws_do_not_suggest_dummy_keys(no_credentials: None) -> None:
    client = make_client("us-east-1", None)
    with pytest.raises(KinesisError) as caught:
        list_shards(client, "any-stream")  # refused before any request is sent: no credentials to sign it
    text = str(caught.value)
    assert "configure AWS credentials" in text and "dummy" not in text, text
