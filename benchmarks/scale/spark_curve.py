"""The Spark curve: the committed ``readMode=executors`` points of ``python -m benchmarks.scale.spark`` (16, 64,
256 and 1,024 shards) read back, a simple model fitted per figure, carried on paper to 10,000 shards, and written as
``scale-spark-curve.md``, ``.json`` and ``.png`` (``python -m benchmarks.scale.spark_curve``; no Spark run).

Who calls: ``make scale-curve`` and its unit test (:func:`points_of`, :func:`fit_all`, :func:`project`,
:func:`markdown` are pure). Each fit is :func:`benchmarks.scale.model.least_squares` on the form in ``FORMS``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from benchmarks.machine import ROOT
from benchmarks.report import table, write_atomically, write_json
from benchmarks.scale.model import least_squares

RESULTS = ROOT / "benchmarks" / "results"
#: The committed runs read, in order; a size measured twice is taken from the later file.
SOURCES = ("scale-spark-16-64.json", "scale-spark.json", "scale-spark-1024.json")
DOCS_PLOT = ROOT / "docs" / "assets" / "scale-spark-curve.png"
#: ``shardsPerTask``'s default: a caught-up batch reads its busy shards in tasks of up to this many.
SHARDS_PER_TASK = 32
#: What the model is carried to, and the load it is carried at (each stated in the report).
PAPER = {"shards": 10_000, "busy_share": 1 / 16, "batches_per_s": 1.0, "records_per_s": 100_000}

#: A point's load: shards, busy (shards with records per caught-up batch), records and shards read per batch.
Load = dict[str, float]


def _tasks(load: Load) -> float:
    return float(math.ceil(load["busy"] / SHARDS_PER_TASK))


def _shards(load: Load) -> float:
    return load["shards"]


def _shards_per_record(load: Load) -> float:
    return load["read"] / load["records"] if load["records"] else 0.0


@dataclass(frozen=True)
class Form:
    """A figure's model ``y = a + b * x(load)``: where it is measured, its unit and the mechanism behind it."""

    label: str
    unit: str
    phase: str  # "caught_up" or "backlog": the run of executor reads the figure is taken from
    key: str  # the figure's name in the run's JSON
    formula: str
    x: Callable[[Load], float]
    why: str


FORMS: dict[str, Form] = {
    "planning_ms": Form("driver planning per batch (latestOffset p50)", "ms", "caught_up", "latest_offset_ms_p50",
                        "a + b * shards", _shards,
                        "the batch's ZooKeeper reads (a) and the ends of every shard gathered (b each)"),
    "driver_cores": Form("driver Python CPU, caught up", "cores", "caught_up", "driver_cores",
                         "a + b * shards", _shards,
                         "the batches' planning (a) and each shard's idle probes, at most one per 2 s (b each)"),
    "zk_requests": Form("ZooKeeper requests per caught-up batch", "", "caught_up", "zk_requests_per_batch",
                        f"a + b * ceil(busy shards / {SHARDS_PER_TASK})", _tasks,
                        "the batch's node and offsets (a), then each task's node of its shards' ends (b each)"),
    "zk_writes": Form("ZooKeeper writes per caught-up batch", "", "caught_up", "zk_writes_per_batch",
                      f"a + b * ceil(busy shards / {SHARDS_PER_TASK})", _tasks,
                      "the batch's own writes (a), then each task's node (b each)"),
    "zk_writes_backlog": Form("ZooKeeper writes per backlog batch (every shard with records)", "", "backlog",
                              "zk_writes_per_batch", "a + b * shards", _shards,
                              "the batch's own writes (a), then each shard read, a task each in a backlog (b)"),
    "executor_us_per_record": Form("executor Python CPU per record, caught up", "µs", "caught_up",
                                   "executor_python_us_per_record", "a + b * shards read / records",
                                   _shards_per_record,
                                   "each record (a µs) plus each shard read's fixed cost spread over its records "
                                   "(b µs per shard read)"),
}


