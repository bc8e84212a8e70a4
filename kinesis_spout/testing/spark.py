"""A local Spark session for tests: one per test session, because each start costs seconds."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest


def local_spark_session(app_name: str = "kinesis-spout-tests", cores: int = 2) -> Any:
    """Start (or reuse) a ``local[cores]`` SparkSession whose Python workers run this interpreter.

    Quiet and small: no UI, no console progress bar, ``cores`` shuffle partitions, Spark's own logs at ERROR.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.redaction.options.regex", "(?i)url|auth|secret|password|token|externalid")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession shared by the whole test session (stopped at the end).

    Its Python workers inherit the environment of the moment the JVM starts, which may come before any Kinesis
    fixture ran: the dummy credentials those fixtures set for the local servers are set here first (never over
    credentials already in the environment)."""
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    session = local_spark_session()
    try:
        yield session
    finally:
        session.stop()
