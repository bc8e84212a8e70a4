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


#: x of a fit from a size and the GetRecords calls/s per shard at that size: (shards, workers, kill, polls) -> x.
Regressor = Callable[[int, int, int, float], float]


@dataclass(frozen=True)
class Fit:
    """``y = intercept + slope * x`` where ``x = regressor(shards, workers, kill, polls)``; for the GetRecords
    figure (``ceiling``) ``y = min(intercept, slope / shards)``: each shard polled at ``intercept`` until the
    endpoint's ``slope`` calls/s in all are shared out."""

    figure: str
    formula: str
    why: str
    regressor: Regressor
    intercept: float
    slope: float
    points: int
    ceiling: bool = False
    worst: float = 0.0  # the largest |measured - model| over the points fitted

    def at(self, shards: int, workers: int, kill: int, polls: float | None = None) -> float:
        """The model's value at a size; ``polls`` (GetRecords/s per shard) where the form needs it."""
        if self.ceiling:
            return min(self.intercept, self.slope / shards)
        return self.intercept + self.slope * self.regressor(shards, workers, kill, polls or 0.0)


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


def _per_worker(shards: int, workers: int, _kill: int, _polls: float) -> float:
    return shards / workers


def _orphans_per_survivor(shards: int, workers: int, kill: int, _polls: float) -> float:
    return shards * kill / workers / (workers - kill)


def _polls_per_worker(shards: int, workers: int, _kill: int, polls: float) -> float:
    return polls * shards / workers


#: figure -> (formula shown, x of the fit, through the origin?, the mechanism that suggests the form)
FORMS: dict[str, tuple[str, Regressor, bool, str]] = {
    "register_s": ("b * workers", lambda s, w, k, g: float(w), True,
                   "the worker processes start and register one after another on the machine's cores (b each)"),
    "take_s": ("a + b * shards/worker", _per_worker, False,
               "once registered, the group settling and a lease round (a), then each worker takes its share (the "
               "takes go to ZooKeeper together) and starts its shards, its rounds sharing a thread with the shard "
               "listing (b each)"),
    "failover_s": ("a + b * orphans/survivor", _orphans_per_survivor, False,
                   "the session timeout and a lease round (a), then each survivor takes its part of the dead "
                   "workers' shards (together) and starts their readers one after another (b each)"),
    "zk_requests_per_s": ("b * workers", lambda s, w, k, g: float(w), True,
                          "every worker's lease round reads the leases' generation about once a second, whatever "
                          "the shards"),
    "zk_znodes": ("a + b * shards", lambda s, w, k, g: float(s), False,
                  "one lease znode and one checkpoint znode per shard (b near 2), plus the workers' and fixed "
                  "nodes (a)"),
    "worker_cpu_pct": ("a + b * GetRecords/s per worker", _polls_per_worker, False,
                       "a worker's idle loop (a) plus each GetRecords call it makes on its idle shards (b each)"),
    "worker_rss_mib": ("a + b * shards/worker", _per_worker, False,
                       "the interpreter and libraries (a) plus each owned shard's reader and buffers (b each)"),
    "get_records_per_s_per_shard": ("min(a, b / shards)", lambda s, w, k, g: 0.0, False,
                                    "an idle shard is polled every poll interval (a, at most 5/s) until the "
                                    "endpoint's throughput (b calls/s in all) is shared out"),
}


