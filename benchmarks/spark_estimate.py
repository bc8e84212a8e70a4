"""The Spark benchmark's estimate of what a 100-shard stream would need in ``readMode=executors``, from the costs
per batch it measured on 4 and 16 shards (its notes list the assumptions: see :mod:`benchmarks.bench_spark`).

PURE: numbers in, numbers out. Who calls: ``bench_spark.headline``.
"""

from __future__ import annotations

import statistics
from typing import Any

#: The estimate: shards, records/s each receives (Kinesis' per-shard write limit in records), batches per second
ESTIMATE_SHARDS = 100
ESTIMATE_SHARD_RATE = 1_000
ESTIMATE_BATCHES_PER_S = 1.0


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """``(a, b)`` of ``y = a + b * x`` through the points (least squares); one x only: ``(0, y / x)``, a line
    through the origin (every cost taken as per shard). None without points. PURE."""
    points = [(x, y) for x, y in points if x > 0]
    if not points:
        return None
    xs = {x for x, _ in points}
    if len(xs) == 1:
        x = points[0][0]
        return 0.0, statistics.fmean(y for _, y in points) / x
    mx, my = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def fit_task_and_record(points: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """``(per task, per record)`` with ``cost = tasks * per_task + records * per_record`` (least squares, no
    intercept, both at least 0) from ``(tasks, records, cost)`` points. None without usable points. PURE."""
    points = [p for p in points if p[0] > 0 or p[1] > 0]
    if not points:
        return None
    stt = sum(t * t for t, _, _ in points)
    srr = sum(r * r for _, r, _ in points)
    str_ = sum(t * r for t, r, _ in points)
    stc = sum(t * c for t, _, c in points)
    src = sum(r * c for _, r, c in points)
    det = stt * srr - str_ * str_
    if det > 1e-9 * max(1.0, stt * srr):
        per_task, per_record = (stc * srr - src * str_) / det, (src * stt - stc * str_) / det
        if per_task >= 0 and per_record >= 0:
            return per_task, per_record
    # one of them would be negative (or the points cannot tell them apart): the better of the one-cost fits
    task_only = (stc / stt, 0.0) if stt else (0.0, 0.0)
    record_only = (0.0, src / srr) if srr else (0.0, 0.0)

    def error(fit: tuple[float, float]) -> float:
        return sum((c - t * fit[0] - r * fit[1]) ** 2 for t, r, c in points)

    return min((max(0.0, task_only[0]), 0.0), (0.0, max(0.0, record_only[1])), key=error)


def estimate(rows: list[dict[str, Any]], executors_case: str, driver_case: str) -> dict[str, Any] | None:
    """What a stream of ``ESTIMATE_SHARDS`` shards would need in ``readMode=executors`` (see the module docstring),
    from the measured costs of the rows of ``executors_case`` (and, for comparison, the per-task cost of the rows
    of ``driver_case``). PURE. None when the rows have no costs."""
    mine = [r for r in rows if r["case"] == executors_case and r.get("costs")]
    live = [r for r in mine if r["kind"] == "caught up"]
    points = [(float(c["batches"] * r["shards"]), float(c["records"]), float(c["executor_python_s"]))
              for r in mine for c in r["costs"] if c.get("batches")]
    cpu = fit_task_and_record(points)
    if cpu is None or not live:
        return None
    s, f = ESTIMATE_SHARDS, ESTIMATE_BATCHES_PER_S
    lines = {key: fit_line([(float(r["shards"]), float(r[key]["median"])) for r in live if key in r])
             for key in ("zk_writes_per_batch", "zk_reads_per_batch", "driver_cpu_ms_per_batch")}

    def at(key: str) -> float | None:
        line = lines[key]
        return None if line is None else max(0.0, line[0] + line[1] * s)

    per_task, per_record = cpu
    driver_rows = [r for r in rows if r["case"] == driver_case and r.get("costs")]
    driver_fit = fit_task_and_record([(float(c["batches"] * r["shards"]), float(c["records"]),
                                       float(c["executor_python_s"]))
                                      for r in driver_rows for c in r["costs"] if c.get("batches")])
    writes, reads, driver_ms = at("zk_writes_per_batch"), at("zk_reads_per_batch"), at("driver_cpu_ms_per_batch")
    widest = max(live, key=lambda r: r["shards"])
    measured_rate = statistics.median([c["batches"] / c["seconds"] for c in widest["costs"] if c["seconds"] > 0]
                                      or [f])
    # the checkpoint copies are written at most once per shard and second: batches faster than that carried a share
    extra_checkpoints = s * max(0.0, 1.0 - min(1.0, 1.0 / max(measured_rate, 1e-9))) if measured_rate > f else 0.0
    return {"shards": s, "records_per_s_per_shard": ESTIMATE_SHARD_RATE, "batches_per_s": f,
            "executor_cores": s * f * per_task + s * ESTIMATE_SHARD_RATE * per_record,
            "cpu_ms_per_task": per_task * 1000, "cpu_us_per_record": per_record * 1e6,
            "records_per_cpu_s": 1 / per_record if per_record else None, "fit_points": len(points),
            "driver_mode_cpu_ms_per_task": None if driver_fit is None else driver_fit[0] * 1000,
            "zk_writes_per_s": None if writes is None else writes * f,
            "zk_writes_per_s_up_to": None if writes is None else writes * f + extra_checkpoints * f,
            "zk_reads_per_s": None if reads is None else reads * f,
            "driver_cpu_ms_per_batch": driver_ms,
            "measured_batches_per_s": measured_rate}
