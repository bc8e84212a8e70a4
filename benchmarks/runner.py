"""``python -m benchmarks``: run the benchmarks, print one progress line per step, write the results.

Writes ``latest.json`` (every figure with its runs, the machine, the versions), ``latest.md`` (the tables) and
``latest.png`` (the chart, when matplotlib is installed) into ``--out`` (default ``benchmarks/results``). A
``--smoke`` run (tiny sizes, for the test suite) never writes there: it needs ``--out`` or writes to a temporary
directory. Exits 1 when a benchmark failed (its error is in the results), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.context import BenchContext
from benchmarks.machine import load_average
from benchmarks.registry import NAMES, select
from benchmarks.report import SCHEMA, render_markdown, write_atomically, write_json

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="shorter sizes and fewer runs (about a third)")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes: checks that every benchmark runs")
    p.add_argument("--only", default="", help=f"comma-separated benchmarks to run (of {', '.join(NAMES)})")
    p.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    p.add_argument("--emulators", default=None,
                   help="emulators of the read benchmark, comma-separated (default: kinesalite,moto; "
                        "kinesalite with --quick or --smoke)")
    p.add_argument("--no-chart", action="store_true", help="do not draw latest.png")
    p.add_argument("--from-json", type=Path, default=None, metavar="LATEST_JSON",
                   help="measure nothing: write latest.md and latest.png again from a latest.json")
    return p.parse_args(argv)


def write_outputs(results: dict[str, Any], modules: dict[str, ModuleType | None], out: Path, chart: bool,
                  ctx: BenchContext) -> None:
    """Write latest.json, latest.md and (if ``chart`` and matplotlib is there) latest.png into ``out``."""
    write_json(results, out / "latest.json")
    write_atomically(out / "latest.md", render_markdown(results, modules).encode())
    ctx.progress(f"wrote {out / 'latest.json'} and {out / 'latest.md'}")
    if chart:
        try:
            from benchmarks.chart import write_chart

            write_chart(results, modules, out / "latest.png")
            ctx.progress(f"wrote {out / 'latest.png'}")
        except ImportError:
            ctx.progress("matplotlib is not installed here: no chart (benchmarks/setup.sh installs it)")


def rerender(path: Path, out: Path, chart: bool) -> int:
    """Write the Markdown and the chart again from saved results, with the current headline functions."""
    results = json.loads(path.read_text())
    modules: dict[str, ModuleType | None] = {}
    for spec in select(list(results["benchmarks"])):
        module = modules[spec.name] = spec.load()
        entry = results["benchmarks"][spec.name]
        headline = getattr(module, "headline", None)
        if entry.get("status") == "ok" and headline is not None:
            entry["headline"] = headline(entry["rows"])
    write_outputs(results, modules, out, chart, BenchContext())
    return 0


def run_benchmarks(ctx: BenchContext, names: list[str], smoke: bool
                   ) -> tuple[dict[str, Any], dict[str, ModuleType | None]]:
    """Run the selected benchmarks in registry order; a failure is recorded and the others still run."""
    entries: dict[str, Any] = {}
    modules: dict[str, ModuleType | None] = {}
    for spec in select(names):
        module = spec.load()
        modules[spec.name] = module
        entry: dict[str, Any] = {"title": getattr(module, "TITLE", spec.name), "module": spec.module,
                                 "loadavg_before": load_average()}
        started = time.monotonic()
        if module is None:
            entry.update(status="not implemented yet", rows=[], headline=[],
                         error=f"add {spec.module.replace('.', '/')}.py with run(ctx, smoke) -> list[dict]")
            ctx.progress(f"{spec.name}: not implemented yet")
        else:
            ctx.progress(f"{spec.name}: {entry['title']}")
            try:
                rows = module.run(ctx, smoke)
                entry.update(status="ok", rows=rows)
                headline = getattr(module, "headline", None)
                entry["headline"] = headline(rows) if headline else []
            except Exception as exc:  # noqa: BLE001 - recorded in the results; the run goes on
                traceback.print_exc()
                entry.update(status="failed", error=f"{type(exc).__name__}: {exc}", rows=[], headline=[])
                ctx.progress(f"{spec.name}: FAILED: {type(exc).__name__}: {exc}")
        entry["seconds"] = round(time.monotonic() - started, 1)
        entry["loadavg_after"] = load_average()
        entries[spec.name] = entry
    return entries, modules


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    try:
        select(names)
    except ValueError as exc:
        print(f"python -m benchmarks: {exc}", file=sys.stderr)
        return 2
    if args.from_json is not None:
        return rerender(args.from_json, args.out or args.from_json.parent, not args.no_chart)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    out: Path = args.out or (Path(tempfile.mkdtemp(prefix="kinesis-spout-bench-smoke-")) if args.smoke
                             else RESULTS_DIR)
    if args.smoke and out.resolve() == RESULTS_DIR.resolve():
        print("python -m benchmarks: a --smoke run never writes benchmarks/results; give another --out",
              file=sys.stderr)
        return 2
    emulators = tuple(e.strip() for e in (args.emulators or ("kinesalite" if mode != "full" else
                                                              "kinesalite,moto")).split(",") if e.strip())
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    ctx = BenchContext(quick=args.quick, emulators=emulators)
    started = time.monotonic()
    results: dict[str, Any] = {"schema": SCHEMA, "mode": mode,
                               "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                               "loadavg_before": load_average(), "machine": ctx.machine()}
    ctx.progress(f"{mode} run of {', '.join(names) or 'every benchmark'}; results go to {out}")
    try:
        entries, modules = run_benchmarks(ctx, names, args.smoke)
        results["versions"] = ctx.versions()
    finally:
        ctx.close()
    results.update(finished_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                   seconds=round(time.monotonic() - started, 1), loadavg_after=load_average(),
                   note="Shared machine: other test suites may have run at the same time; see the load averages.",
                   benchmarks=entries)
    write_outputs(results, modules, out, not args.no_chart, ctx)
    failed = [name for name, entry in entries.items() if entry["status"] == "failed"]
    if failed:
        ctx.progress(f"failed: {', '.join(failed)}")
    return 1 if failed else 0
