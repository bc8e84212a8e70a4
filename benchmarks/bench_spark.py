"""Spark: batch latency and throughput of SpoutPipeline and of the ``readStream`` source, on a local[2] session.

**Caught up.** A producer thread puts 1,000 records/s (100 B each, 100 every 0.1 s, random partition keys) into a
new 4-shard stream for the whole run, while the consumer reads it from TRIM_HORIZON: each batch holds what arrived
since the one before. ``SpoutPipeline`` runs with ``trigger_interval_s=1.0`` and a ``process(df, batch)`` that
does ``df.count()``; a batch's latency is its ``BatchMetrics.latency_s`` (first record taken to last ack: the
Arrow DataFrame, the count, the acks). The source runs ``spark.readStream.format("kinesis_spout")`` with a
``foreachBatch`` sink doing ``df.count()`` and Spark's default trigger (the next batch as soon as the last one is
done and records are there); a batch's latency is ``durationMs.triggerExecution`` of its progress (planning with
``latestOffset``, the Spark job, the commit). The first batches are warm-up, left out of the figures (the
pipeline's first, the query's first two: they hold what arrived while the consumer started); then the run
measures for 30 s (15 s with ``--quick``) and stops between batches. records/s are the records of the batches
kept over the time from the first kept batch's start to the last one's end: they match the producer's rate when
the consumer keeps up.

**Backlog.** The same consumers read a stream that already holds 20,000 records, from TRIM_HORIZON to the last:
the pipeline with ``max_batch_records=10,000`` and ``trigger_interval_s=0`` (batches back to back), the source
with ``maxRecordsPerTrigger=10000`` and ``Trigger.AvailableNow``. records/s run from ``run()`` (or ``start()``)
to the last record processed, so they include opening the spout or the query (ZooKeeper, shard listing).

One SparkSession (``local[2]``, Arrow on) serves every run. It is warmed up first: in a new session the first
job and the first Python data source query take seconds more than the next ones (both times are in the summary).
The spout and the source keep their default options otherwise, with checkpoints in the run's ZooKeeper, on
kinesalite. Each figure is the median of the runs (min-max in brackets); the goal is well under 1 s per batch
after the first (the AWS Scala connector for Structured Streaming takes about 5-10 s per batch).
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import statistics
import tempfile
import threading
import time
from typing import Any, Callable

from benchmarks.context import ZK_PREFIX, BenchContext, BenchmarkError
from benchmarks.machine import load_average
from benchmarks.spout_read import spout_config
from benchmarks.stats import Stopwatch, ratio, summary
from kinesis_spout.spark.metrics import BatchMetrics, percentile
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records

TITLE = "Spark: SpoutPipeline and the readStream source, batch latency and records/s"
GOAL_MS = 1_000.0
SHARDS = 4
RECORD_BYTES = 100
RATE = 1_000  # records/s put by the producer of the caught-up runs
TRIGGER_S = 1.0  # the pipeline's trigger interval in the caught-up runs
PIPELINE_WARMUP = 1  # batches left out of the percentiles
SOURCE_WARMUP = 2
#: How long the warm-up batches may take (the first Spark job of a session starts the Python workers).
WARMUP_TIMEOUT_S = 120.0
WARMUP_RECORDS = 40  # records of the session's warm-up query

SIZES = {
    "full": {"caught_up_s": 30.0, "backlog": 20_000, "max_batch": 10_000, "repeats": 3},
    "quick": {"caught_up_s": 15.0, "backlog": 10_000, "max_batch": 5_000, "repeats": 2},
    "smoke": {"caught_up_s": 2.0, "backlog": 400, "max_batch": 200, "repeats": 1},
}

PIPELINE = "SpoutPipeline"
SOURCE = "readStream source"
SOURCE_EXECUTORS = "readStream source, readMode=executors"
#: readMode=executors against the driver's reading: backlog records/s at least this many times, caught-up p50 under
#: GOAL_EXECUTOR_P50_MS
GOAL_EXECUTOR_SPEEDUP = 2.0
GOAL_EXECUTOR_P50_MS = 250.0

COLUMNS = [
    ("case", "consumer", "{}"),
    ("trigger", "trigger", "{}"),
    ("batch_p50_ms", "batch p50 ms", "fig0"),
    ("batch_p95_ms", "batch p95 ms", "fig0"),
    ("records_per_s", "records/s", "fig0"),
    ("batches", "batches/run", "fig0"),
    ("records_per_batch", "records/batch", "fig0"),
    ("dataframe_ms", "DataFrame ms", "fig0"),
    ("process_ms", "process ms", "fig0"),
]


class Producer:
    """Puts ``rate`` records/s of ``record_bytes`` bytes into a stream from a thread, 10 PutRecords calls a second.

    Who calls: a caught-up run, ``start()`` before the consumer and ``stop()`` after it; ``stop()`` joins the
    thread and returns the number of records put. Random partition keys spread the records over the shards.
    """

    def __init__(self, endpoint: KinesisEndpoint, stream: str, rate: int, record_bytes: int) -> None:
        self.endpoint = endpoint
        self.stream = stream
        self.rate = rate
        self.record_bytes = record_bytes
        self.put = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-producer", daemon=True)

    def start(self) -> "Producer":
        self._thread.start()
        return self

    def _run(self) -> None:
        client = self.endpoint.client()
        rng = random.Random(7)
        per_tick = max(1, self.rate // 10)
        next_tick = time.monotonic()
        try:
            while not self._stop.is_set():
                data = [bytes(rng.choices(range(97, 123), k=self.record_bytes)) for _ in range(per_tick)]
                keys = [f"pk-{rng.getrandbits(32)}" for _ in range(per_tick)]
                put_records(client, self.stream, data, keys)
                self.put += per_tick
                next_tick += 0.1
                self._stop.wait(max(0.0, next_tick - time.monotonic()))  # pacing, not synchronisation
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise BenchmarkError(f"the producer of {self.stream!r} failed: {self.error!r}") from self.error
        return self.put


def _ms(values: list[float]) -> tuple[float, float]:
    """p50 and p95 (nearest rank) of latencies in seconds, in milliseconds."""
    return percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000  # type: ignore[operator]


def _source_options(ctx: BenchContext, endpoint: KinesisEndpoint, stream: str, **extra: str) -> dict[str, str]:
    return {"streamName": stream, "appName": ctx.unique_app("spark-source"), "zookeeper": ctx.zookeeper_hosts,
            "zookeeperPrefix": ZK_PREFIX, "endpointUrl": endpoint.endpoint_url, "region": endpoint.region,
            "initialPosition": "TRIM_HORIZON", **extra}


# -- SpoutPipeline ----------------------------------------------------------------------------------------------
def _pipeline(ctx: BenchContext, spark: Any, stream: str, url: str, counted: list[int], **limits: Any) -> Any:
    from kinesis_spout.spark import SpoutPipeline

    def count(df: Any, batch: Any) -> None:
        counted.append(df.count())

    config = spout_config(stream, ctx.unique_app("spark-pipeline"), ctx.zookeeper_hosts, ZK_PREFIX, url,
                          limit=10_000, checkpoint_interval_s=1.0)
    return SpoutPipeline(spark, config, count, **limits)


def _watch_batches(pipeline: Any, seen: dict[int, BatchMetrics], done: Callable[[], bool] = lambda: False
                   ) -> Callable[[], bool]:
    """An ``until`` for ``run()``: it is called after every batch, so it sees each batch's figures once."""
    def until() -> bool:
        last = pipeline.metrics.last
        if last is not None:
            seen[last.batch_id] = last
        return done()
    return until


