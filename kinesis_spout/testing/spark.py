"""A local Spark session for tests: one per test session, because each start costs seconds (a JVM starts, then
Python workers at the first job). Tests that start Spark drivers in processes of their own (crash tests, examples)
pay that start in each process: :func:`quick_start_env` makes it cheaper. The ``spark`` fixture itself is the
plugin's (:mod:`kinesis_spout.testing.plugin`): this module does not need pytest, so the demo can use it."""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping

from kinesis_spout.errors import ServerStartError

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


#: The Scala object of Spark Connect's gRPC service (in the spark-connect jar PySpark 4.x ships in ``jars/``).
CONNECT_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService"


def start_connect_service(spark: Any) -> str:
    """Start Spark Connect's gRPC service inside the JVM of the classic session ``spark``, on a free loopback
    port, and return its address (``sc://127.0.0.1:PORT``) for ``SparkSession.builder.remote(...)``.

    It is the service ``sbin/start-connect-server.sh`` runs (that server starts a session, then this service on its
    SparkContext): here it shares the test session's JVM, its ``local[...]`` master and its Python workers (this
    interpreter), so a test of a Connect client pays no second JVM start. Each Connect client gets a server-side
    session of its own (its own registered data sources, its own temporary views). Who calls: tests, on the driver,
    once per JVM at a time; :func:`stop_connect_service` ends it (and a later call starts it again). Raises
    :class:`~kinesis_spout.errors.ServerStartError` when the service is running in this JVM already.
    """
    service = _connect_service(spark)
    if service.started() and not service.stopped():
        raise ServerStartError("Spark Connect's service runs in this JVM already (one per JVM): call "
                               "stop_connect_service(spark) first, or connect to the address it was started on")
    conf = spark.sparkContext._jsc.sc().conf()  # the context's own SparkConf, which the service reads at start
    conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
    conf.set("spark.connect.grpc.binding.port", "0")  # a free port, chosen by the service
    service.start(spark.sparkContext._jsc.sc())
    return f"sc://127.0.0.1:{service.localPort()}"


def stop_connect_service(spark: Any) -> None:
    """Stop the service :func:`start_connect_service` started in ``spark``'s JVM (its clients' sessions end).
    Idempotent; the classic session goes on."""
    service = _connect_service(spark)
    if service.started() and not service.stopped():
        service.stop(spark._jvm.scala.Option.empty(), spark._jvm.scala.Option.empty())


def _connect_service(spark: Any) -> Any:
    """The Scala object :data:`CONNECT_SERVICE` in ``spark``'s JVM (its methods are not all static forwarders)."""
    package, name = CONNECT_SERVICE.rsplit(".", 1)
    found = spark._jvm
    for part in package.split("."):
        found = getattr(found, part)
    return getattr(found, f"{name}$").__getattr__("MODULE$")