def figures_of(doc: dict[str, Any]) -> dict[str, float | None]:
    """The curve's figures from a scale run's ``figures`` (``scale.json``)."""
    balance, rest, failover = (doc.get(k) or {} for k in ("balance", "rest", "failover"))
    registered, balanced = balance.get("all_registered_s"), balance.get("balanced_s")
    return {"balance_s": balanced, "register_s": registered,
            "take_s": None if registered is None or balanced is None else round(max(0.0, balanced - registered), 2),
            "failover_s": failover.get("owned_again_s"),
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
        ys = [float(p.figures[figure]) for p in measured]  # type: ignore[arg-type]
        if figure == "get_records_per_s_per_shard":  # the highest rate per shard, the highest total
            rate, total = max(ys), max(y * p.shards for y, p in zip(ys, measured))
            worst = max(abs(y - min(rate, total / p.shards)) for y, p in zip(ys, measured))
            fits[figure] = Fit(figure, formula, why, regressor, rate, total, len(measured), ceiling=True, worst=worst)
            continue
        polls = [p.figures.get("get_records_per_s_per_shard") or 0.0 for p in measured]
        xs = [regressor(p.shards, p.workers, p.kill, g) for p, g in zip(measured, polls)]
        intercept, slope = least_squares(xs, ys, through_origin=origin)
        worst = max(abs(y - intercept - slope * x) for x, y in zip(xs, ys))
        fits[figure] = Fit(figure, formula, why, regressor, intercept, slope, len(measured), worst=worst)
    return fits


def model_at(fits: dict[str, Fit], figure: str, shards: int, workers: int, kill: int,
             polls: float | None = None) -> float | None:
    """A figure's model value at a size (``balance_s`` is start-up plus taking the leases), None if not fitted."""
    if figure == "balance_s":
        parts = [fits.get("register_s"), fits.get("take_s")]
        return sum(f.at(shards, workers, kill, polls) for f in parts if f) if all(parts) else None
    return fits[figure].at(shards, workers, kill, polls) if figure in fits else None


def project(fits: dict[str, Fit], shards: int = 10_000, workers: int = 100, kill: int = 25,
            busy_share: float = 1.0, checkpoint_interval_s: float = CHECKPOINT_INTERVAL_S,
            emulator: bool = False) -> dict[str, float]:
    """The model carried to a size: each fitted figure, and what follows from them on paper (ZooKeeper writes/s
    of checkpoints when ``busy_share`` of the shards get records, GetRecords/s against Kinesis's limit). Against
    Kinesis (``emulator`` false) nothing shares out the calls: each idle shard is polled at the fitted rate per
    shard, not bounded by the emulator's total, and a worker's CPU follows."""
    if shards < 1 or not 1 <= kill < workers:
        raise ValueError(f"project needs shards >= 1 and 1 <= kill < workers (got {shards}, {workers}, {kill})")
    gets = fits.get("get_records_per_s_per_shard")
    polls = (gets.at(shards, workers, kill) if emulator else gets.intercept) if gets else None
    out = {name: f.at(shards, workers, kill, polls) for name, f in fits.items()}
    balance = model_at(fits, "balance_s", shards, workers, kill, polls)
    if balance is not None:
        out["balance_s"] = balance
    out["checkpoint_writes_per_s"] = shards * busy_share / checkpoint_interval_s
    if polls is not None:
        out["get_records_per_s_per_shard"] = polls
        out["get_records_per_s_idle"] = polls * shards
        out["get_records_per_s_per_worker"] = polls * shards / workers
        out["get_records_share_of_limit"] = polls / GET_RECORDS_LIMIT_PER_SHARD
    return out


#: Shards per worker of the curve's sizes (at least 2 workers), and the share of them killed (at least 1).
SHARDS_PER_WORKER = 64
KILLED_SHARE = 4
#: (figure, label, unit) of the report's table and the plot's panels, in order.
FIGURES = [("balance_s", "balanced", "s"), ("register_s", "of which start-up: all registered", "s"),
           ("take_s", "of which taking leases", "s"), ("failover_s", "failover: owned again", "s"),
           ("zk_requests_per_s", "ZooKeeper requests/s at rest", "/s"), ("zk_znodes", "ZooKeeper znodes", ""),
           ("worker_cpu_pct", "worker CPU % at rest", "%"), ("worker_rss_mib", "worker RSS at rest", "MiB"),
           ("get_records_per_s_per_shard", "GetRecords/s per idle shard", "/s")]


def size_of(shards: int) -> tuple[int, int, int]:
    """``(shards, workers, kill)`` of a curve point: one worker per 64 shards (at least 2), a quarter killed."""
    workers = max(2, shards // SHARDS_PER_WORKER)
    return shards, workers, max(1, workers // KILLED_SHARE)
