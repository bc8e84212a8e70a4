"""``python -m benchmarks.scale`` (``make scale``): lease workers at scale, each on a node of its own; results in
``benchmarks/results/scale.md`` and ``scale.json``. Not part of ``make test``.

    python -m benchmarks.scale                                   # the issue's size: 1,024 shards, 16 workers, 4 killed
    python -m benchmarks.scale --shards 64 --workers 4 --kill 1  # a quick run
    python -m benchmarks.scale --curve 16,64,256 --rest 10       # the curve: scale-curve.md, .json and .png

Exit code 1 when a record was lost or the run could not finish; the report is written either way.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.machine import ROOT, describe_machine, load_average
from benchmarks.scale import leases
from benchmarks.scale.cluster import ScaleCluster
from benchmarks.scale.curve import curve_sizes, rebuild, run_curve
from benchmarks.scale.report import write

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "scale.md"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=1024, help="shards of the stream (default 1024)")
    p.add_argument("--workers", type=int, default=16, help="lease worker processes (default 16)")
    p.add_argument("--kill", type=int, default=4, help="workers SIGKILLed at once (default 4)")
    p.add_argument("--session-timeout", type=float, default=4.0, help="the workers' ZooKeeper session timeout, s")
    p.add_argument("--put-every", type=float, default=5.0, help="seconds between rounds of one record per shard")
    p.add_argument("--rest", type=float, default=15.0, help="seconds measured at rest (default 15)")
    p.add_argument("--stagger", type=float, default=0.0,
                   help="seconds between two workers' launches in the balance phase (default 0: all at once)")
    p.add_argument("--keep-logs", action="store_true",
                   help="the workers log at INFO into the run's directory, which is kept (its path is printed)")
    p.add_argument("--phase-timeout", type=float, default=600.0, help="the longest wait of a phase, s")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the Markdown report (default {DEFAULT_OUT})")
    p.add_argument("--curve", type=str, default=None, metavar="SHARDS,...",
                   help="run each size (workers: one per 64 shards, at least 2; a quarter killed) and write "
                        "scale-curve.md, .json and .png beside --out, with the size of --out's .json as a point")
    p.add_argument("--curve-report", action="store_true",
                   help="no run: the curve's model, report and plot made again from scale-curve.json")
    args = p.parse_args(argv)
    if args.curve is not None:
        try:
            args.curve = curve_sizes(args.curve)
        except ValueError as exc:
            p.error(f"--curve: {exc}")
        return args
    if args.shards < 1 or args.workers < 2:
        p.error(f"--shards must be 1 or more and --workers 2 or more (got {args.shards} and {args.workers})")
    if not 1 <= args.kill < args.workers:
        p.error(f"--kill must be 1 to --workers - 1 = {args.workers - 1} (got {args.kill})")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a SIGTERM still stops the workers and removes the nodes
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    if args.curve_report:
        return rebuild(args.out)
    if args.curve is not None:
        return run_curve(args, argv, run_size)
    size = leases.LeaseRunSize(shards=args.shards, workers=args.workers, kill=args.kill,
                               session_timeout_s=args.session_timeout, put_every_s=args.put_every,
                               rest_s=args.rest, phase_timeout_s=args.phase_timeout, stagger_s=args.stagger)
    doc = run_size(size, argv, args.keep_logs)
    write(doc, args.out)
    print(f"report: {args.out}", flush=True)
    lost = doc.get("figures", {}).get("records", {}).get("lost")
    return 0 if doc.get("error") is None and lost == 0 else 1


def run_size(size: leases.LeaseRunSize, argv: list[str], keep_logs: bool = False) -> dict[str, Any]:
    """One run at ``size``: servers up, the lease phases, servers down. Returns the report's document (an error
    reported in it). Called by :func:`main` once, or by the curve once per size."""
    began = time.monotonic()

    def log(message: str) -> None:
        print(f"[scale {time.monotonic() - began:6.1f}s] {message}", flush=True)

    doc: dict[str, Any] = {"command": "python -m benchmarks.scale " + shlex.join(argv), "setup": {
        "shards": size.shards, "workers": size.workers, "kill": size.kill,
        "session_timeout_s": size.session_timeout_s, "put_every_s": size.put_every_s, "stagger_s": size.stagger_s},
        "machine": describe_machine(),
        "load_before": load_average(), "notes": []}
    cluster = ScaleCluster(shards=size.shards, session_timeout_s=size.session_timeout_s, keep_logs=keep_logs)
    try:
        cluster.start()
        doc["nodes"] = (f"network namespaces on {cluster.network.subnet} (bridge {cluster.network.host_address})"
                        if cluster.isolated else f"loopback addresses ({cluster.network.reason})")
        log(f"servers up, stream of {size.shards} shards active; nodes: {doc['nodes']}")
        if keep_logs:
            log(f"the workers' logs: {cluster.directory}")
        doc["figures"] = leases.run(cluster, size, log)
        doc["goals"] = leases.goals(doc["figures"], size)
    except Exception:  # noqa: BLE001 - reported in the results, and the exit code says so
        doc["error"] = traceback.format_exc(limit=8)
        log(f"the run failed:\n{doc['error']}")
    finally:
        doc.setdefault("nodes", "not made")
        cluster.close()
    doc["wall_s"] = round(time.monotonic() - began, 1)
    doc["load_after"] = load_average()
    doc["notes"] += [
        "Moves are counted by a data watch on every lease znode: a take by a worker other than the last owner. A "
        "watch may miss an owner that held a lease only between two of its reads (such moves are undercounted).",
        "GetRecords calls are counted inside kinesalite (benchmarks/scale/count_requests.js, preloaded).",
        "ZooKeeper requests are its own counters (mntr), the benchmark's watch client included (idle at rest).",
    ]
    return doc
