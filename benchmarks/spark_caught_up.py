"""The caught-up costs of the ``readStream`` source alone, small: ZooKeeper requests and CPU per batch by read mode.

``python -m benchmarks.spark_caught_up --shards 4,16 --seconds 8`` runs only the caught-up ``readStream`` rows of
the Spark benchmark (:func:`benchmarks.bench_spark.source_caught_up`: a producer at 1,000 records/s of 100 B, the
query at Spark's default trigger, its warm-up batches left out) on one ``local[2]`` session, for each shard count
and read mode (``--modes``), and prints one line per run: batches, records per batch, ZooKeeper writes and reads
per batch (counted by the server, see :mod:`benchmarks.zk_requests`), and the executor and driver Python CPU per
batch. A few minutes on a loaded 2-core machine, where the whole Spark benchmark takes much longer. Who calls: a
person comparing the costs of executor reads before and after a change; nothing is written to ``results/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from benchmarks.bench_spark import per_batch, source_caught_up, start_spark, warm_up
from benchmarks.context import ZK_PREFIX, BenchContext
from benchmarks.spark_costs import SparkCostProbe


def summarize(mode: str, shards: int, res: dict[str, Any]) -> dict[str, Any]:
    """One run's figures per batch (pure)."""
    costs = res["costs"]
    return {"mode": mode, "shards": shards, "batches": costs.get("batches"),
            "records_per_batch": round(res["records_per_batch"], 1),
            "batch_p50_ms": round(res["p50"] * 1000),
            "zk_writes_per_batch": _round(per_batch(costs, "zk_writes")),
            "zk_reads_per_batch": _round(per_batch(costs, "zk_reads")),
            "executor_python_ms_per_batch": _round(per_batch(costs, "executor_python_s", 1000.0)),
            "driver_python_ms_per_batch": _round(per_batch(costs, "driver_python_s", 1000.0))}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.spark_caught_up", description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", default="4,16", help="comma-separated shard counts (default 4,16)")
    p.add_argument("--modes", default="executors,driver", help="comma-separated read modes (default both)")
    p.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run, after the warm-up batches")
    args = p.parse_args(argv)
    ctx = BenchContext(quick=True)
    spark, _ = start_spark(ctx)
    probe = SparkCostProbe.for_session(spark, ctx.zookeeper_hosts, ZK_PREFIX)
    rows = []
    try:
        warm_up(ctx, spark)
        probe.wait_source_runners_gone()
        for shards in (int(s) for s in args.shards.split(",")):
            for mode in args.modes.split(","):
                res = source_caught_up(ctx, spark, probe, args.seconds, mode, shards)
                row = summarize(mode, shards, res)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        spark.stop()
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
