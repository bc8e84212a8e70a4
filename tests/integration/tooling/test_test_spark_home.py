"""The tests' Spark starts its Python processes on the installed PySpark, whose bytecode is cached, not on
``$SPARK_HOME/python/lib/pyspark.zip``, which each of them would compile again (tests/conftest.py): on a loaded
machine that compile outlasted the 10 s Spark gives a new Python worker to connect back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def test_spark_python_processes_import_the_installed_pyspark_not_the_zip(spark: Any) -> None:
    imported = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()[0]
    assert "pyspark.zip" not in imported, imported
    assert Path(imported).is_file() and Path(imported).with_name("__pycache__").is_dir(), imported
    home = Path(os.environ["SPARK_HOME"])
    assert not (home / "python" / "lib" / "pyspark.zip").exists() and (home / "jars").is_dir()
