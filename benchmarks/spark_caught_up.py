"""The caught-up costs of the ``readStream`` source alone, small: ZooKeeper requests and CPU per batch by read mode.

``python -m benchmarks.spark_caught_up --shards 4,16 --seconds 8`` runs only the caught-up ``readStream`` rows of
the Spark benchmark (:func:`benchmarks.bench_spark.source_caught_up`: a producer at 1,000 records/s of 100 B, the
query at Spark's default trigger, its warm-up batches left out) on one ``local[2]`` session, for each shard count
and read mode (``--modes``), and prints one line per run: batches, records per batch, ZooKeeper writes and reads
per batch (counted by the server, see :mod:`benchmarks.zk_requests`), and the executor and driver Python CPU per
batch. A few minutes on a loaded 2-core machine, where the whole Spark benchmark takes much longer. Who calls: a
person comparing the costs of executor reads before and after a change; nothing is written to ``results/``.

``--driven`` leaves Spark out (for a machine too loaded to start it): the ``readMode=executors`` stream reader is
driven in this process as Spark drives it (latestOffset, partitions, each task's read, commit) while a producer puts
1,000 records/s, spread over every shard, or over the first ``--busy`` shards only; a ZooKeeper proxy counts each
request the reader's sessions send (pings left out). Per batch: requests by operation, tasks, and the Python CPU of
the tasks' reads (this process: no Spark worker's own cost).
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
            "batch_p50_ms": round(res["p50"]),  # already in ms
            "zk_writes_per_batch": _round(per_batch(costs, "zk_writes")),
            "zk_reads_per_batch": _round(per_batch(costs, "zk_reads")),
            "executor_python_ms_per_batch": _round(per_batch(costs, "executor_python_s", 1000.0)),
            "driver_python_ms_per_batch": _round(per_batch(costs, "driver_python_s", 1000.0))}


def driven(ctx: BenchContext, shards: int, seconds: float, busy: int | None) -> dict[str, Any]:
    """One ``--driven`` run (see the module docstring): figures per batch after two warm-up batches."""
    import hashlib
    import threading
    import time

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kinesis_spout.spark.source import ExecutorStreamReader
    from kinesis_spout.testing.kinesis import put_records
    from kinesis_spout.testing.zkproxy import Op, ZooKeeperFaultProxy

    endpoint = ctx.endpoint("kinesalite")
    stream = endpoint.create_stream(endpoint.unique_stream_name("driven"), shards=shards)
    client = endpoint.client()
    listed = sorted(client.list_shards(StreamName=stream)["Shards"], key=lambda s: s["ShardId"])
    ranges = [(int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
              for s in listed[:busy or shards]]
    keys = [k for k in (f"k{i}" for i in range(20_000))
            if any(lo <= int(hashlib.md5(k.encode()).hexdigest(), 16) <= hi for lo, hi in ranges)][:1000]
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.wait(0.1):
            batch = [keys[(n + i) % len(keys)] for i in range(100)]
            put_records(endpoint.client(), stream, [b"x" * 100] * 100, batch)
            n += 100

    with ZooKeeperFaultProxy(ctx.zookeeper_hosts) as proxy:
        options = {"streamName": stream, "appName": ctx.unique_app("driven"), "zookeeper": proxy.hosts,
                   "zookeeperPrefix": ZK_PREFIX, "endpointUrl": endpoint.endpoint_url, "region": endpoint.region,
                   "initialPosition": "TRIM_HORIZON", "readMode": "executors"}
        reader = ExecutorStreamReader(options)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            start = reader.initialOffset()
            batches = tasks = rows = 0
            cpu = 0.0
            plans: list[float] = []  # latestOffset ms of each measured batch
            before: dict[Any, int] = {}
            deadline = None
            while deadline is None or time.monotonic() < deadline:
                asked = time.monotonic()
                end = reader.latestOffset(start, ReadAllAvailable())
                if end == start:
                    continue
                planned_ms = (time.monotonic() - asked) * 1000
                parts = reader.partitions(start, end)
                took = time.process_time()
                for part in parts:
                    rows += sum(b.num_rows for b in reader.read(part))
                took = time.process_time() - took
                reader.commit(end)
                start = end
                if deadline is None:
                    batches += 1
                    if batches == 2:  # warm-up over
                        deadline = time.monotonic() + seconds
                        before, batches, rows = proxy.requests(), 0, 0
                    continue
                batches, tasks, cpu = batches + 1, tasks + len(parts), cpu + took
                plans.append(planned_ms)
            after = proxy.requests()
        finally:
            stop.set()
            producer.join(10)
            reader.stop()
    ops = {str(getattr(op, "name", op)): (n - before.get(op, 0)) / batches for op, n in after.items()
           if op != Op.PING and n - before.get(op, 0)}
    return {"mode": "executors (driven, no Spark)", "shards": shards, "busy_shards": busy or shards,
            "batches": batches, "records_per_batch": round(rows / batches, 1), "tasks_per_batch": tasks / batches,
            "zk_requests_per_batch": round(sum(ops.values()), 2),
            "zk_by_operation": {k: round(v, 2) for k, v in sorted(ops.items())},
            "task_python_cpu_ms": round(cpu * 1000 / max(1, tasks), 2),
            "latest_offset_ms_p50": round(sorted(plans)[len(plans) // 2], 1) if plans else None,
            "latest_offset_ms_max": round(max(plans), 1) if plans else None}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.spark_caught_up", description=__doc__.split("\n\n")[0])
    p.add_argument("--shards", default="4,16", help="comma-separated shard counts (default 4,16)")
    p.add_argument("--modes", default="executors,driver", help="comma-separated read modes (default both)")
    p.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run, after the warm-up batches")
    p.add_argument("--driven", action="store_true", help="no Spark: drive the executor-read reader in this process")
    p.add_argument("--busy", type=int, default=None, help="--driven: records go to this many shards only")
    args = p.parse_args(argv)
    ctx = BenchContext(quick=True)
    if args.driven:
        for shards in (int(s) for s in args.shards.split(",")):
            print(json.dumps(driven(ctx, shards, args.seconds, args.busy)), flush=True)
        return 0
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
