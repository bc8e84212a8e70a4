"""Writing to Kinesis from Spark: rows/s and CPU per row of ``df.write.format("kinesis_spout")``, plain and
aggregated (``aggregate=true``), against a hand-written ``foreachPartition`` that puts the rows with boto3's
``put_records`` in calls of 500 (refused entries put again), in the same run.

The rows are ``spark.range(N, numPartitions=2)`` with a partition key per row (the id) and 100 B of data (the id
padded), written by a ``local[2]`` session (Arrow on) into a new kinesalite stream of 4 shards per run. The writers
run alternately, the order flipping each round; each figure is the median of the runs (min-max in brackets).
rows/s run from the start of the Spark action to its end. CPU is the CPU of the Spark JVM and its Python workers
(``/proc``, the process tree of this benchmark less the emulator's processes) over the action, plus this process's
own: per row, in µs. kinesalite's own CPU caps the rate on this machine (it is not counted), so the CPU per row
says more than rows/s. The ratios are each sink's rows/s (and CPU per row) over the ``foreachPartition`` loop's.

A fourth writer puts nothing: a Python Arrow data source writer that only counts the rows of its Arrow batches. It is
what Spark itself costs any Python sink (the job, the rows made in the JVM, the Arrow batches sent to the Python
workers), so its rows/s is the ceiling of the sink's: when the aggregated sink (a few Kinesis records per 10,000
rows) is close to it, the rest is Spark's.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Callable

from benchmarks.context import BenchContext
from benchmarks.proc_cpu import snapshot, tree_cpu_between
from benchmarks.stats import ratio, summary
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream

TITLE = "Writing to Kinesis from Spark: rows/s and CPU per row, the sink (plain, aggregated) vs foreachPartition"

SIZES = {
    "full": {"shards": 4, "rows": 100_000, "row_bytes": 100, "repeats": 5},
    "quick": {"shards": 4, "rows": 20_000, "row_bytes": 100, "repeats": 3},
    "smoke": {"shards": 2, "rows": 500, "row_bytes": 100, "repeats": 1},
}

PLAIN = "sink"
AGGREGATED = "sink, aggregate=true"
LOOP = "foreachPartition + put_records"
FLOOR = "Spark alone (an Arrow writer that puts nothing)"
#: The goals, in rows/s over the loop's (same run).
GOAL_PLAIN = 1.0
GOAL_AGGREGATED = 5.0

COLUMNS = [
    ("case", "writer", "{}"),
    ("rows_per_s", "rows/s", "fig0"),
    ("cpu_us_per_row", "CPU µs/row", "fig1"),
    ("kinesis_records", "Kinesis records", "{}"),
    ("speed_vs_loop", "rows/s vs loop", "x"),
    ("cpu_vs_loop", "CPU vs loop", "x"),
]


def _put_partition(stream: str, url: str) -> Callable[[Any], None]:
    """The hand-written writer: each partition's rows put in calls of 500, refused entries put again."""

    def put(rows: Any) -> None:
        import boto3

        client = boto3.client("kinesis", endpoint_url=url, region_name="us-east-1")
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            todo = batch[:]
            while todo:
                reply = client.put_records(StreamName=stream, Records=todo)
                todo = [e for e, r in zip(todo, reply["Records"]) if r.get("ErrorCode")]
            batch.clear()

        for row in rows:
            batch.append({"Data": row.data.encode(), "PartitionKey": row.partitionKey})
            if len(batch) == 500:
                flush()
        flush()

    return put


