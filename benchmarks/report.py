"""The results files: ``latest.json`` (everything measured) and ``latest.md`` (the tables README shows)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

SCHEMA = 1
SHARED_MACHINE_NOTE = (
    "The machine is shared: other people ran test suites on it at the same time, so timings are noisy (the load "
    "averages before and after each benchmark are recorded). Each figure is the median of several runs, followed "
    "by the lowest and highest run.")


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json(results: dict[str, Any], path: Path) -> None:
    write_atomically(path, (json.dumps(results, indent=2, ensure_ascii=False) + "\n").encode())


# -- formatting ---------------------------------------------------------------------------------------------------
def fmt_number(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


def fmt_cell(value: Any, fmt: str) -> str:
    """One table cell: ``fig0``/``fig1``/``fig2`` figures as "median (min-max)", ``x`` ratios as "0.93x"."""
    if value is None or value == "":
        return "-"
    if fmt in ("fig0", "fig1", "fig2"):
        decimals = int(fmt[-1])
        if isinstance(value, dict):
            med, lo, hi = (fmt_number(float(value[k]), decimals) for k in ("median", "min", "max"))
            return med if lo == hi else f"{med} ({lo}–{hi})"
        return fmt_number(float(value), decimals)
    if fmt == "x":
        return f"{float(value):.2f}x"
    return fmt.format(value)


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def description(module: ModuleType | None) -> str:
    """A benchmark's explanation: its module docstring, unwrapped into paragraphs."""
    doc = (module.__doc__ or "").strip() if module else ""
    doc = re.sub(r":\w+:`([^`]+)`", r"`\1`", doc.replace("``", "`"))  # reST roles and literals to Markdown
    return "\n\n".join(" ".join(p.split()) for p in doc.split("\n\n"))


def section_tables(entry: dict[str, Any], module: ModuleType | None) -> list[str]:
    """The tables of a section: one per ``kind`` of row (e.g. throughput, memory), each with the columns its rows
    have."""
    rows = entry.get("rows") or []
    columns = getattr(module, "COLUMNS", None) or [("case", "case", "{}")]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("kind", "")), []).append(row)
    out: list[str] = []
    for group in groups.values():
        used = [c for c in columns if any(c[0] in row for row in group)]
        body = [[fmt_cell(row.get(key), fmt) for key, _, fmt in used] for row in group]
        out += table([header for _, header, _ in used], body) + [""]
    return out


def measured_on(rows: list[dict[str, Any]]) -> str:
    """What the rows of a section were measured on: emulators, records, record sizes, repeats."""
    parts = []
    for key, label in (("emulator", "emulator"), ("records", "records"), ("record_bytes", "record bytes"),
                       ("shards", "shards"), ("repeats", "runs per figure")):
        values = sorted({row[key] for row in rows if row.get(key)}, key=lambda v: (isinstance(v, str), v))
        if values:
            parts.append(f"{label}: {', '.join(f'{v:,}' if isinstance(v, int) else str(v) for v in values)}")
    return "; ".join(parts)


def render_markdown(results: dict[str, Any], modules: dict[str, ModuleType | None]) -> str:
    """``latest.md``: machine and versions, the summary against the goals, then one section per benchmark."""
    machine, versions = results["machine"], results["versions"]
    out = [f"# kinesis_spout benchmarks ({results['mode']} run)", ""]
    out.append(f"Measured {results['finished_at']} on {machine['cores']} cores ({machine['cpu']}), "
               f"{machine['memory_gib']} GiB, {machine['python']}, {machine['os']}; "
               f"load average {results['loadavg_before']} before, {results['loadavg_after']} after. "
               f"Total {results['seconds']:.0f} s.")
    later = {name: entry["run_started_at"] for name, entry in results["benchmarks"].items()
             if entry.get("run_started_at")}
    if later:
        out.append(f"Measured again later, by a run of `--only` started at {', '.join(sorted(set(later.values())))}"
                   f" (its load averages are in each section): {', '.join(later)}.")
    out.append("")
    out.append("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    out += ["", SHARED_MACHINE_NOTE, "", "Reproduce: `make bench` (or `make bench BENCH_ARGS=--quick`).", ""]
    summary_rows = []
    for name, entry in results["benchmarks"].items():
        for line in entry.get("headline", []):
            met = {True: "yes", False: "**no**", None: "-"}[line.get("met")]
            summary_rows.append([line["figure"], line["value"], line.get("goal", "-"), met])
        if entry["status"] not in ("ok",):
            summary_rows.append([f"{name} benchmark", entry["status"] + (f": {entry['error']}" if entry.get("error")
                                                                           else ""), "-", "-"])
    out += ["## Summary", ""] + table(["figure", "value", "goal", "met"], summary_rows) + [""]
    for number, (name, entry) in enumerate(results["benchmarks"].items(), 1):
        module = modules.get(name)
        out += [f"## {number}. {entry['title']}", ""]
        if entry["status"] != "ok":
            out += [f"Status: {entry['status']}" + (f": {entry['error']}" if entry.get("error") else "") + ".", ""]
        text = description(module)
        if text:
            out += [text, ""]
        rows = entry.get("rows") or []
        if rows:
            out += [f"Measured on {measured_on(rows)}; {entry['seconds']:.0f} s, load average "
                    f"{entry['loadavg_before']} before, {entry['loadavg_after']} after.", ""]
            out += section_tables(entry, module)
    return "\n".join(out).rstrip() + "\n"
