"""Small statistics for noisy timings: the median of several runs and their spread, and a wall/CPU stopwatch."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Sequence


def summary(values: Sequence[float], digits: int = 4) -> dict[str, object]:
    """``{"median", "min", "max", "spread_pct", "runs"}`` of the runs of one figure.

    Who calls: every benchmark, for each figure it reports. ``spread_pct`` is ``(max - min) / median`` in percent:
    how much the runs disagree (the machine is shared, so it is never 0).
    """
    if not values:
        raise ValueError("summary of no runs")
    med = statistics.median(values)
    spread = (max(values) - min(values)) / med * 100 if med else 0.0
    return {"median": _round(med, digits), "min": _round(min(values), digits), "max": _round(max(values), digits),
            "spread_pct": round(spread, 1), "runs": [_round(v, digits) for v in values]}


def median_of(figure: object) -> float:
    """The median of a figure made by :func:`summary` (or the number itself)."""
    if isinstance(figure, dict):
        return float(figure["median"])  # type: ignore[arg-type]
    return float(figure)  # type: ignore[arg-type]


def ratio(numerator: object, denominator: object) -> float | None:
    """The ratio of two figures' medians, rounded; None when the denominator is 0."""
    den = median_of(denominator)
    return round(median_of(numerator) / den, 3) if den else None


def _round(value: float, digits: int) -> float:
    """Round to ``digits`` significant digits (timings carry no more information than that)."""
    if value == 0 or not isinstance(value, float):
        return value
    return float(f"{value:.{digits}g}")


@dataclass
class Stopwatch:
    """Wall-clock and process CPU time between ``start()`` and ``stop()``.

    CPU time is the whole process's (all threads): the consumer's own cost, as the servers run in other processes.
    """

    wall_s: float = 0.0
    cpu_s: float = 0.0
    _wall0: float = 0.0
    _cpu0: float = 0.0

    def start(self) -> "Stopwatch":
        self._wall0 = time.perf_counter()
        self._cpu0 = time.process_time()
        return self

    def elapsed(self) -> float:
        """Wall-clock seconds since ``start()``, without stopping."""
        return time.perf_counter() - self._wall0

    def stop(self) -> "Stopwatch":
        self.wall_s = time.perf_counter() - self._wall0
        self.cpu_s = time.process_time() - self._cpu0
        return self