def _load(run: dict[str, Any], shards: int) -> Load:
    return {"shards": float(shards), "busy": float(run.get("busy_shards") or run["shards_with_records_per_batch"]),
            "read": float(run["shards_with_records_per_batch"]), "records": float(run["records_per_batch"])}


def _driver_cores(run: dict[str, Any]) -> float | None:
    """The driver's Python CPU over a run's window, in cores (CPU seconds a second)."""
    raw = run.get("raw") or {}
    seconds, cpu = raw.get("seconds"), raw.get("driver_python_s")
    return cpu / seconds if cpu is not None and seconds else None


def points_of(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each size's ``readMode=executors`` figures (and load) from runs of ``python -m benchmarks.scale.spark``,
    smallest first; a size in several documents is taken from the last."""
    sizes: dict[int, dict[str, Any]] = {}
    for doc in docs:
        for size in doc.get("sizes", []):
            found = {phase: (size.get(phase) or {}).get("executors") for phase in ("backlog", "caught_up")}
            if not all(found.values()):
                continue
            runs: dict[str, dict[str, Any]] = {phase: {**run, "driver_cores": _driver_cores(run)}
                                               for phase, run in found.items() if run}
            shards = int(size["shards"])
            figures = {name: runs[form.phase].get(form.key) for name, form in FORMS.items()}
            figures["executor_ms_per_shard_read_backlog"] = runs["backlog"].get("executor_python_ms_per_task")
            sizes[shards] = {"shards": shards, "command": doc.get("command"), "finished": doc.get("finished"),
                             "load_before": size.get("load_before"), "figures": figures,
                             "loads": {phase: _load(run, shards) for phase, run in runs.items()}}
    return [sizes[s] for s in sorted(sizes)]


def fit_all(points: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every figure of ``FORMS`` measured at some point, fitted by least squares: ``{a, b, points, worst}``."""
    fits = {}
    for name, form in FORMS.items():
        measured = [p for p in points if p["figures"].get(name) is not None]
        if not measured:
            continue
        xs = [form.x(p["loads"][form.phase]) for p in measured]
        ys = [float(p["figures"][name]) for p in measured]
        a, b = least_squares(xs, ys)
        fits[name] = {"formula": form.formula, "a": a, "b": b, "points": len(measured),
                      "worst": max(abs(y - a - b * x) for x, y in zip(xs, ys)), "why": form.why}
    return fits


def model(fits: dict[str, dict[str, Any]], name: str, load: Load) -> float | None:
    """A figure's model value at a load, None when it was not fitted."""
    f = fits.get(name)
    return None if f is None else f["a"] + f["b"] * FORMS[name].x(load)


def paper_load(shards: int, busy_share: float, batches_per_s: float, records_per_s: float) -> Load:
    """The load of a caught-up batch on paper: ``busy_share`` of the shards with records, each read once a batch."""
    busy = max(1.0, round(shards * busy_share))
    return {"shards": float(shards), "busy": busy, "read": busy, "records": records_per_s / batches_per_s}


def project(fits: dict[str, dict[str, Any]], shards: int = PAPER["shards"], busy_share: float = PAPER["busy_share"],
            batches_per_s: float = PAPER["batches_per_s"],
            records_per_s: float = PAPER["records_per_s"]) -> dict[str, float | None]:
    """The model carried to ``shards`` at the stated load: per batch, per second, and the cores that follow."""
    if shards < 1 or not 0 < busy_share <= 1 or batches_per_s <= 0 or records_per_s < 0:
        raise ValueError("project needs shards >= 1, 0 < busy_share <= 1, batches_per_s > 0 and records_per_s >= 0 "
                         f"(got {shards}, {busy_share}, {batches_per_s}, {records_per_s})")
    load = paper_load(shards, busy_share, batches_per_s, records_per_s)
    out: dict[str, float | None] = {name: model(fits, name, load) for name in FORMS}
    out |= {"busy_shards": load["busy"], "tasks": _tasks(load), "records_per_batch": load["records"]}

    def per_s(value: float | None) -> float | None:
        return None if value is None else value * batches_per_s

    out["zk_requests_per_s"] = per_s(out["zk_requests"])
    out["zk_writes_per_s"] = per_s(out["zk_writes"])
    out["zk_writes_per_s_all_busy"] = per_s(out["zk_writes_backlog"])
    per_record = out["executor_us_per_record"]
    out["executor_cores"] = None if per_record is None else records_per_s * per_record * 1e-6
    return out


def _num(value: Any) -> str:
    if value is None:
        return "not measured"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.4g}"


