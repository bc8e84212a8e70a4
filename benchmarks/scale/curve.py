"""The curve: the scale run at several sizes in one command (``python -m benchmarks.scale --curve 16,64,256``),
each size's figures kept in ``scale-curve.json`` beside ``scale.json`` (which is not overwritten), the model of
:mod:`benchmarks.scale.model` fitted to them, and ``scale-curve.md`` and ``scale-curve.png``.

Who calls: :func:`benchmarks.scale.runner.main` when ``--curve`` is given. The size of the single-size report
(``scale.json``, the 1,024-shard run) is reused as a point of the curve, not run again, unless ``--curve`` names it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.machine import ROOT, describe_machine
from benchmarks.report import table, write_atomically, write_json
from benchmarks.scale import leases
from benchmarks.scale.model import (
    CHECKPOINT_INTERVAL_S,
    FIGURES,
    GET_RECORDS_LIMIT_PER_SHARD,
    SHARDS_PER_WORKER,
    Point,
    figures_of,
    fit,
    project,
    size_of,
)

#: The committed results, and the plot's copy shown by the site (docs/scaling.md).
RESULTS = ROOT / "benchmarks" / "results"
DOCS_PLOT = ROOT / "docs" / "assets" / "scale-curve.png"
#: The size the model is carried to on paper.
PROJECTED = {"shards": 10_000, "workers": 100, "kill": 25}
def curve_sizes(spec: str) -> list[tuple[int, int, int]]:
    """``--curve``'s comma-separated shard counts as sizes, smallest first; a clear error on anything else."""
    try:
        shards = sorted({int(part) for part in spec.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"expected shard counts separated by commas, e.g. 16,64,256 (got {spec!r})") from None
    if not shards or shards[0] < 1:
        raise ValueError(f"expected one shard count or more, each 1 or more, e.g. 16,64,256 (got {spec!r})")
    return [size_of(s) for s in shards]


def _point(doc: dict[str, Any], source: str) -> dict[str, Any]:
    setup = doc["setup"]
    return {"shards": setup["shards"], "workers": setup["workers"], "kill": setup["kill"], "source": source,
            "command": doc.get("command"), "finished": doc.get("finished"), "load_before": doc.get("load_before"),
            "nodes": doc.get("nodes"), "error": doc.get("error"), "records": (doc.get("figures") or {}).get("records"),
            "figures": figures_of(doc.get("figures") or {}), "phases": doc.get("figures")}


def run_curve(args: argparse.Namespace, argv: list[str],
              run_size: Callable[[leases.LeaseRunSize, list[str]], dict[str, Any]]) -> int:
    """Runs every size of ``args.curve`` with ``run_size``, adds the single-size report's point, writes the curve.
    Exit code 1 when a size failed or lost a record."""
    points, failed = [], False
    for shards, workers, kill in args.curve:
        size = leases.LeaseRunSize(shards=shards, workers=workers, kill=kill,
                                   session_timeout_s=args.session_timeout, put_every_s=args.put_every,
                                   rest_s=args.rest, phase_timeout_s=args.phase_timeout)
        print(f"[curve] {shards} shards, {workers} workers, {kill} killed", flush=True)
        doc = run_size(size, argv)
        doc["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        points.append(_point(doc, "run by this command"))
        failed |= doc.get("error") is not None or (points[-1]["records"] or {}).get("lost") != 0
    single = args.out.with_suffix(".json")
    if single.exists():
        doc = json.loads(single.read_text())
        if doc.get("figures") and doc["setup"]["shards"] not in {p["shards"] for p in points}:
            points.append(_point(doc, f"reused from {single.name} (not run again)"))
    command = "python -m benchmarks.scale " + shlex.join(argv)
    write_curve(points, command, args.out.with_name(args.out.stem + "-curve.md"))
    return 1 if failed else 0


def rebuild(out: Path) -> int:
    """``--curve-report``: the model, ``scale-curve.md`` and ``.png`` made again from ``scale-curve.json``'s points
    (no run), e.g. after the model changed. Exit code 1 when there is no such file."""
    curve_json = out.with_name(out.stem + "-curve.json")
    if not curve_json.exists():
        print(f"[curve] no {curve_json}: run the curve first (--curve 16,64,256)", flush=True)
        return 1
    curve = json.loads(curve_json.read_text())
    write_curve(curve["points"], curve["command"], curve_json.with_suffix(".md"), curve.get("finished"))
    return 0


def write_curve(points: list[dict[str, Any]], command: str, out: Path, finished: str | None = None) -> None:
    """Fits the model to ``points``, writes ``out`` (Markdown), its ``.json`` and its ``.png``."""
    points = sorted(({**p, "figures": figures_of(p["phases"])} if p.get("phases") else p for p in points),
                    key=lambda p: p["shards"])  # the figures made again from each run's phases: the model's own
    curve = {"command": command, "machine": describe_machine(),
             "finished": finished or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "points": points}
    fits = fit([Point(p["shards"], p["workers"], p["kill"], p["figures"]) for p in points])
    curve["model"] = {name: {"formula": f.formula, "intercept": round(f.intercept, 4), "slope": round(f.slope, 6),
                             "points": f.points, "worst": round(f.worst, 3), "why": f.why}
                      for name, f in fits.items()}
    paper = project(fits, shards=PROJECTED["shards"], workers=PROJECTED["workers"], kill=PROJECTED["kill"])
    curve["projection"] = dict(PROJECTED) | {k: round(v, 3) for k, v in paper.items()}
    write_json(curve, out.with_suffix(".json"))
    write_atomically(out, markdown(curve).encode())
    try:
        from benchmarks.scale.curve_plot import plot

        plot(points, fits, out.with_suffix(".png"))
        if out.parent == RESULTS:  # the site's scaling page shows the committed curve
            DOCS_PLOT.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out.with_suffix(".png"), DOCS_PLOT)
    except ImportError as exc:  # matplotlib missing: the figures are written all the same
        print(f"[curve] no plot ({exc}); pip install matplotlib", flush=True)
    print(f"[curve] report: {out}", flush=True)


def _num(value: Any) -> str:
    if value is None:
        return "did not happen in time"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.4g}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return table(header, [[str(cell) for cell in row] for row in rows])