def pipeline_caught_up(ctx: BenchContext, spark: Any, seconds: float) -> dict[str, Any]:
    endpoint = ctx.endpoint("kinesalite")
    stream = endpoint.create_stream(endpoint.unique_stream_name("spark-live"), shards=SHARDS)
    counted: list[int] = []
    pipeline = _pipeline(ctx, spark, stream, endpoint.endpoint_url, counted, trigger_interval_s=TRIGGER_S)
    seen: dict[int, BatchMetrics] = {}
    warm_at: list[float] = []

    def measured_long_enough() -> bool:
        if not warm_at and len(seen) >= PIPELINE_WARMUP:
            warm_at.append(time.monotonic())
        return bool(warm_at) and time.monotonic() - warm_at[0] >= seconds

    producer = Producer(endpoint, stream, RATE, RECORD_BYTES).start()
    try:
        final = pipeline.run(timeout_s=seconds + WARMUP_TIMEOUT_S,
                             until=_watch_batches(pipeline, seen, measured_long_enough))
    finally:
        put = producer.stop()
    if final.last is not None:
        seen[final.last.batch_id] = final.last
    if final.failed or sum(counted) != final.records:
        raise BenchmarkError(f"pipeline: {final.failed} records failed, counts {sum(counted)} != {final.records}")
    kept = [seen[i] for i in sorted(seen)][PIPELINE_WARMUP:]
    if len(kept) < 2:
        raise BenchmarkError(f"pipeline made {len(seen)} batches in {seconds:g} s; too few to measure")
    p50, p95 = _ms([b.latency_s for b in kept])
    window = (kept[-1].started_at - kept[0].started_at).total_seconds() + kept[-1].latency_s
    return {"p50": p50, "p95": p95, "records_per_s": sum(b.records for b in kept) / window,
            "batches": len(seen), "records_per_batch": statistics.median(b.records for b in kept),
            "dataframe_ms": statistics.median(b.dataframe_s for b in kept) * 1000,
            "process_ms": statistics.median(b.process_s for b in kept) * 1000, "put": put}


