"""The queue order for pytest-xdist's worksteal (tests/worker_plan.py): pure logic, no pytest run."""

from __future__ import annotations

from worker_plan import DEFAULT_FAST_S, DEFAULT_SLOW_S, chunk_sizes, cost_of, plan

KNOWN = {
    "tests/b/test_bench.py": 30.0,  # a module-scoped fixture's cost spread over its tests
    "tests/s/test_spark.py::test_long": 100.0,
    "tests/s/test_spark.py::test_mid": 40.0,
    "tests/s/test_crash.py::test_kills[one]": 60.0,
}


def test_a_cost_comes_from_the_longest_key_that_is_the_node_id_or_a_prefix_at_a_boundary() -> None:
    assert cost_of("tests/b/test_bench.py::test_x", True, KNOWN) == 30.0
    assert cost_of("tests/s/test_spark.py::test_long[a-b]", True, KNOWN) == 100.0
    assert cost_of("tests/s/test_crash.py::test_kills[one]", True, KNOWN) == 60.0
    assert cost_of("tests/s/test_spark.py::test_longer", True, KNOWN) == DEFAULT_SLOW_S  # not test_long's
    assert cost_of("tests/s/test_spark.py::test_other", False, KNOWN) == DEFAULT_FAST_S


def test_chunks_are_the_shares_worksteal_hands_idle_workers_at_the_start() -> None:
    assert chunk_sizes(5, 2) == [2, 3]
    assert chunk_sizes(1000, 2) == [500, 500]
    assert chunk_sizes(10, 3) == [3, 3, 4]
    assert chunk_sizes(7, 1) == [7]


def test_slow_tests_are_dealt_to_both_chunks_longest_first_and_quick_tests_fill_them() -> None:
    quick = [f"tests/u/test_q.py::test_{i}" for i in range(10)]
    long, mid = "tests/s/test_spark.py::test_long", "tests/s/test_spark.py::test_mid"
    kill = "tests/s/test_crash.py::test_kills[one]"
    other = "tests/s/test_spark.py::test_new"
    ids = [quick[0], mid, other, *quick[1:5], kill, long, *quick[5:]]
    order = plan(ids, {long, mid, kill, other}, {}, workers=2, known=KNOWN)
    first, second = order[:7], order[7:]  # 14 tests: 7 each
    assert first[:2] == [long, other] and second[:2] == [kill, mid]  # 100 + 10 | 60 + 40 (a tie goes first)
    assert first[2:] == quick[:5] and second[2:] == quick[5:]
    assert sorted(order) == sorted(ids)


def test_the_tests_of_a_module_scoped_fixture_stay_in_one_chunk_in_their_order() -> None:
    bench = [f"tests/b/test_bench.py::test_{name}" for name in ("c", "a", "b")]  # 90 s together
    long = "tests/s/test_spark.py::test_long"
    quick = [f"tests/u/test_q.py::test_{i}" for i in range(6)]
    ids = [*bench, long, *quick]
    together = {node_id: "tests/b/test_bench.py" for node_id in bench}
    order = plan(ids, {*bench, long}, together, workers=2, known=KNOWN)
    assert order[:5] == [long, *quick[:4]] and order[5:8] == bench and order[8:] == quick[4:]


def test_one_worker_runs_the_slow_tests_longest_first_then_the_rest_in_collection_order() -> None:
    quick = ["tests/u/test_q.py::test_0", "tests/u/test_q.py::test_1"]
    long, mid = "tests/s/test_spark.py::test_long", "tests/s/test_spark.py::test_mid"
    assert plan([quick[0], mid, quick[1], long], {long, mid}, {}, workers=1, known=KNOWN) == [long, mid, *quick]
