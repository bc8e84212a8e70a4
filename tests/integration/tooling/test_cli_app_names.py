"""A misspelled ``--app`` or ``--stream`` is an error that lists what exists under the ZooKeeper root, not an empty
table with exit code 0."""

from __future__ import annotations

from typing import Any

from kinesis_spout.cli import main

from .apps import saved


def args(zookeeper: Any, command: str, app: str, stream: str) -> list[str]:
    return [command, "--stream", stream, "--app", app, "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix]


def test_a_misspelled_app_lists_the_apps_and_the_nearest_one(zookeeper: Any, capsys: Any) -> None:
    saved(zookeeper, "wordcount", "sentences")
    saved(zookeeper, "billing", "orders")
    for command in ("checkpoints", "status"):
        assert main(args(zookeeper, command, "wordcuont", "sentences")) == 1
        err = capsys.readouterr().err
        assert f"no app 'wordcuont' under {zookeeper.prefix}" in err
        assert "did you mean 'wordcount'?" in err and "billing, wordcount" in err
        assert "--app" in err and "KINESIS_SPOUT_APP" in err


def test_a_misspelled_stream_lists_the_streams_of_the_app(zookeeper: Any, capsys: Any) -> None:
    saved(zookeeper, "wordcount", "sentences")
    assert main(args(zookeeper, "checkpoints", "wordcount", "sentence")) == 1
    err = capsys.readouterr().err
    assert "app 'wordcount' has nothing of stream 'sentence'" in err and "did you mean 'sentences'?" in err
    assert "--stream" in err and "KINESIS_SPOUT_STREAM" in err


def test_a_reset_under_a_misspelled_app_writes_nothing_unless_forced(zookeeper: Any, capsys: Any) -> None:
    saved(zookeeper, "wordcount", "sentences")
    reset = args(zookeeper, "checkpoints", "wordcuont", "sentences") + [
        "reset", "--shard", "shardId-000000000000", "--to", "trim-horizon", "--yes"]
    assert main(reset) == 1
    assert "did you mean 'wordcount'?" in capsys.readouterr().err
    assert zookeeper.client().exists(f"{zookeeper.prefix}/wordcuont") is None
    assert main(reset + ["--force"]) == 0
    assert zookeeper.client().exists(f"{zookeeper.prefix}/wordcuont/sentences/checkpoints/shardId-000000000000")


def test_an_app_that_exists_without_checkpoints_yet_is_not_an_error(zookeeper: Any, capsys: Any) -> None:
    zookeeper.client().ensure_path(f"{zookeeper.prefix}/fresh/sentences/leases")
    saved(zookeeper, "wordcount", "sentences")
    assert main(args(zookeeper, "checkpoints", "fresh", "sentences")) == 0
    assert "(none)" in capsys.readouterr().out
