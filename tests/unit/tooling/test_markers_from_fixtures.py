"""Tests are marked with what they need (tests/conftest.py), so `-m` selects them: a collection, no server started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SPARK_TEST = "tests/integration/spark/test_spark_source.py::test_a_stream_that_does_not_exist_fails_at_load_naming_it"
ZOOKEEPER_TEST = "tests/integration/zookeeper/test_zookeeper_store.py::test_save_load_list_delete"
PURE_TEST = "tests/unit/core/test_tracker_checkpoints.py::test_nothing_emitted_checkpoint_is_initial"
CRASH_TEST = "tests/integration/spout/test_crash.py::test_sigkill_and_restart_lose_nothing"

#: Collects the node ids given in argv, then prints each collected test's markers as JSON (no test runs).
COLLECT = """
import json, sys, pytest

class Markers:
    def pytest_collection_finish(self, session):
        self.found = {item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in session.items}

markers = Markers()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[markers])
print("MARKERS=" + json.dumps(getattr(markers, "found", {"exit": int(code)})))
"""


def markers_of(*node_ids: str) -> dict[str, set[str]]:
    """The markers pytest gives each test (parametrized ones under their function's node id)."""
    result = subprocess.run([sys.executable, "-c", COLLECT, *node_ids], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.startswith("MARKERS=")]
    assert lines, result.stdout + result.stderr
    found: dict[str, set[str]] = {}
    for node_id, names in json.loads(lines[0].removeprefix("MARKERS=")).items():
        found.setdefault(node_id.split("[")[0], set()).update(names)
    return found


def test_tests_are_marked_with_the_servers_their_fixtures_start_and_spark_and_crash_are_slow() -> None:
    found = markers_of(SPARK_TEST, ZOOKEEPER_TEST, PURE_TEST, CRASH_TEST)
    assert {"spark", "slow", "emulators"} <= found[SPARK_TEST]
    assert {"zookeeper"} <= found[ZOOKEEPER_TEST] and "slow" not in found[ZOOKEEPER_TEST]
    assert {"crash", "slow", "zookeeper", "emulators"} <= found[CRASH_TEST]
    assert not found[PURE_TEST] & {"spark", "slow", "zookeeper", "emulators", "crash", "cluster"}
