"""A local Spark session for tests: one per test session, because each start costs seconds (a JVM starts, then
Python workers at the first job). Tests that start Spark drivers in processes of their own (crash tests, examples)
pay that start in each process: :func:`quick_start_env` makes it cheaper. The ``spark`` fixture itself is the
plugin's (:mod:`kinesis_spout.testing.plugin`): this module does not need pytest, so the demo can use it."""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping

#: JVM options of a Spark driver that lives for seconds: the C1 JIT only (no C2 compiler threads competing for the
#: cores while the JVM starts) and a serial collector. On a busy 2-core machine a local driver's start and first
#: jobs take about 10 s with them instead of about 17 s; a long-lived session would want the C2 JIT back.
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def quick_start_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` for a short-lived process that starts a Spark driver through PySpark: its JVM runs with
    :data:`QUICK_JVM_OPTIONS` (set through ``PYSPARK_SUBMIT_ARGS``, which PySpark reads when it launches the JVM).

    Called by tests that start Spark drivers as subprocesses; it changes nothing but the copy. An ``env`` that sets
    ``PYSPARK_SUBMIT_ARGS`` already is copied as it is (the caller's choice wins)::

        subprocess.run([sys.executable, "driver.py"], env=quick_start_env(os.environ))
    """
    out = dict(env)
    out.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-java-options '{QUICK_JVM_OPTIONS}' pyspark-shell")
    return out


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
