"""``kinesis-spout status`` after the exports of ``kinesis-spout dev-servers`` (ZooKeeper, endpoint and stream; no
app): the only app of the stream under the ZooKeeper root is taken, and said so; otherwise the apps found are listed
with the way to choose one, as for a misspelled ``--app``."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_spout.cli import main

from .apps import saved


@pytest.fixture
def exported(zookeeper: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What dev-servers exports (no app), and the status command with only the test's ZooKeeper prefix."""
    monkeypatch.setenv("KINESIS_SPOUT_ZOOKEEPER", zookeeper.hosts)
    monkeypatch.setenv("KINESIS_SPOUT_STREAM", "sentences")
    monkeypatch.setenv("KINESIS_SPOUT_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing answers: status says so
    monkeypatch.delenv("KINESIS_SPOUT_APP", raising=False)
    return ["status", "--prefix", zookeeper.prefix, "--region", "us-east-1"]


def test_without_app_the_only_app_of_the_stream_is_taken_and_named(
        exported: list[str], zookeeper: Any, capsys: Any) -> None:
    saved(zookeeper, "wordcount", "sentences")
    saved(zookeeper, "billing", "orders")  # another app, of another stream
    assert main(exported) == 0
    out = capsys.readouterr().out
    assert "app 'wordcount' on stream 'sentences'" in out
    assert "the only app of stream 'sentences'" in out and "--app" in out
    assert "shardId-000000000000" in out and "42" in out


def test_without_app_several_apps_of_the_stream_are_listed_with_the_way_to_choose(
        exported: list[str], zookeeper: Any, capsys: Any) -> None:
    saved(zookeeper, "wordcount", "sentences")
    saved(zookeeper, "audit", "sentences")
    assert main(exported) == 1
    err = capsys.readouterr().err
    assert "2 apps read stream 'sentences'" in err and "audit, wordcount" in err
    assert "pass --app NAME or set $KINESIS_SPOUT_APP" in err


def test_without_app_and_no_app_of_the_stream_the_error_says_what_is_there(
        exported: list[str], zookeeper: Any, capsys: Any) -> None:
    assert main(exported) == 1
    err = capsys.readouterr().err
    assert f"no app under {zookeeper.prefix} on ZooKeeper {zookeeper.hosts}" in err and "--app" in err
    saved(zookeeper, "billing", "orders")
    assert main(exported) == 1
    err = capsys.readouterr().err
    assert "no app under" in err and "has stream 'sentences'" in err and "billing (orders)" in err
    assert "--stream" in err and "--app" in err
