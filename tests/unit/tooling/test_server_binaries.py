"""How the test servers' binaries are found (Redis, Memcached): the environment variable first, then PATH. No
server is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinesis_spout.testing.process import find_binary


def test_the_variable_names_the_binary_and_a_missing_one_is_none(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "my-redis"
    binary.write_text("")
    monkeypatch.setenv("KINESIS_SPOUT_TEST_BINARY", str(binary))
    assert find_binary("KINESIS_SPOUT_TEST_BINARY", "redis-server") == str(binary)
    monkeypatch.setenv("KINESIS_SPOUT_TEST_BINARY", str(tmp_path / "gone"))
    assert find_binary("KINESIS_SPOUT_TEST_BINARY", "redis-server") is None, "a wrong path is not replaced by PATH's"


def test_without_the_variable_the_binary_on_path_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "some-server-of-this-test"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.delenv("KINESIS_SPOUT_TEST_BINARY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_binary("KINESIS_SPOUT_TEST_BINARY", "some-server-of-this-test") == str(binary)
    assert find_binary("KINESIS_SPOUT_TEST_BINARY", "no-such-server-of-this-test") is None
