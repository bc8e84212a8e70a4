"""quick_start_env, the environment of the Spark drivers tests start in processes of their own: the quick JVM
options always, the class archive of a driver's start only once it has been written, the caller's own
PYSPARK_SUBMIT_ARGS as they are."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kinesis_spout.testing.spark import QUICK_JVM_OPTIONS, build_class_archive, class_archive, quick_start_env


@pytest.fixture
def spark_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment naming a Spark installation of its own, whose archive would be kept under tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    return {"SPARK_HOME": str(tmp_path / "spark"), "PATH": "/usr/bin:/bin"}


def test_the_archive_is_used_only_once_it_is_there(spark_home: dict[str, str]) -> None:
    archive = class_archive(spark_home)
    assert archive.parent == Path(tempfile.gettempdir())
    assert quick_start_env(spark_home)["PYSPARK_SUBMIT_ARGS"] == \
        f"--driver-java-options '{QUICK_JVM_OPTIONS}' pyspark-shell"
    archive.write_bytes(b"written")
    assert quick_start_env(spark_home)["PYSPARK_SUBMIT_ARGS"] == \
        f"--driver-java-options '{QUICK_JVM_OPTIONS} -XX:SharedArchiveFile={archive} -Xlog:cds*=off' pyspark-shell"
    assert build_class_archive(spark_home) is None  # written once: never again


def test_each_spark_installation_has_its_own_archive(spark_home: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "other" / "jars").mkdir(parents=True)
    assert class_archive(spark_home) != class_archive({**spark_home, "SPARK_HOME": str(tmp_path / "other")})


def test_a_callers_own_submit_args_are_kept(spark_home: dict[str, str]) -> None:
    class_archive(spark_home).write_bytes(b"written")
    mine = {**spark_home, "PYSPARK_SUBMIT_ARGS": "--driver-memory 1g pyspark-shell"}
    assert quick_start_env(mine)["PYSPARK_SUBMIT_ARGS"] == "--driver-memory 1g pyspark-shell"


def test_an_archive_being_written_is_not_written_twice(spark_home: dict[str, str]) -> None:
    class_archive(spark_home).with_suffix(".lock").touch()  # another process writes it
    assert build_class_archive(spark_home) is None
