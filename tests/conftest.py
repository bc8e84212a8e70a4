"""Markers that say what a test needs, applied from the fixtures it uses (registered in pyproject.toml).

=============  =============================================================================================
marker         applied to a test that
=============  =============================================================================================
spark          starts a Spark session: uses the ``spark`` fixture, or is marked (a Spark driver in a subprocess)
cluster        starts a standalone Spark cluster (the ``spark_cluster`` fixture)
crash          kills or stops processes in loops (SIGKILL/SIGSTOP of consumers or drivers): marked by hand
zookeeper      uses the ZooKeeper server (``zookeeper``, ``zookeeper_server``)
emulators      uses a Kinesis emulator (moto, kinesalite, kinesis-local, or a fault proxy in front of one)
state_servers  uses the Redis or memcached server of the exactly-once state backends
slow           any of spark, cluster, crash (added here), or marked slow by hand: what `make test-fast` leaves out
backend_twin   the moto run of a test parametrized over moto and kinesalite (``kinesis_backend``): `make test-fast`
               runs its kinesalite twin only (real sequence numbers), `make test` both
=============  =============================================================================================

``pytest -m spark`` runs the Spark tests, ``-m 'not slow and not backend_twin'`` the contributor's loop (``make
test-fast``). Under pytest-xdist the slow tests are queued first, so that no long test starts when the rest is done.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

#: The markers each fixture implies (fixtures of the kinesis_spout plugin and of the test modules).
MARKERS_BY_FIXTURE: dict[str, tuple[str, ...]] = {
    "spark": ("spark",),
    "spark_cluster": ("spark", "cluster"),
    "start_driver": ("spark",),  # test_executor_faults: Spark drivers in subprocesses
    "zookeeper": ("zookeeper",),
    "zookeeper_server": ("zookeeper",),
    "moto_kinesis": ("emulators",),
    "moto_server": ("emulators",),
    "kinesalite": ("emulators",),
    "kinesalite_server": ("emulators",),
    "kinesis_local": ("emulators",),
    "kinesis_local_server": ("emulators",),
    "kinesis_backend": ("emulators",),
    "fault_proxy": ("emulators",),
    "redis": ("state_servers",),
    "memcached": ("state_servers",),
}

#: Markers that make a test slow: `make test-fast` (-m 'not slow') leaves these out.
SLOW_MARKERS = ("spark", "cluster", "crash")


def markers_for(fixturenames: list[str], params: dict[str, object], explicit: set[str]) -> set[str]:
    """The markers a test gets: those its fixtures imply, ``slow`` when it is (or is marked) spark, cluster or
    crash, ``backend_twin`` for the moto run of a ``kinesis_backend`` test. ``params`` are the test's
    parameters (fixture name -> value), ``explicit`` the markers already on it."""
    names = {marker for fixture in fixturenames for marker in MARKERS_BY_FIXTURE.get(fixture, ())}
    if (names | explicit) & set(SLOW_MARKERS):
        names.add("slow")
    if params.get("kinesis_backend") == "moto_kinesis":
        names.add("backend_twin")
    return names - explicit


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Called by pytest once the tests are collected (in each xdist worker): adds each test's markers before
    ``-m`` selects. In an xdist worker it also queues the slow tests first (every worker sorts alike, as xdist
    requires), so the two workers share the long tests and finish together."""
    slow: set[str] = set()
    for item in items:
        explicit = {mark.name for mark in item.iter_markers()}
        callspec = getattr(item, "callspec", None)
        added = markers_for(list(getattr(item, "fixturenames", ())), dict(callspec.params) if callspec else {},
                            explicit)
        for name in sorted(added):
            item.add_marker(name)
        if "slow" in added | explicit:
            slow.add(item.nodeid)
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.nodeid not in slow)  # stable: the order within each group is kept


#: The process writing the class archive of Spark drivers, started by pytest_configure (None: none started).
_class_archive_build: subprocess.Popen[bytes] | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Dead letters of spouts that name no destination go to a temporary folder, not to the working directory
    (tests that look at the default folder set ``KINESIS_SPOUT_DEAD_LETTER_DIR`` themselves, or run a child
    process without it). Spark, unless ``SPARK_HOME`` says where, runs from
    :func:`kinesis_spout.testing.spark.spark_home_without_pyspark_zip`
    (children started by tests inherit it).

    A run that may start Spark drivers in processes of their own (any run but ``-m 'not slow ...'`` or of
    tests/unit alone) writes their JVM class archive in the background, once per Spark installation, from the main
    process only (not from each xdist worker): drivers started once it is there start their JVM in about half the
    time (:func:`kinesis_spout.testing.spark.build_class_archive`)."""
    global _class_archive_build
    os.environ.setdefault("KINESIS_SPOUT_DEAD_LETTER_DIR", tempfile.mkdtemp(prefix="kinesis-spout-dead-letters-"))
    if "SPARK_HOME" not in os.environ:
        from kinesis_spout.testing.spark import spark_home_without_pyspark_zip

        home = spark_home_without_pyspark_zip()
        if home is not None:
            os.environ["SPARK_HOME"] = home
    unit = Path(__file__).parent / "unit"  # pure logic: no Spark driver of its own
    drivers_may_start = ("not slow" not in (config.option.markexpr or "") and not config.option.collectonly
                         and not all(Path(arg.split("::")[0]).resolve().is_relative_to(unit) for arg in config.args))
    if drivers_may_start and not hasattr(config, "workerinput") and "SPARK_HOME" in os.environ:
        from kinesis_spout.testing.spark import build_class_archive

        _class_archive_build = build_class_archive(os.environ)


def pytest_unconfigure(config: pytest.Config) -> None:
    """A class archive still being written when the run ends is given up (its process group SIGKILLed; the next run
    writes it)."""
    if _class_archive_build is not None:
        from kinesis_spout.testing.spark import stop_class_archive_build

        stop_class_archive_build(_class_archive_build, os.environ)