def pipeline_backlog(ctx: BenchContext, spark: Any, records: int, max_batch: int) -> dict[str, Any]:
    loaded = ctx.stream(SHARDS, records, RECORD_BYTES)
    counted: list[int] = []
    pipeline = _pipeline(ctx, spark, loaded.name, loaded.endpoint.endpoint_url, counted, trigger_interval_s=0.0,
                         max_batch_records=max_batch)
    seen: dict[int, BatchMetrics] = {}
    done_at: list[float] = []

    def done() -> bool:
        if pipeline.metrics.records >= records:
            done_at.append(watch.elapsed())
            return True
        return False

    watch = Stopwatch().start()
    final = pipeline.run(timeout_s=60 + records / 500, until=_watch_batches(pipeline, seen, done))
    if not done_at or sum(counted) != records or final.failed:
        raise BenchmarkError(f"pipeline read {final.records} of {records} records ({final.failed} failed)")
    p50, p95 = _ms([b.latency_s for b in seen.values()])
    return {"records_per_s": records / done_at[0], "batches": len(seen), "p50": p50, "p95": p95,
            "records_per_batch": statistics.median(b.records for b in seen.values())}


# -- the readStream source --------------------------------------------------------------------------------------
def _progress(query: Any, into: dict[int, dict[str, Any]]) -> None:
    """Keep the progress of every batch that had records (idle progress reports are left out)."""
    for p in query.recentProgress:
        rows = int(p.numInputRows)
        if rows > 0:
            start = dt.datetime.fromisoformat(str(p.timestamp).replace("Z", "+00:00"))
            into[int(p.batchId)] = {"rows": rows, "start": start,
                                    "ms": float(p.durationMs["triggerExecution"])}


def _query(spark: Any, options: dict[str, str], counted: list[int], checkpoint: str, available_now: bool) -> Any:
    def count(df: Any, batch_id: int) -> None:
        counted.append(df.count())

    df = spark.readStream.format("kinesis_spout").options(**options).load()
    writer = df.writeStream.foreachBatch(count).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def _await(query: Any, done: Callable[[], bool], give_up: Callable[[], bool], timeout_s: float = 3600.0) -> None:
    """Wait until ``done()`` (checked every 0.2 s) or ``give_up()``; a query that ends before raises."""
    deadline = time.monotonic() + timeout_s
    while not done() and not give_up():
        if time.monotonic() >= deadline:
            raise BenchmarkError(f"the readStream query did not get there in {timeout_s:g} s")
        if query.awaitTermination(0.2):
            raise BenchmarkError(f"the readStream query stopped early: {query.exception()}")