def markdown(curve: dict[str, Any]) -> str:
    """The report: the measured points, the model, the 10,000-shard column and its assumptions."""
    points, fits, paper, stated = curve["points"], curve["model"], curve["projection"], curve["assumptions"]
    names = list(FORMS) + ["executor_ms_per_shard_read_backlog"]
    labels = {name: f"{f.label} ({f.unit})" if f.unit else f.label for name, f in FORMS.items()}
    labels["executor_ms_per_shard_read_backlog"] = "executor Python CPU per shard read, backlog (ms)"
    lines = ["# Scale: the Spark curve (executor reads)", "",
             "`readMode=executors` on the 3-node cluster at each size, read from the committed runs (no Spark run "
             "here): " + ", ".join(f"`{s}`" for s in curve["sources"]) + ". Made by `" + curve["command"] + "`.", ""]
    lines += table(["figure"] + [f"{p['shards']:,} shards" for p in points],
                   [[labels[n]] + [_num(p["figures"].get(n)) for p in points] for n in names])
    lines += ["", "Busy shards per caught-up batch: " + ", ".join(
        f"{p['loads']['caught_up']['busy']:g} of {p['shards']:,}" for p in points) + "; load average before: "
        + ", ".join(f"{(p.get('load_before') or ['?'])[0]}" for p in points) + ".", ""]
    lines += ["## The model (least squares on the measured points)", ""]
    lines += table(["figure", "form", "a", "b", "points", "worst miss", "why this form"],
                   [[labels[n], f["formula"], _num(f["a"]), _num(f["b"]), str(f["points"]), _num(f["worst"]),
                     f["why"]] for n, f in fits.items()])
    shards = paper["shards"]
    lines += ["", f"## On paper: {shards:,} shards with executor reads", ""]
    rows = [["busy shards per batch, tasks of them", f"{_num(paper['busy_shards'])}, {_num(paper['tasks'])}"],
            ["ZooKeeper requests/s, caught up", _num(paper["zk_requests_per_s"])],
            ["ZooKeeper writes/s, caught up", _num(paper["zk_writes_per_s"])],
            ["ZooKeeper writes/s, every shard with records (backlog form)", _num(paper["zk_writes_per_s_all_busy"])],
            ["driver planning per batch, ms", _num(paper["planning_ms"])],
            ["driver Python CPU, cores", _num(paper["driver_cores"])],
            ["executor Python CPU per record, µs", _num(paper["executor_us_per_record"])],
            [f"executor cores for {_num(stated['records_per_s'])} records/s", _num(paper["executor_cores"])],
            ["driver and executor memory", "not measured: the Spark runs record no RSS"]]
    lines += table(["", "model"], rows)
    loads = [p["load_before"][0] for p in points if p.get("load_before")]
    multi = sum(1 for p in points if _tasks(p["loads"]["caught_up"]) > 1)
    at = f"load averages of {min(loads):.0f} to {max(loads):.0f} before the runs" if loads else "unknown load"
    lines += ["", f"Assumptions: {stated['batches_per_s']:g} batch a second (a 1 s trigger that keeps up); "
              f"{stated['busy_share']:.2%} of the shards with records in a caught-up batch (one in "
              f"{1 / stated['busy_share']:g}, as in the runs), read in tasks of {SHARDS_PER_TASK} "
              f"(`shardsPerTask`'s default); {_num(stated['records_per_s'])} records/s in all, spread over the busy "
              "shards; the forms above hold beyond 1,024 shards (one ZooKeeper ensemble, one driver, no new "
              "bottleneck); CPU is Python CPU only (the JVM's is not modelled), measured on a loaded 2-core machine "
              "where three nodes share the cores, so a figure stands for the work, not for a dedicated core's time; "
              f"the fits have {len(points)} points each, taken at {at}: read them as orders of magnitude. The "
              f"ZooKeeper forms per task rest on the points with more than one task ({multi} here). The driver's "
              "CPU at 1,024 shards is held down by the emulator (kinesalite, shared by the idle probes, answers "
              "them late): against Kinesis every idle shard is probed once per `maxEmptyRecordBackoffS` (2 s), so "
              "read the driver's cores as a lower bound. A backlog batch of the runs had a task per shard (the "
              "backlog form of ZooKeeper writes). Not in the runs: memory (no RSS of the driver or the executors "
              "is recorded) and a real Kinesis endpoint.", ""]
    return "\n".join(lines)


