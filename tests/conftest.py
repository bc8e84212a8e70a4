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
=============  =============================================================================================

``pytest -m spark`` runs the Spark tests, ``-m 'not slow'`` the contributor's loop (``make test-fast``).
"""

from __future__ import annotations

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


def markers_for(fixturenames: list[str], explicit: set[str]) -> set[str]:
    """The markers a test gets: those its fixtures imply, plus ``slow`` when it is (or is marked) spark, cluster
    or crash. ``explicit`` are the markers already on the test."""
    names = {marker for fixture in fixturenames for marker in MARKERS_BY_FIXTURE.get(fixture, ())}
    if (names | explicit) & set(SLOW_MARKERS):
        names.add("slow")
    return names - explicit


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Called by pytest once the tests are collected: adds each test's markers (before ``-m`` selects)."""
    for item in items:
        explicit = {mark.name for mark in item.iter_markers()}
        for name in sorted(markers_for(list(getattr(item, "fixturenames", ())), explicit)):
            item.add_marker(name)