def source_caught_up(ctx: BenchContext, spark: Any, seconds: float, read_mode: str = "driver") -> dict[str, Any]:
    endpoint = ctx.endpoint("kinesalite")
    stream = endpoint.create_stream(endpoint.unique_stream_name("spark-live"), shards=SHARDS)
    counted: list[int] = []
    batches: dict[int, dict[str, Any]] = {}
    checkpoint = tempfile.mkdtemp(prefix="kinesis-spout-bench-spark-")
    producer = Producer(endpoint, stream, RATE, RECORD_BYTES).start()
    put = 0
    try:
        query = _query(spark, _source_options(ctx, endpoint, stream, readMode=read_mode), counted, checkpoint,
                       available_now=False)
        try:
            deadline = time.monotonic() + seconds + WARMUP_TIMEOUT_S
            warm_at = None

            def measured_long_enough() -> bool:
                nonlocal warm_at, deadline
                _progress(query, batches)
                if warm_at is None and len(batches) >= SOURCE_WARMUP:
                    warm_at = time.monotonic()
                    deadline = warm_at + seconds
                return warm_at is not None and time.monotonic() >= deadline

            _await(query, measured_long_enough, lambda: time.monotonic() >= deadline)
            if warm_at is None:
                raise BenchmarkError(f"the readStream query made {len(batches)} batches in {WARMUP_TIMEOUT_S:g} s")
            # stop between batches: the producer first, then the query once it has read everything
            put = producer.stop()
            drained = lambda: sum(counted) >= put  # noqa: E731
            _await(query, drained, lambda: False, timeout_s=60.0)
        finally:
            query.stop()
        _progress(query, batches)
    finally:
        producer.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    ordered = [batches[i] for i in sorted(batches)]
    kept = ordered[SOURCE_WARMUP:]
    if len(kept) < 2:
        raise BenchmarkError(f"the readStream query made {len(batches)} batches in {seconds:g} s; too few")
    p50, p95 = _ms([b["ms"] / 1000 for b in kept])
    window = (kept[-1]["start"] - kept[0]["start"]).total_seconds() + kept[-1]["ms"] / 1000
    return {"p50": p50, "p95": p95, "records_per_s": sum(b["rows"] for b in kept) / window,
            "batches": len(batches), "records_per_batch": statistics.median(b["rows"] for b in kept), "put": put}


def source_backlog(ctx: BenchContext, spark: Any, records: int, max_batch: int, read_mode: str = "driver"
                   ) -> dict[str, Any]:
    loaded = ctx.stream(SHARDS, records, RECORD_BYTES)
    counted: list[int] = []
    batches: dict[int, dict[str, Any]] = {}
    checkpoint = tempfile.mkdtemp(prefix="kinesis-spout-bench-spark-")
    options = _source_options(ctx, loaded.endpoint, loaded.name, maxRecordsPerTrigger=str(max_batch),
                              readMode=read_mode)
    try:
        watch = Stopwatch().start()
        query = _query(spark, options, counted, checkpoint, available_now=True)
        finished = query.awaitTermination(60 + records / 500)
        wall = watch.stop().wall_s
        if not finished:
            query.stop()
            raise BenchmarkError(f"the AvailableNow query did not finish {records} records in time")
        _progress(query, batches)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    if query.exception() is not None or sum(counted) != records:
        raise BenchmarkError(f"the AvailableNow query read {sum(counted)} of {records} records: {query.exception()}")
    p50, p95 = _ms([b["ms"] / 1000 for b in batches.values()])
    return {"records_per_s": records / wall, "batches": len(batches), "p50": p50, "p95": p95,
            "records_per_batch": statistics.median(b["rows"] for b in batches.values())}


