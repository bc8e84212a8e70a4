"""``kinesis-spout --version``, and the ``status``/``checkpoints`` defaults taken from the environment."""

from __future__ import annotations

from typing import Any

import pytest

import kinesis_spout
from kinesis_spout import Checkpoint, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.cli import main


def test_version_prints_the_package_version(capsys: Any) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"kinesis-spout {kinesis_spout.__version__}"


def test_stream_app_and_zookeeper_come_from_the_environment(zookeeper: Any, capsys: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = ZooKeeperCheckpointStore.from_config(SpoutConfig(stream_name="clicks", app_name="etl",
                                                             zookeeper=zookeeper.hosts,
                                                             zookeeper_prefix=zookeeper.prefix))
    store.open()
    try:
        store.save(Checkpoint("shardId-000000000000", "42"))
    finally:
        store.close()
    monkeypatch.setenv("KINESIS_SPOUT_STREAM", "clicks")
    monkeypatch.setenv("KINESIS_SPOUT_APP", "etl")
    monkeypatch.setenv("KINESIS_SPOUT_ZOOKEEPER", zookeeper.hosts)
    assert main(["checkpoints", "--prefix", zookeeper.prefix]) == 0
    out = capsys.readouterr().out
    assert "checkpoints of app 'etl' on stream 'clicks'" in out and "shardId-000000000000  42" in out
    assert main(["status", "--prefix", zookeeper.prefix, "--endpoint-url", "http://127.0.0.1:9", "--region",
                 "us-east-1"]) == 0
    assert "app 'etl' on stream 'clicks'" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["checkpoints", "status"])
def test_help_names_the_environment_variables(command: str, capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for variable in ("KINESIS_SPOUT_STREAM", "KINESIS_SPOUT_APP", "KINESIS_SPOUT_ZOOKEEPER"):
        assert f"${variable}" in text


def test_without_stream_in_flags_or_environment_the_error_names_both(capsys: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KINESIS_SPOUT_STREAM", raising=False)
    monkeypatch.setenv("KINESIS_SPOUT_APP", "etl")
    with pytest.raises(SystemExit) as done:
        main(["checkpoints"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--stream" in err and "KINESIS_SPOUT_STREAM" in err


@pytest.mark.parametrize("command", [["dead-letters", "list", "stream:letters"],
                                     ["checkpoints", "--stream", "s", "--app", "a", "reset", "--shard",
                                      "shardId-000000000000", "--to", "latest", "--yes"]])
def test_an_endpoint_without_a_scheme_is_an_error_with_the_fix(command: list[str], zookeeper: Any, capsys: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KINESIS_SPOUT_ZOOKEEPER", zookeeper.hosts)
    where = ["--prefix", zookeeper.prefix] if command[0] == "checkpoints" else []
    assert main(command + where + ["--endpoint-url", "localhost:4567", "--region", "us-east-1"]) == 1
    err = capsys.readouterr().err
    assert "endpoint_url 'localhost:4567' has no scheme: write 'http://localhost:4567'" in err
    assert "KINESIS_SPOUT_ENDPOINT_URL" in err
