"""The Spark curve: points read from small run documents shaped as ``python -m benchmarks.scale.spark`` writes them,
least squares recovers the forms they were made from, the 10,000-shard projection follows at the stated load, and
the report states its assumptions. Pure logic: no Spark, no server, no matplotlib."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale.spark_curve import PAPER, fit_all, markdown, points_of, project  # noqa: E402


def _size(shards: int) -> dict[str, Any]:
    """One size's executor runs, every figure made exactly from a known form."""
    busy, records = max(1, shards // 16), 400.0
    tasks = math.ceil(busy / 32)
    caught_up = {"busy_shards": busy, "shards_with_records_per_batch": float(busy), "records_per_batch": records,
                 "latest_offset_ms_p50": 20 + 0.1 * shards, "zk_requests_per_batch": 1.0 + 4.0 * tasks,
                 "zk_writes_per_batch": 1.0 + 3.0 * tasks,
                 "executor_python_us_per_record": 120 + 8000 * busy / records,
                 "raw": {"seconds": 20.0, "driver_python_s": 20.0 * (0.05 + 0.0001 * shards)}}
    backlog = {"shards_with_records_per_batch": float(shards), "records_per_batch": 20.0 * shards,
               "zk_writes_per_batch": 8 + 0.5 * shards, "executor_python_ms_per_task": 7.0}
    return {"shards": shards, "load_before": [3.0], "backlog": {"executors": backlog, "driver": {}},
            "caught_up": {"executors": caught_up, "driver": {}}}


def _docs() -> list[dict[str, Any]]:
    early = {"command": "first", "sizes": [_size(16), {**_size(64), "caught_up": {"driver": {}}}]}
    return [early, {"command": "second", "sizes": [_size(64), _size(256)]}, {"sizes": [_size(1024)]}]


def test_points_are_read_per_size_the_later_run_kept_and_runs_without_executor_reads_skipped() -> None:
    points = points_of(_docs())
    assert [p["shards"] for p in points] == [16, 64, 256, 1024]
    assert points[1]["command"] == "second"
    assert points[3]["figures"]["driver_cores"] == pytest.approx(0.05 + 0.1024)
    assert points[3]["loads"]["caught_up"] == {"shards": 1024.0, "busy": 64.0, "read": 64.0, "records": 400.0}


def test_the_fit_recovers_each_form_and_the_projection_follows_at_the_stated_load() -> None:
    fits = fit_all(points_of(_docs()))
    expected = {"planning_ms": (20, 0.1), "driver_cores": (0.05, 0.0001), "zk_requests": (1, 4),
                "zk_writes": (1, 3), "zk_writes_backlog": (8, 0.5), "executor_us_per_record": (120, 8000)}
    for name, (a, b) in expected.items():
        assert (fits[name]["a"], fits[name]["b"]) == pytest.approx((a, b)), name
        assert fits[name]["worst"] == pytest.approx(0, abs=1e-6), name
    paper = project(fits, shards=10_000, busy_share=1 / 16, batches_per_s=2.0, records_per_s=100_000)
    assert (paper["busy_shards"], paper["tasks"]) == (625, 20)
    assert paper["zk_requests_per_s"] == pytest.approx((1 + 4 * 20) * 2)
    assert paper["zk_writes_per_s_all_busy"] == pytest.approx((8 + 0.5 * 10_000) * 2)
    assert paper["planning_ms"] == pytest.approx(20 + 0.1 * 10_000)
    per_record = 120 + 8000 * 625 / 50_000  # 50,000 records a batch at 2 batches a second
    assert paper["executor_cores"] == pytest.approx(100_000 * per_record / 1e6)


def test_a_figure_no_run_measured_is_not_modelled_and_the_report_says_so() -> None:
    docs = _docs()
    for doc in docs:
        for size in doc["sizes"]:
            size["caught_up"].get("executors", {}).pop("raw", None)
    points = points_of(docs)
    fits = fit_all(points)
    assert "driver_cores" not in fits
    curve = {"command": "python -m benchmarks.scale.spark_curve", "sources": ["a.json"], "assumptions": dict(PAPER),
             "points": points, "model": fits, "projection": {"shards": 10_000, **project(fits)}}
    report = markdown(curve)
    assert "| driver Python CPU, cores | not measured |" in report
    assert "## On paper: 10,000 shards with executor reads" in report
    assert "Assumptions: 1 batch a second" in report and "no RSS" in report


def test_a_projection_at_an_impossible_load_is_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"0 < busy_share <= 1.*got 10000, 1.5"):
        project({}, shards=10_000, busy_share=1.5)