def _null_sink() -> type:
    """A Python data source whose writer only counts the rows of its Arrow batches (defined here so that Spark
    pickles it by value to its Python workers)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class NullWriter(DataSourceArrowWriter):
        def write(self, iterator: Any) -> WriterCommitMessage:
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return WriterCommitMessage()

    class NullSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kinesis_spout_bench_null"

        def writer(self, schema: Any, overwrite: bool) -> NullWriter:
            return NullWriter()

    return NullSink


def _frame(spark: Any, rows: int, row_bytes: int) -> Any:
    return spark.range(0, rows, 1, 2).selectExpr("CAST(id AS STRING) AS partitionKey",
                                                 f"rpad(CAST(id AS STRING), {row_bytes}, 'x') AS data")


def _count(endpoint: KinesisEndpoint, stream: str) -> int:
    client = endpoint.client()
    total = 0
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        it = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            reply = client.get_records(ShardIterator=it, Limit=10_000)
            total += len(reply["Records"])
            if not reply["Records"]:
                break
            it = reply.get("NextShardIterator")
    return total


def _measure(ctx: BenchContext, spark: Any, case: str, size: dict[str, int]) -> dict[str, float]:
    endpoint = ctx.endpoint("kinesalite")
    client = endpoint.client()
    stream = f"bench-sink-{uuid.uuid4().hex[:8]}"
    client.create_stream(StreamName=stream, ShardCount=size["shards"])
    wait_for_stream(client, stream, timeout_s=60)
    df = _frame(spark, size["rows"], size["row_bytes"])

    def not_emulator(p: Any) -> bool:
        return "kinesalite" not in p.command and not p.command.startswith("node")

    before = snapshot(os.getpid(), with_threads=False)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if case == LOOP:
        df.foreachPartition(_put_partition(stream, endpoint.endpoint_url))
    elif case == FLOOR:
        df.write.format("kinesis_spout_bench_null").mode("append").save()
    else:
        (df.write.format("kinesis_spout").option("streamName", stream).option("endpointUrl", endpoint.endpoint_url)
         .option("region", "us-east-1").option("aggregate", str(case == AGGREGATED).lower()).mode("append").save())
    wall = time.perf_counter() - t0
    own = time.process_time() - cpu0
    tree = tree_cpu_between(before, snapshot(os.getpid(), with_threads=False), not_emulator).seconds
    records = _count(endpoint, stream)
    return {"rows_per_s": size["rows"] / wall, "cpu_us_per_row": (tree + own) / size["rows"] * 1e6,
            "kinesis_records": records}


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    from kinesis_spout.spark import KinesisSpoutDataSource
    from kinesis_spout.testing.spark import local_spark_session

    size = SIZES[ctx.profile(smoke)]
    ctx.endpoint("kinesalite")  # the credentials the Python workers inherit are set before the JVM starts
    spark = local_spark_session("kinesis-spout-bench-sink")
    spark.dataSource.register(KinesisSpoutDataSource)
    spark.dataSource.register(_null_sink())
    cases = [PLAIN, AGGREGATED, FLOOR, LOOP]
    ctx.progress("sink: warm-up")
    for case in cases:
        _measure(ctx, spark, case, {**size, "rows": min(size["rows"], 1000)})
    results: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    for n in range(size["repeats"]):
        for case in (cases if n % 2 == 0 else cases[::-1]):
            ctx.progress(f"sink: {case}, round {n + 1}/{size['repeats']}")
            results[case].append(_measure(ctx, spark, case, size))
    rows: list[dict[str, Any]] = []
    for case in cases:
        res = results[case]
        rows.append({"case": case, "emulator": "kinesalite", "shards": size["shards"], "rows": size["rows"],
                     "record_bytes": size["row_bytes"], "repeats": size["repeats"],
                     "rows_per_s": summary([r["rows_per_s"] for r in res]),
                     "cpu_us_per_row": summary([r["cpu_us_per_row"] for r in res]),
                     "kinesis_records": int(res[-1]["kinesis_records"])})
    loop = rows[-1]
    for row in rows[:-1]:
        row["speed_vs_loop"] = ratio(row["rows_per_s"], loop["rows_per_s"])
        row["cpu_vs_loop"] = ratio(row["cpu_us_per_row"], loop["cpu_us_per_row"])
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sink's rows/s and CPU per row against the hand-written loop, and Spark's own ceiling."""
    goals = {PLAIN: GOAL_PLAIN, AGGREGATED: GOAL_AGGREGATED}
    out: list[dict[str, Any]] = []
    for row in rows:
        if row.get("speed_vs_loop") is None or not row.get("cpu_vs_loop"):
            continue
        goal = goals.get(row["case"])
        out.append({"figure": f"{row['case']} rows/s / foreachPartition loop's",
                    "value": f"{row['speed_vs_loop']:.2f}x (CPU per row {row['cpu_vs_loop']:.2f}x)",
                    "goal": f">= {goal:g}x" if goal is not None else "the ceiling of any Python sink",
                    "met": row["speed_vs_loop"] >= goal if goal is not None else None})
    return out
