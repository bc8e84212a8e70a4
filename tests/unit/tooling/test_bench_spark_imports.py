"""The Spark benchmark says where Spark's Python processes import PySpark from (it decides what each of them costs
to start): SPARK_HOME's pyspark.zip, with or without bytecode in it, or the installed package."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_spark import pyspark_imports  # noqa: E402


def _home(tmp_path: Path, *names: str) -> str:
    lib = tmp_path / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as archive:
        for name in names:
            archive.writestr(name, b"")
    return str(tmp_path)


def test_a_zip_of_sources_only_is_told_apart_from_one_with_bytecode(tmp_path: Path) -> None:
    assert pyspark_imports(_home(tmp_path / "a", "pyspark/__init__.py")) == "SPARK_HOME's pyspark.zip (no bytecode)"
    assert pyspark_imports(_home(tmp_path / "b", "pyspark/__init__.py", "pyspark/__init__.pyc")) == (
        "SPARK_HOME's pyspark.zip (with bytecode)")


def test_without_a_zip_or_a_spark_home_the_installed_package_is_imported(tmp_path: Path) -> None:
    assert pyspark_imports(str(tmp_path)).startswith("the installed pyspark package")
    assert pyspark_imports(None).startswith("the installed pyspark package")
