"""A local Spark session for tests: one per test session, because each start costs seconds (a JVM starts, then
Python workers at the first job). Tests that start Spark drivers in processes of their own (crash tests, examples)
pay that start in each process: :func:`quick_start_env` makes it cheaper, and cheaper still once
:func:`build_class_archive` has written the JVM's class archive of a driver start. The ``spark`` fixture itself is
the plugin's (:mod:`kinesis_spout.testing.plugin`): this module does not need pytest, so the demo can use it."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from kinesis_spout.errors import ServerStartError

#: JVM options of a Spark driver that lives for seconds: the C1 JIT only (no C2 compiler threads competing for the
#: cores while the JVM starts) and a serial collector. On a busy 2-core machine a local driver's start and first
#: jobs take about 10 s with them instead of about 17 s; a long-lived session would want the C2 JIT back.
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: A driver that starts a local session, runs a small shuffle and exits: the classes it loads are those a driver's
#: start loads (run by :func:`build_class_archive`, whose JVM writes them to the archive when it exits).
_ARCHIVE_DRIVER = """
from kinesis_spout.testing.spark import local_spark_session
spark = local_spark_session("kinesis-spout-class-archive")
spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect()
gateway = spark.sparkContext._gateway
spark.stop()
try:
    gateway.jvm.java.lang.System.exit(0)  # a JVM writes the archive only when it exits
except Exception:  # noqa: BLE001 - the gateway's connection ends with the JVM
    pass
written = gateway.proc.wait(120) == 0
"""


def spark_home_without_pyspark_zip() -> str | None:
    """A ``SPARK_HOME`` for the tests' Spark: the installed PySpark's, but with no ``python/lib/pyspark.zip``.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process it starts, and
    Python caches no bytecode for modules of a zip: each of those processes compiles PySpark again (0.75 s of CPU
    where the installed package takes 0.2 s). A readStream query starts such a process, which Spark gives 10 s to
    connect back; on a loaded 2-core machine the compile alone outlasted that ("Python worker failed to connect
    back"). Without the zip, the processes import the installed package, whose bytecode is cached.

    The folder mirrors the installed ``pyspark`` folder with symbolic links (jars, bin, conf: all the same files),
    in the temporary directory, made once per installed PySpark and shared by every process. None when PySpark is
    not installed or ships no zip. Who calls: the test suite's ``pytest_configure`` (when ``SPARK_HOME`` is not set) and
    ``scripts/spark_class_archive.py``; nothing else changes."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    home = Path(spec.origin).parent
    archive = home / "python" / "lib" / "pyspark.zip"
    if not archive.is_file():
        return None
    key = hashlib.sha1(f"{home}:{archive.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"kinesis-spout-spark-home-{key}"
    if target.is_dir():
        return str(target)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
    for entry in home.iterdir():
        if entry.name != "python":
            (staging / entry.name).symlink_to(entry)
    (staging / "python" / "lib").mkdir(parents=True)
    for entry in (home / "python").iterdir():
        if entry.name != "lib":
            (staging / "python" / entry.name).symlink_to(entry)
    for entry in (home / "python" / "lib").iterdir():
        if entry.name != "pyspark.zip":
            (staging / "python" / "lib" / entry.name).symlink_to(entry)
    try:
        staging.rename(target)
    except OSError:  # another process (an xdist worker) made it first: theirs is the same
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def class_archive(env: Mapping[str, str]) -> Path:
    """Where the JVM class archive of a Spark driver started with ``env`` is kept: in the temporary directory, one
    per Spark installation (``SPARK_HOME``, else the installed PySpark) and Java, because the JVM uses an archive
    only with the class path and the JVM it was written with. :func:`build_class_archive` writes it."""
    home = env.get("SPARK_HOME")
    if not home:
        import pyspark

        home = str(Path(pyspark.__file__).parent)
    jars = Path(home) / "jars"
    stamp = jars.stat().st_mtime_ns if jars.is_dir() else 0
    java = os.path.realpath(shutil.which("java", path=env.get("PATH")) or "java")
    key = hashlib.sha1(f"{home}:{stamp}:{java}:{env.get('JAVA_HOME', '')}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"kinesis-spout-spark-classes-{key}.jsa"


def build_class_archive(env: Mapping[str, str]) -> subprocess.Popen[bytes] | None:
    """Start writing :func:`class_archive` for ``env`` in the background: a driver process starts a local session,
    runs a small job and exits, and its JVM writes the classes it loaded to the archive (about one driver start of
    CPU, once per Spark installation). Returns the process (the caller waits for it or kills it), or None when the
    archive is there already or another process is writing it. The archive appears complete or not at all (written
    under another name, renamed by the process's last step), so a driver started meanwhile simply starts without it.

    Called once per test run by tests/conftest.py; nothing else changes."""
    target = class_archive(env)
    lock = target.with_suffix(".lock")
    if target.exists():
        return None
    if lock.exists() and time.time() - lock.stat().st_mtime > 600:  # a run interrupted while it wrote the archive
        lock.unlink(missing_ok=True)
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # another process writes it now
        return None
    os.close(fd)
    staging = target.with_suffix(".build.tmp")
    options = f"{QUICK_JVM_OPTIONS} -XX:ArchiveClassesAtExit={staging} -Xlog:cds*=off"
    child = {**env, "PYSPARK_SUBMIT_ARGS": f"--driver-java-options '{options}' pyspark-shell"}
    script = (f"{_ARCHIVE_DRIVER}\nimport os\nif written:\n    os.replace({str(staging)!r}, {str(target)!r})\n"
              f"os.unlink({str(lock)!r})\n")
    return subprocess.Popen([sys.executable, "-c", script], env=child, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_class_archive_build(process: subprocess.Popen[bytes], env: Mapping[str, str]) -> None:
    """End ``process`` (from :func:`build_class_archive` for ``env``) if it still runs: its process group (the JVM
    included) is SIGKILLed and its unfinished archive and lock removed, so that the next run writes it. Called at
    the end of a test run; a finished build is left as it is."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        target = class_archive(env)
        target.with_suffix(".build.tmp").unlink(missing_ok=True)
        target.with_suffix(".lock").unlink(missing_ok=True)


def quick_start_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` for a short-lived process that starts a Spark driver through PySpark: its JVM runs with
    :data:`QUICK_JVM_OPTIONS` (set through ``PYSPARK_SUBMIT_ARGS``, which PySpark reads when it launches the JVM),
    and maps the classes of :func:`class_archive` when that archive has been written (it loads them from the jars
    otherwise: the same driver, its JVM started in about half the time).

    Called by tests that start Spark drivers as subprocesses; it changes nothing but the copy. An ``env`` that sets
    ``PYSPARK_SUBMIT_ARGS`` already is copied as it is (the caller's choice wins)::

        subprocess.run([sys.executable, "driver.py"], env=quick_start_env(os.environ))
    """
    out = dict(env)
    options = QUICK_JVM_OPTIONS
    try:
        archive = class_archive(env)
    except ImportError:  # no SPARK_HOME and no PySpark: the child's PySpark import will say so
        return out
    if archive.exists():
        options += f" -XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    out.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-java-options '{options}' pyspark-shell")
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