# -- the benchmark ----------------------------------------------------------------------------------------------
def start_spark(ctx: BenchContext) -> tuple[Any, float]:
    """The local[2] session every run shares, and how long it took to start. Servers and credentials come first:
    Spark's Python workers inherit the environment of the moment the JVM starts."""
    from kinesis_spout.spark import KinesisSpoutDataSource
    from kinesis_spout.testing.spark import local_spark_session

    ctx.endpoint("kinesalite")
    ctx.zookeeper_hosts  # noqa: B018 - started now, not during a measured run
    ctx.progress("spark: starting a local[2] SparkSession")
    watch = Stopwatch().start()
    spark = local_spark_session("kinesis-spout-bench", cores=2)
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
    spark.dataSource.register(KinesisSpoutDataSource)
    return spark, round(watch.stop().wall_s, 1)


def warm_up(ctx: BenchContext, spark: Any) -> float:
    """Run a first job and a first ``readStream`` query (on a small stream): in a new session they take seconds
    more than the next ones. Returns how long that took."""
    import pyarrow

    watch = Stopwatch().start()
    spark.createDataFrame(pyarrow.table({"n": list(range(100))})).count()
    source_backlog(ctx, spark, WARMUP_RECORDS, WARMUP_RECORDS)
    return round(watch.stop().wall_s, 1)