def markdown(curve: dict[str, Any]) -> str:
    """The curve's report: the table of the points, the model and its projection."""
    points, proj = curve["points"], curve["projection"]
    lines = ["# Scale: the curve (lease workers)", "",
             f"Run {curve['finished']} on {curve['machine'].get('cores')} cores, `{curve['command']}`. One worker "
             f"per {SHARDS_PER_WORKER} shards (at least 2), a quarter of them SIGKILLed at once (at least 1); "
             "each size's full figures are in `scale-curve.json`.", ""]
    lines += _table(["shards", "workers", "killed"] + [f"{label} ({unit})" if unit else label
                                                     for _, label, unit in FIGURES] + ["load before", "source"],
                   [[p["shards"], p["workers"], p["kill"]] + [_num(p["figures"].get(k)) for k, _, _ in FIGURES]
                    + [p["load_before"][0] if p.get("load_before") else "", p["source"]] for p in points])
    lines += ["", "## The model (least squares on the measured points)", ""]
    lines += _table(["figure", "form", "a", "b", "points", "worst miss", "why this form"],
                   [[label, m["formula"], _num(m["intercept"]), _num(m["slope"]), m["points"], _num(m["worst"]),
                     m["why"]]
                    for key, label, _ in FIGURES if (m := curve["model"].get(key))])
    lines += ["", f"## On paper: {proj['shards']:,} shards over {proj['workers']} workers ({proj['kill']} killed)",
              ""]
    rows = [[f"{label} ({unit})" if unit else label, _num(proj.get(key))] for key, label, unit in FIGURES
            if key in proj]
    rows += [[f"checkpoint writes/s, every shard busy, one write per {CHECKPOINT_INTERVAL_S:g} s",
              _num(proj["checkpoint_writes_per_s"])]]
    if "get_records_per_s_idle" in proj:
        rows += [["GetRecords/s, every shard idle", _num(proj["get_records_per_s_idle"])],
                 ["GetRecords/s per worker, every shard idle", _num(proj["get_records_per_s_per_worker"])],
                 [f"share of Kinesis's {GET_RECORDS_LIMIT_PER_SHARD:g} GetRecords/s per shard used idle",
                  f"{proj['get_records_share_of_limit']:.1%}"]]
    lines += _table(["", "model"], rows)
    lines += ["", "Assumptions: the forms above hold beyond the measured sizes (one ZooKeeper server, no new "
              "bottleneck); against Kinesis nothing bounds the polls as the emulator does, so every idle shard is "
              "polled at the highest rate measured per shard and a worker's CPU follows its GetRecords calls; the "
              "figures of a loaded 2-core machine stand for a worker's own cost (each worker on a core of its own "
              "would balance and fail over faster, not slower); the balance and failover fits are along the "
              "curve's sizes (workers grow with shards), not for other shapes.", ""]
    return "\n".join(lines)
