"""``python -m benchmarks.compare_runs``: compare repeated runs of the benchmarks on two trees (before and after a
change) and say which differences are within noise.

Reads the ``latest.json`` of each run (``python -m benchmarks --quick --only NAME --out DIR``, run alternately on the
two trees so that the machine's load drifts over both) and writes ``OUT.md`` and ``OUT.json``: per benchmark case
present on both sides, the after/before ratio of the median of records per second (``records_per_s``,
``user_records_per_s``, the tracker's ``pairs_per_s``), of CPU per record (``cpu_us_per_record``,
``cpu_us_per_user_record``) and of the tracker's microseconds per batch and bytes per record, with the spread between
the repeats of each side ((max - min) / median of the per-repeat medians). A difference is within noise when the
ranges of the per-repeat medians of the two sides overlap. Called by hand after the runs; changes nothing else.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from benchmarks.report import table, write_atomically, write_json

#: The figures compared, by name in a result row, and what a higher value means.
FIGURES: dict[str, str] = {
    "records_per_s": "records/s",
    "user_records_per_s": "records/s",
    "pairs_per_s": "records/s",
    "cpu_us_per_record": "CPU per record",
    "cpu_us_per_user_record": "CPU per record",
    "us_per_batch": "µs per batch",
    "bytes_per_inflight_record": "bytes per record",
}


def load_runs(paths: list[Path]) -> list[dict[str, Any]]:
    """The results of each run directory (its ``latest.json``), in the order given."""
    return [json.loads((p / "latest.json").read_text()) for p in paths]


def case_of(row: dict[str, Any]) -> str:
    """The name of a result row: its case, and its stream where rows of one case differ by stream (KPL)."""
    return f"{row['case']}, {row['stream']}" if "stream" in row else str(row["case"])


def medians(runs: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[float]]:
    """Per (benchmark, case, figure): the median of each run that measured it, in run order."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for run in runs:
        for bench, entry in run["benchmarks"].items():
            if entry.get("status") != "ok":
                continue
            for row in entry["rows"]:
                for figure in FIGURES:
                    value = row.get(figure)
                    if isinstance(value, dict) and "median" in value:
                        out.setdefault((bench, case_of(row), figure), []).append(float(value["median"]))
    return out


def spread(values: list[float]) -> float:
    """(max - min) / median of ``values``, in percent."""
    mid = statistics.median(values)
    return 100.0 * (max(values) - min(values)) / mid if mid else 0.0


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per figure measured on both sides: the medians of the repeats, the ratio, the spreads, the verdict."""
    b, a = medians(before), medians(after)
    rows = []
    for key in (k for k in a if k in b):
        bench, case, figure = key
        mb, ma = statistics.median(b[key]), statistics.median(a[key])
        overlap = min(a[key]) <= max(b[key]) and min(b[key]) <= max(a[key])
        rows.append({"benchmark": bench, "case": case, "figure": figure, "what": FIGURES[figure],
                     "before": b[key], "after": a[key], "ratio": ma / mb if mb else None,
                     "spread_before_pct": spread(b[key]), "spread_after_pct": spread(a[key]),
                     "within_noise": overlap})
    return rows


def number(value: float) -> str:
    """A figure for the table: thousands separated, three significant digits below 100."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def load_summary(runs: list[dict[str, Any]]) -> str:
    """The 1-minute load averages at the start of each run, as text."""
    return ", ".join(f"{run['loadavg_before'][0]:.1f}" for run in runs)


def render(rows: list[dict[str, Any]], before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """The Markdown table of ``rows``, a table per benchmark."""
    lines: list[str] = []
    for bench in dict.fromkeys(r["benchmark"] for r in rows):
        lines += ["", f"### {bench}", ""]
        cells = []
        for r in (r for r in rows if r["benchmark"] == bench):
            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
            cells.append([r["case"], r["what"], " / ".join(map(number, r["before"])),
                          " / ".join(map(number, r["after"])), ratio,
                          f"{r['spread_before_pct']:.0f}% / {r['spread_after_pct']:.0f}%",
                          "yes" if r["within_noise"] else "**no**"])
        lines += table(["case", "figure", "before (each repeat)", "after (each repeat)", "after / before",
                        "spread before / after", "within noise"], cells)
    head = [f"Load average (1 min) at the start of each run: before {load_summary(before)}; after "
            f"{load_summary(after)}."]
    return "\n".join(head + lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare_runs", description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, nargs="+", required=True, help="run directories of the tree before")
    p.add_argument("--after", type=Path, nargs="+", required=True, help="run directories of the tree after")
    p.add_argument("--out", type=Path, required=True, help="OUT.md and OUT.json are written")
    args = p.parse_args(argv)
    before, after = load_runs(args.before), load_runs(args.after)
    rows = compare(before, after)
    write_json({"before": [str(x) for x in args.before], "after": [str(x) for x in args.after], "rows": rows,
                "loadavg_before": [r["loadavg_before"] for r in before],
                "loadavg_after": [r["loadavg_before"] for r in after]}, args.out.with_suffix(".json"))
    write_atomically(args.out.with_suffix(".md"), render(rows, before, after).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
