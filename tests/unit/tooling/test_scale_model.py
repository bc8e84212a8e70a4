"""The scale curve's model: least squares on fixed points recovers the coefficients they were made from, the
projection follows from them, and ``--curve``'s sizes are parsed with a clear error on bad input. Pure logic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale.curve import curve_sizes  # noqa: E402
from benchmarks.scale.model import Point, fit, least_squares, project  # noqa: E402


def _points() -> list[Point]:
    """Figures made exactly from known forms at the curve's sizes (16/2/1, 64/2/1, 256/4/1, 1024/16/4)."""
    points = []
    for shards, workers, kill in ((16, 2, 1), (64, 2, 1), (256, 4, 1), (1024, 16, 4)):
        per_worker, polls = shards / workers, min(5.0, 1200 / shards)
        points.append(Point(shards, workers, kill, {
            "register_s": 1.5 * workers, "take_s": 5.0 + 0.4 * per_worker,
            "failover_s": 4.0 + 0.1 * shards * kill / workers / (workers - kill),
            "zk_requests_per_s": 2.5 * workers, "zk_znodes": 10 + 2 * shards,
            "worker_cpu_pct": 1.0 + 0.09 * polls * per_worker, "worker_rss_mib": 50.0 + 0.05 * per_worker,
            "get_records_per_s_per_shard": polls}))
    return points


def test_least_squares_fits_a_line_and_a_line_through_the_origin() -> None:
    assert least_squares([1, 2, 3], [3, 5, 7]) == pytest.approx((1.0, 2.0))
    assert least_squares([1, 2, 4], [2.5, 5, 10], through_origin=True) == pytest.approx((0.0, 2.5))
    assert least_squares([3, 3], [1, 2]) == pytest.approx((1.5, 0.0))  # one x: a flat line through the mean


def test_the_fit_recovers_each_figures_coefficients_and_the_projection_follows() -> None:
    fits = fit(_points())
    assert fits["register_s"].slope == pytest.approx(1.5)
    assert (fits["take_s"].intercept, fits["take_s"].slope) == pytest.approx((5.0, 0.4))
    assert fits["take_s"].worst == pytest.approx(0.0, abs=1e-9)
    assert (fits["failover_s"].intercept, fits["failover_s"].slope) == pytest.approx((4.0, 0.1))
    assert fits["zk_requests_per_s"].slope == pytest.approx(2.5)
    assert (fits["zk_znodes"].intercept, fits["zk_znodes"].slope) == pytest.approx((10.0, 2.0))
    assert (fits["worker_cpu_pct"].intercept, fits["worker_cpu_pct"].slope) == pytest.approx((1.0, 0.09))
    gets = fits["get_records_per_s_per_shard"]
    assert (gets.intercept, gets.slope) == pytest.approx((5.0, 1200.0))
    assert gets.at(2048, 32, 8) == pytest.approx(1200 / 2048)  # the emulator's calls shared out
    assert project(fits, shards=2048, workers=32, kill=8, emulator=True)["get_records_per_s_idle"] == \
        pytest.approx(1200.0)
    paper = project(fits, shards=10_000, workers=100, kill=25, busy_share=0.5)  # Kinesis: 5/s per idle shard
    assert paper["zk_requests_per_s"] == pytest.approx(250.0)
    assert paper["balance_s"] == pytest.approx(1.5 * 100 + 5.0 + 0.4 * 100)
    assert paper["zk_znodes"] == pytest.approx(20_010.0)
    assert paper["worker_rss_mib"] == pytest.approx(55.0)
    assert paper["checkpoint_writes_per_s"] == pytest.approx(5_000.0)
    assert paper["get_records_per_s_idle"] == pytest.approx(50_000.0)
    assert paper["get_records_share_of_limit"] == pytest.approx(1.0)
    assert paper["worker_cpu_pct"] == pytest.approx(1.0 + 0.09 * 500)


def test_curve_sizes_scale_workers_with_shards_and_reject_bad_input() -> None:
    assert curve_sizes("256, 16,64") == [(16, 2, 1), (64, 2, 1), (256, 4, 1)]
    assert curve_sizes("1024") == [(1024, 16, 4)]
    for bad in ("16,lots", "", "0,16"):
        with pytest.raises(ValueError, match="e.g. 16,64,256"):
            curve_sizes(bad)