def _row(case: str, kind: str, trigger: str, runs: list[dict[str, Any]], spark: tuple[float, float],
         records: int | None, repeats: int) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case, "kind": kind, "trigger": trigger, "emulator": "kinesalite",
                           "shards": SHARDS, "record_bytes": RECORD_BYTES, "repeats": repeats,
                           "batch_p50_ms": summary([r["p50"] for r in runs]),
                           "batch_p95_ms": summary([r["p95"] for r in runs]),
                           "records_per_s": summary([r["records_per_s"] for r in runs]),
                           "batches": summary([float(r["batches"]) for r in runs]),
                           "records_per_batch": summary([float(r["records_per_batch"]) for r in runs]),
                           "loadavg_1m": [r["loadavg_1m"] for r in runs], "spark_start_s": spark[0],
                           "spark_warmup_s": spark[1]}
    for key in ("dataframe_ms", "process_ms"):
        if key in runs[0]:
            row[key] = summary([r[key] for r in runs])
    if records is not None:
        row["records"] = records
    else:
        row["producer_records_per_s"] = RATE
    return row


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    spark, spark_start_s = start_spark(ctx)
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("pipeline caught up", lambda: pipeline_caught_up(ctx, spark, size["caught_up_s"])),
        ("source caught up", lambda: source_caught_up(ctx, spark, size["caught_up_s"])),
        ("executors caught up", lambda: source_caught_up(ctx, spark, size["caught_up_s"], "executors")),
        ("pipeline backlog", lambda: pipeline_backlog(ctx, spark, size["backlog"], size["max_batch"])),
        ("source backlog", lambda: source_backlog(ctx, spark, size["backlog"], size["max_batch"])),
        ("executors backlog", lambda: source_backlog(ctx, spark, size["backlog"], size["max_batch"], "executors")),
    ]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in steps}
    try:
        warmup_s = warm_up(ctx, spark)
        ctx.progress(f"spark: session started in {spark_start_s:.1f} s; a first job and a first readStream query "
                     f"took {warmup_s:.1f} s more")
        for round_no in range(size["repeats"]):
            for name, step in steps:
                res = step()
                res["loadavg_1m"] = (load_average() or [0.0])[0]
                results[name].append(res)
                ctx.progress(f"spark: round {round_no + 1}/{size['repeats']}: {name}: batch p50 {res['p50']:.0f} "
                             f"ms, p95 {res['p95']:.0f} ms, {res['records_per_s']:,.0f} records/s, "
                             f"{res['batches']} batches")
    finally:
        spark.stop()
    n, backlog, started = size["repeats"], size["backlog"], (spark_start_s, warmup_s)
    rows = [
        _row(PIPELINE, "caught up", f"{TRIGGER_S:g} s", results["pipeline caught up"], started, None, n),
        _row(SOURCE, "caught up", "default", results["source caught up"], started, None, n),
        _row(SOURCE_EXECUTORS, "caught up", "default", results["executors caught up"], started, None, n),
        _row(PIPELINE, "backlog", "0 s", results["pipeline backlog"], started, backlog, n),
        _row(SOURCE, "backlog", "AvailableNow", results["source backlog"], started, backlog, n),
        _row(SOURCE_EXECUTORS, "backlog", "AvailableNow", results["executors backlog"], started, backlog, n),
    ]
    by = {(r["case"], r["kind"]): r for r in rows}
    for kind in ("caught up", "backlog"):
        by[(SOURCE_EXECUTORS, kind)]["records_per_s_vs_driver_reads"] = ratio(
            by[(SOURCE_EXECUTORS, kind)]["records_per_s"], by[(SOURCE, kind)]["records_per_s"])
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Batch latency of both consumers on a caught-up stream against the goal; backlog records/s."""
    out = []
    for row in rows:
        p50, p95 = row["batch_p50_ms"]["median"], row["batch_p95_ms"]["median"]
        if row["kind"] == "caught up":
            out.append({"figure": f"{row['case']} batch latency, caught up at {RATE:,} records/s "
                                  f"(p50 / p95, first batches left out)",
                        "value": f"{p50:,.0f} / {p95:,.0f} ms; {row['records_per_s']['median']:,.0f} records/s",
                        "goal": f"< {GOAL_MS:,.0f} ms (AWS Scala connector: 5-10 s)", "met": p95 < GOAL_MS})
        else:
            out.append({"figure": f"{row['case']} records/s, backlog of {row['records']:,} records "
                                  f"(trigger {row['trigger']})",
                        "value": f"{row['records_per_s']['median']:,.0f} records/s in "
                                 f"{row['batches']['median']:g} batches", "goal": "-", "met": None})
    by = {(r["case"], r["kind"]): r for r in rows}
    backlog, live = by.get((SOURCE_EXECUTORS, "backlog")), by.get((SOURCE_EXECUTORS, "caught up"))
    if backlog is not None and backlog.get("records_per_s_vs_driver_reads") is not None:
        speedup = backlog["records_per_s_vs_driver_reads"]
        out.append({"figure": "readMode=executors / driver reads, backlog records/s",
                    "value": f"{speedup:.2f}x", "goal": f">= {GOAL_EXECUTOR_SPEEDUP:g}x",
                    "met": speedup >= GOAL_EXECUTOR_SPEEDUP})
    if live is not None:
        p50 = live["batch_p50_ms"]["median"]
        out.append({"figure": "readMode=executors batch latency p50, caught up", "value": f"{p50:,.0f} ms",
                    "goal": f"<= {GOAL_EXECUTOR_P50_MS:g} ms", "met": p50 <= GOAL_EXECUTOR_P50_MS})
    if rows:
        out.append({"figure": "local[2] SparkSession start; then its first job and first readStream query",
                    "value": f"{rows[0]['spark_start_s']:.1f} s; {rows[0]['spark_warmup_s']:.1f} s",
                    "goal": "-", "met": None})
    return out


def plot(ax: Any, rows: list[dict[str, Any]]) -> None:
    """Batch latency p50 and p95 of both consumers, caught up, against the 1 s goal."""
    live = [r for r in rows if r["kind"] == "caught up"]
    xs = range(len(live))
    for offset, key, label in ((-0.2, "batch_p50_ms", "p50"), (0.2, "batch_p95_ms", "p95")):
        figs = [r[key] for r in live]
        ax.bar([x + offset for x in xs], [f["median"] for f in figs], 0.4, label=label, capsize=3,
               yerr=[[f["median"] - f["min"] for f in figs], [f["max"] - f["median"] for f in figs]])
    ax.axhline(GOAL_MS, color="#c44e52", linestyle="--", linewidth=1, label="goal 1 s")
    ax.set_xticks(list(xs), [f"{r['case']}\n({r['records_per_s']['median']:,.0f} records/s)" for r in live],
                  fontsize=7)
    ax.set_ylabel("ms per batch")
    ax.set_title(f"Spark batch latency, caught up ({RATE:,} records/s in)")
    ax.legend(fontsize=7)