def plot(curve: dict[str, Any], out: Path) -> None:
    """Writes ``out``: a panel per figure against shards (log x), the points, the model at each point's own load
    and at the 10,000-shard load on paper (matplotlib, Agg, imported only here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points, fits, stated = curve["points"], curve["model"], curve["assumptions"]
    paper = paper_load(int(curve["projection"]["shards"]), stated["busy_share"], stated["batches_per_s"],
                       stated["records_per_s"])
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    for ax, (name, form) in zip(axes.flat, FORMS.items()):
        measured = [p for p in points if p["figures"].get(name) is not None]
        ax.plot([p["shards"] for p in measured], [p["figures"][name] for p in measured], "o", color="#4c72b0",
                label="measured")
        if name in fits:
            loads = [p["loads"][form.phase] for p in measured] + [paper]
            ax.plot([ld["shards"] for ld in loads], [model(fits, name, ld) for ld in loads], "--", color="#c44e52",
                    label=f"model: {form.formula}")
            ax.plot([paper["shards"]], [model(fits, name, paper)], "s", mfc="none", color="#c44e52",
                    label="on paper")
        ax.set_xscale("log")
        ax.set_xlabel("shards")
        ax.set_ylabel(form.unit or "per batch")
        ax.set_title(form.label, fontsize=9)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle("Spark executor reads at scale (readMode=executors, 3-node cluster on 2 cores)\n"
                 "dashed: the model at each measured point's own load; square: on paper at "
                 f"{paper['shards']:,.0f} shards, {stated['batches_per_s']:g} batch/s, one shard in "
                 f"{1 / stated['busy_share']:g} busy, {stated['records_per_s']:,.0f} records/s", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def build(sources: list[Path], out: Path, command: str) -> dict[str, Any]:
    """Reads ``sources``, fits, writes ``out`` (Markdown), its ``.json`` and ``.png`` (and the site's copy when
    ``out`` is in the committed results). Returns the curve written."""
    missing = [str(s) for s in sources if not s.exists()]
    if missing:
        raise FileNotFoundError(f"no Spark run at {', '.join(missing)}: run python -m benchmarks.scale.spark first")
    points = points_of([json.loads(s.read_text()) for s in sources])
    fits = fit_all(points)
    curve = {"command": command, "sources": [s.name for s in sources], "assumptions": dict(PAPER),
             "points": points, "model": fits, "projection": {"shards": PAPER["shards"], **project(fits)}}
    write_json(curve, out.with_suffix(".json"))
    write_atomically(out, markdown(curve).encode())
    try:
        plot(curve, out.with_suffix(".png"))
        if out.parent == RESULTS:
            DOCS_PLOT.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out.with_suffix(".png"), DOCS_PLOT)
    except ImportError as exc:
        print(f"[spark-curve] no plot ({exc}); pip install matplotlib", flush=True)
    print(f"[spark-curve] report: {out}", flush=True)
    return curve


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.scale.spark_curve [--out PATH]``: the curve from the committed runs; exit code 1 (and
    what to run) when one of them is missing."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "scale-spark-curve.md", help="the report's path")
    args = parser.parse_args(argv)
    try:
        build([RESULTS / name for name in SOURCES], args.out, "python -m benchmarks.scale.spark_curve")
    except FileNotFoundError as exc:
        print(f"[spark-curve] {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
