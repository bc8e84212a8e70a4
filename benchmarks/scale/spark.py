"""``python -m benchmarks.scale.spark`` (part of ``make scale``): Spark's ``readStream`` source on a standalone
cluster of several nodes; results in ``benchmarks/results/scale-spark.md`` and ``.json``. Not part of ``make test``.

    python -m benchmarks.scale.spark                       # 256 shards (make scale)
    python -m benchmarks.scale.spark --shards 256,1024     # and 1,024 shards (the cut at the first size only)
    python -m benchmarks.scale.spark --quick               # 16 shards, small: a check of the whole run

For each size, a new cluster (:mod:`benchmarks.scale.spark_nodes`: ZooKeeper, kinesalite, Spark's master and three
one-core workers, each on a node of its own; the driver is this process on the host) and a new stream of that many
shards, then (:mod:`benchmarks.scale.spark_phases`): a backlog of ``--per-shard`` records on every shard read with
AvailableNow in ``readMode=executors`` then ``driver`` (each from TRIM_HORIZON under an app of its own); a caught-up
stream in both modes (the backlog's apps again, from their checkpoints, while a producer puts ``--rate`` records/s
on one shard in ``--busy-every``, the others idle). First, before anything is measured, which reader
``readMode=auto`` picks with the source registered by hand and with ``register(spark)`` (one batch each, which also
starts every executor's Python workers). At the first size, a worker node cut off during a batch
(``readMode=executors``): every record put must be counted exactly once.

Exit code 1 when a record was lost or doubled, or the run failed; the report is written either way.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.machine import ROOT, describe_machine, load_average
from benchmarks.scale import spark_phases
from benchmarks.scale.spark_auto import auto_choice
from benchmarks.scale.spark_load import Placed, fill, shard_keys
from benchmarks.scale.spark_nodes import SparkNodes
from benchmarks.scale.spark_report import goals, write
from benchmarks.spark_costs import SparkCostProbe

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "scale-spark.md"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scale.spark", description=__doc__.splitlines()[0])
    p.add_argument("--shards", default="256", help="comma-separated stream sizes (default 256)")
    p.add_argument("--per-shard", type=int, default=40, help="backlog records per shard (default 40)")
    p.add_argument("--batches", type=int, default=2, help="backlog batches (maxRecordsPerTrigger = backlog / this)")
    p.add_argument("--rate", type=int, default=200, help="caught-up producer, records/s (default 200)")
    p.add_argument("--busy-every", type=int, default=16, help="one busy shard in this many, caught up (default 16)")
    p.add_argument("--seconds", type=float, default=20.0, help="caught-up seconds measured per mode (default 20)")
    p.add_argument("--no-cut", action="store_true", help="leave out the worker node cut")
    p.add_argument("--timeout", type=float, default=900.0, help="the longest wait of a phase, s")
    p.add_argument("--quick", action="store_true", help="16 shards, 10 records a shard, 8 s caught up")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the Markdown report (default {DEFAULT_OUT})")
    args = p.parse_args(argv)
    if args.quick:
        args.shards, args.per_shard, args.seconds, args.busy_every = "16", 10, 8.0, 4
    try:
        args.sizes = sorted({int(s) for s in args.shards.split(",")})
    except ValueError:
        p.error(f"--shards must be comma-separated whole numbers, got {args.shards!r}")
    if not args.sizes or min(args.sizes) < 4:
        p.error(f"--shards: each size must be 4 or more (got {args.shards!r})")
    return args


def run_size(shards: int, args: argparse.Namespace, first: bool, log: Any) -> dict[str, Any]:
    """Every phase at one size, on a cluster of its own (closed at the end). Returns the size's figures."""
    out: dict[str, Any] = {"shards": shards, "load_before": load_average()}
    nodes = SparkNodes(shards=shards)
    try:
        started = time.monotonic()
        spark = nodes.start(log)
        out["nodes"] = nodes.describe()
        out["cluster_start_s"] = round(time.monotonic() - started, 1)
        assert nodes.kinesalite is not None and nodes.zookeeper is not None
        from kinesis_spout.spark import register

        register(spark)
        probe = SparkCostProbe.for_session(spark, nodes.zookeeper.hosts, spark_phases.PREFIX)
        keys = [key for _, key in shard_keys(nodes.kinesalite.endpoint_url, nodes.stream)]
        placed = Placed()
        records = fill(nodes.kinesalite.endpoint_url, nodes.stream, keys, args.per_shard, placed)
        log(f"{shards} shards: {records:,} records put ({args.per_shard} a shard)")
        per_trigger = max(1, records // args.batches)
        out["auto"] = auto_choice(nodes, shards, log, args.timeout)  # warms up both read modes too
        out["backlog"] = {mode: spark_phases.backlog(nodes, probe, mode, records, per_trigger, log, args.timeout)
                          for mode in ("executors", "driver")}
        busy = keys[::args.busy_every]
        out["caught_up"] = {mode: spark_phases.caught_up(nodes, probe, mode, out["backlog"][mode]["app"], busy,
                                                         args.rate, placed, args.seconds, log, args.timeout)
                            for mode in ("executors", "driver")}
        if first and not args.no_cut:
            if nodes.isolated:
                # about four batches for what the stream holds, while a quarter of the caught-up rate goes on
                in_stream = len(placed.snapshot())
                out["cut"] = spark_phases.cut(nodes, busy, max(1, args.rate // 4), placed, max(1, in_stream // 4),
                                              log, args.timeout)
            else:
                out["cut"] = {"skipped": f"no link can be cut: {nodes.network.reason}"}
    except Exception:  # noqa: BLE001 - reported in the results, and the exit code says so
        out["error"] = traceback.format_exc(limit=10)
        log(f"{shards} shards: the run failed:\n{out['error']}")
    finally:
        nodes.close()
    out["load_after"] = load_average()
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a SIGTERM still stops the cluster and the nodes
    began = time.monotonic()

    def log(message: str) -> None:
        print(f"[scale-spark {time.monotonic() - began:6.1f}s] {message}", flush=True)

    doc: dict[str, Any] = {"command": "python -m benchmarks.scale.spark " + shlex.join(argv),
                           "setup": {k: getattr(args, k) for k in ("sizes", "per_shard", "batches", "rate",
                                                                   "busy_every", "seconds")},
                           "machine": describe_machine(), "load_before": load_average(), "sizes": []}
    try:
        for i, shards in enumerate(args.sizes):
            doc["sizes"].append(run_size(shards, args, i == 0, log))
    finally:  # a SIGTERM (SystemExit) still writes what was measured
        doc["wall_s"] = round(time.monotonic() - began, 1)
        doc["load_after"] = load_average()
        doc["goals"] = goals(doc)
        write(doc, args.out)
        print(f"report: {args.out}", flush=True)
    cut: dict[str, Any] = next((s["cut"] for s in doc["sizes"] if "cut" in s), {})
    failed = any("error" in s for s in doc["sizes"]) or cut.get("lost") or cut.get("doubled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
