"""A simple model of lease workers at scale, fitted to the curve's measured points and carried on paper to sizes
nobody ran (10,000 shards over 100 workers by default).

Who calls: :mod:`benchmarks.scale.curve` (the report and the plot) and its unit test. Pure logic: no I/O, no
third-party import. Each figure gets the least-squares fit of the form its mechanism suggests (see ``FORMS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

#: Kinesis's limit on GetRecords calls per shard per second (shared by every consumer of the shard).
GET_RECORDS_LIMIT_PER_SHARD = 5.0
#: The default checkpoint interval of a lease worker, s (``checkpoint_interval_s``).
CHECKPOINT_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Point:
    """One size of the curve: its shards, workers and workers killed, and its measured figures by name."""

    shards: int
    workers: int
    kill: int
    figures: dict[str, float | None]


@dataclass(frozen=True)
class Fit:
    """``y = intercept + slope * x`` where ``x = regressor(point)``; ``through_origin`` fixes ``intercept`` at 0."""

    figure: str
    formula: str
    why: str
    regressor: Callable[[int, int, int], float]
    intercept: float
    slope: float
    points: int

    def at(self, shards: int, workers: int, kill: int) -> float:
        """The model's value at a size."""
        return self.intercept + self.slope * self.regressor(shards, workers, kill)


def least_squares(xs: list[float], ys: list[float], through_origin: bool = False) -> tuple[float, float]:
    """``(intercept, slope)`` minimising the squared error of ``y = intercept + slope * x`` (``intercept`` 0 when
    ``through_origin``). One point (or all at one ``x``) gives a flat line through their mean, or through the origin
    and their mean when ``through_origin``."""
    if len(xs) != len(ys) or not xs:
        raise ValueError(f"least_squares needs as many x as y, at least one (got {len(xs)} and {len(ys)})")
    n = len(xs)
    if through_origin:
        sxx = sum(x * x for x in xs)
        return 0.0, (sum(x * y for x, y in zip(xs, ys)) / sxx if sxx else 0.0)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def _per_worker(shards: int, workers: int, _kill: int) -> float:
    return shards / workers


def _orphans_per_survivor(shards: int, workers: int, kill: int) -> float:
    return shards * kill / workers / (workers - kill)


#: figure -> (formula shown, x of the fit, through the origin?, the mechanism that suggests the form)
FORMS: dict[str, tuple[str, Callable[[int, int, int], float], bool, str]] = {
    "balance_s": ("a + b * shards/worker", _per_worker, False,
                  "processes start and register (a), then each takes its fair share one lease at a time (b each)"),
    "failover_s": ("a + b * orphans/survivor", _orphans_per_survivor, False,
                   "the session timeout and a lease round (a), then each survivor takes its part of the dead "
                   "workers' shards one at a time (b each)"),
    "zk_requests_per_s": ("b * workers", lambda s, w, k: float(w), True,
                          "every worker's lease round reads the leases' generation about once a second, whatever "
                          "the shards"),
    "zk_znodes": ("a + b * shards", lambda s, w, k: float(s), False,
                  "one lease znode and one checkpoint znode per shard (b near 2), plus the workers' and fixed "
                  "nodes (a)"),
    "worker_cpu_pct": ("a + b * shards/worker", _per_worker, False,
                       "a worker's idle loop (a) plus polling each of its idle shards (b each)"),
    "worker_rss_mib": ("a + b * shards/worker", _per_worker, False,
                       "the interpreter and libraries (a) plus each owned shard's reader and buffers (b each)"),
    "get_records_per_s_per_shard": ("a", lambda s, w, k: 0.0, False,
                                    "an idle shard is polled at the idle back-off's pace, whatever the size"),
}


def figures_of(doc: dict[str, Any]) -> dict[str, float | None]:
    """The curve's figures from a scale run's ``figures`` (``scale.json``)."""
    balance, rest, failover = (doc.get(k) or {} for k in ("balance", "rest", "failover"))
    return {"balance_s": balance.get("balanced_s"), "failover_s": failover.get("owned_again_s"),
            "zk_requests_per_s": rest.get("zk_requests_per_s"), "zk_znodes": rest.get("zk_znodes"),
            "worker_cpu_pct": rest.get("worker_cpu_pct_mean"), "worker_rss_mib": rest.get("worker_rss_mib_mean"),
            "get_records_per_s_per_shard": rest.get("get_records_per_s_per_shard")}


def fit(points: list[Point]) -> dict[str, Fit]:
    """Every figure of ``FORMS`` that at least one point measured, fitted to the points that measured it."""
    fits: dict[str, Fit] = {}
    for figure, (formula, regressor, origin, why) in FORMS.items():
        measured = [p for p in points if p.figures.get(figure) is not None]
        if not measured:
            continue
        xs = [regressor(p.shards, p.workers, p.kill) for p in measured]
        ys = [float(p.figures[figure]) for p in measured]  # type: ignore[arg-type]
        intercept, slope = least_squares(xs, ys, through_origin=origin)
        fits[figure] = Fit(figure, formula, why, regressor, intercept, slope, len(measured))
    return fits


def project(fits: dict[str, Fit], shards: int = 10_000, workers: int = 100, kill: int = 25,
            busy_share: float = 1.0, checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S) -> dict[str, float]:
    """The model carried to a size: each fitted figure, and what follows from them on paper (ZooKeeper writes/s
    of checkpoints when ``busy_share`` of the shards get records, GetRecords/s against Kinesis's limit)."""
    if shards < 1 or not 1 <= kill < workers:
        raise ValueError(f"project needs shards >= 1 and 1 <= kill < workers (got {shards}, {workers}, {kill})")
    out = {name: f.at(shards, workers, kill) for name, f in fits.items()}
    out["checkpoint_writes_per_s"] = shards * busy_share / checkpoint_interval_s
    if "get_records_per_s_per_shard" in out:
        out["get_records_per_s_idle"] = out["get_records_per_s_per_shard"] * shards
        out["get_records_share_of_limit"] = out["get_records_per_s_per_shard"] / GET_RECORDS_LIMIT_PER_SHARD
    return out
