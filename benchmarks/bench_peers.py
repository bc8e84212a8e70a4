"""Peer Python consumers from PyPI reading the same stream as the spout and the boto3 loop, in the same run.

Every consumer runs in a worker process of its own (:mod:`benchmarks.peer_worker`), so that each one's CPU time is
its own and asyncio or multiprocessing never meet the spout's threads; the workers run alternately, their order
flipping every round. A peer that is not installed, or cannot run against a local emulator, gets a row that says
why instead of figures.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_read import LIMIT, timeout_for
from benchmarks.context import BenchContext, BenchmarkError, LoadedStream
from benchmarks.loops import ReadResult
from benchmarks.stats import ratio, summary

TITLE = "Peer consumers from PyPI on the same stream"
ROOT = Path(__file__).resolve().parents[1]
KINESIS_PYTHON_VENV = ROOT / "benchmarks" / ".venv-kinesis-python"

SIZES = {
    "full": {"shards": 4, "records": 20_000, "record_bytes": 100, "repeats": 5},
    "quick": {"shards": 4, "records": 10_000, "record_bytes": 100, "repeats": 3},
    "smoke": {"shards": 4, "records": 400, "record_bytes": 100, "repeats": 1},
}

#: kind -> (name in the table, how it was set up)
PEERS = {
    "boto3-loop": ("boto3 loop", "boto3.client defaults, one thread, shards in turn, no pause between calls"),
    "spout": ("KinesisSpout", "acks every record, ZooKeeper checkpoints every 1 s"),
    "async-kinesis": ("async-kinesis", "asyncio/aiobotocore Consumer, in-memory checkpointer, StringProcessor, "
                                       "5 fetches/s per shard"),
    "kinesis-python": ("kinesis-python", "a process per shard feeding the parent through a queue; an in-memory "
                                         "state object (its own needs DynamoDB); endpoint set through "
                                         "AWS_ENDPOINT_URL_KINESIS; no limit option (Kinesis' default, 10,000); "
                                         "CPU includes the shard processes"),
}

COLUMNS = [
    ("case", "consumer", "{}"),
    ("version", "version", "{}"),
    ("status", "status", "{}"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
    ("ratio_vs_loop", "vs loop", "x"),
    ("cpu_ratio_vs_loop", "CPU vs loop", "x"),
]


def interpreter(kind: str) -> tuple[str | None, str]:
    """The Python that can run ``kind``, or None and the reason it cannot."""
    if kind == "kinesis-python":
        python = KINESIS_PYTHON_VENV / "bin" / "python"
        if not (KINESIS_PYTHON_VENV / ".installed").exists():
            return None, f"not installed: {KINESIS_PYTHON_VENV.relative_to(ROOT)} is missing (run benchmarks/setup.sh)"
        return str(python), ""
    if kind == "async-kinesis" and importlib.util.find_spec("kinesis") is None:
        return None, "not installed in this interpreter (run benchmarks/setup.sh and use benchmarks/.venv)"
    return sys.executable, ""


def run_worker(python: str, kind: str, stream: LoadedStream, zookeeper: str) -> dict[str, Any]:
    """One measured read by ``kind`` in a worker process; its JSON result (``status`` ok, failed or not
    installed)."""
    timeout = timeout_for(stream.records)
    argv = [python, "-m", "benchmarks.peer_worker", kind, "--endpoint", stream.endpoint.endpoint_url,
            "--stream", stream.name, "--expected", str(stream.records), "--limit", str(LIMIT),
            "--timeout", str(timeout), "--zookeeper", zookeeper]
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        return {"kind": kind, "status": "failed", "error": f"worker did not finish within {timeout + 60:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {"kind": kind, "status": "failed", "error": f"worker exited {done.returncode}: {' | '.join(tail)}"}
    return dict(json.loads(lines[-1]))


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    stream = ctx.stream(size["shards"], size["records"], size["record_bytes"])
    zookeeper = ctx.zookeeper_hosts
    kinds = list(PEERS)
    results: dict[str, list[ReadResult]] = {kind: [] for kind in kinds}
    problems: dict[str, str] = {}
    versions: dict[str, str] = {}
    for kind in kinds:
        python, why = interpreter(kind)
        if python is None:
            problems[kind] = why
    for round_no in range(size["repeats"]):
        ordered = kinds if round_no % 2 == 0 else kinds[::-1]
        for kind in ordered:
            if kind in problems:
                continue
            python, _ = interpreter(kind)
            out = run_worker(python or sys.executable, kind, stream, zookeeper)
            if out.get("status") != "ok":
                problems[kind] = f"{out.get('status')}: {out.get('error')}"
                ctx.progress(f"peers: {kind}: {problems[kind]}")
                continue
            versions[kind] = out.get("version") or ""
            res = ReadResult(out["records"], out["bytes"], out["wall_s"], out["cpu_s"])
            results[kind].append(res)
            ctx.progress(f"peers: round {round_no + 1}/{size['repeats']}: {kind}: {res.records_per_s:,.0f} "
                         f"records/s, {res.cpu_us_per_record:.1f} µs CPU/record")
    if "boto3-loop" in problems:
        raise BenchmarkError(f"the boto3 loop, the baseline of the peers, did not run: {problems['boto3-loop']}")
    rows = []
    for kind in kinds:
        name, setup = PEERS[kind]
        row: dict[str, Any] = {"case": name, "peer": kind, "setup": setup, "version": versions.get(kind, ""),
                               "emulator": stream.emulator, "shards": stream.shards, "records": stream.records,
                               "record_bytes": stream.record_bytes, "batch_limit": LIMIT,
                               "repeats": len(results[kind])}
        if kind in problems and not results[kind]:
            row["status"] = problems[kind]
        else:
            row["status"] = "ok"
            row["records_per_s"] = summary([r.records_per_s for r in results[kind]])
            row["cpu_us_per_record"] = summary([r.cpu_us_per_record for r in results[kind]])
        rows.append(row)
    loop = rows[0]
    for row in rows:
        if row["status"] == "ok":
            row["ratio_vs_loop"] = ratio(row["records_per_s"], loop["records_per_s"])
            row["cpu_ratio_vs_loop"] = ratio(row["cpu_us_per_record"], loop["cpu_us_per_record"])
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each peer's throughput relative to the loop (or why it did not run)."""
    out = []
    for row in rows:
        if row["peer"] in ("async-kinesis", "kinesis-python"):
            value = (f"{row['ratio_vs_loop']:.2f}x the loop's records/s, {row['cpu_ratio_vs_loop']:.1f}x its CPU"
                     if row["status"] == "ok" else row["status"])
            out.append({"figure": f"{row['case']} / boto3 loop (same stream, same run)", "value": value,
                        "goal": "-", "met": None})
    return out
