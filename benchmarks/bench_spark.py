"""Spark: batch latency and throughput of SpoutPipeline and of the ``readStream`` source, on a local[2] session.

**Caught up.** A producer thread puts 1,000 records/s (100 B each, 100 every 0.1 s, random partition keys) into a
new stream (4 shards; 4 and 16 for the source, see **Shards**) for the whole run, while the consumer reads it from
TRIM_HORIZON: each batch holds what arrived since the one before. ``SpoutPipeline`` runs with
``trigger_interval_s=1.0`` and a ``process(df, batch)`` that does ``df.count()``; a batch's latency is its
``BatchMetrics.latency_s`` (first record taken to last ack: the Arrow DataFrame, the count, the acks). The source
runs ``spark.readStream.format("kinesis_spout")`` with a ``foreachBatch`` sink doing ``df.count()`` and Spark's
default trigger (the next batch as soon as the last one is done and records are there); a batch's latency is
``durationMs.triggerExecution`` of its progress (planning with ``latestOffset``, the Spark job, the commit). The
first batches are warm-up, left out of the figures (the pipeline's first, the query's first two: they hold what
arrived while the consumer started); then the run measures for 12 s (10 s, and one run per figure, with ``--quick``)
and at least two batches, whichever ends later, and stops between batches. records/s are the records of the
batches kept over the time from the first kept batch's start to the last one's end: they match the producer's rate
when the consumer keeps up.

**Backlog.** The same consumers read a stream that already holds 20,000 records, from TRIM_HORIZON to the last: the
pipeline with ``max_batch_records=10,000`` and ``trigger_interval_s=0`` (batches back to back), the source with
``maxRecordsPerTrigger=10000`` and ``Trigger.AvailableNow`` (with ``--quick``: 10,000 records, 5,000 per batch).
records/s run from ``run()`` (or ``start()``) to the last record processed, so they include opening the spout or the
query (ZooKeeper, shard listing). The pipeline's baseline is a plain ``KinesisSpout`` with the same configuration
and batch size, no Spark: ``next_batch(max_records=10,000)`` then ``ack_many`` of the batch, timed from ``open()``
to the last ack (the goal: the pipeline at least 0.9x its records/s). The source in ``readMode=driver`` on 4 shards
is compared with the same baseline (the goal: at least 0.5x its records/s); its time includes starting the query,
and with it the fresh Python process PySpark starts for each query's source (see **Where PySpark comes from**). A
second ratio leaves the query's start out: the records over the sum of the batches' own time (each batch's
``triggerExecution`` in Spark's progress reports: planning, reading and the job).

One SparkSession (``local[2]``, Arrow on) serves every run. It is warmed up first: in a new session the first
job and the first Python data source query (one in each read mode) take seconds more than the next ones (both
times are in the summary).

**Where PySpark comes from.** Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python
process it starts (the ``pyspark.daemon`` processes, and the source runner it starts afresh for each query). Python
caches no bytecode for modules imported from a zip, so each of them compiles PySpark again: about 0.5 s of CPU, most
of a backlog query's start. The summary says which PySpark this run's processes imported (set ``SPARK_HOME`` before
the run to measure another: one whose ``python/lib`` holds no ``pyspark.zip``, so the installed package is imported,
or one whose ``pyspark.zip`` also holds the bytecode of its modules).

The spout and the source keep their default options otherwise, with checkpoints in the run's ZooKeeper, on
kinesalite. Each figure is the median of the runs (min-max in brackets); the goal is well under 1 s per batch
after the first (the AWS Scala connector for Structured Streaming takes about 5-10 s per batch).

**Shards.** The SpoutPipeline rows read 4 shards; the ``readStream`` rows read 4 and 16 shards (the same producer
rate and backlog, spread over more shards), in both read modes: ``readMode=driver`` (the default: ``latestOffset``
on the driver reads every record) and ``readMode=executors`` (the driver plans each batch with each shard's start;
one executor task per shard reads it and records its end in ZooKeeper). Within a round the runs alternate between
the modes, so both see the same load on this shared machine.

**Costs per batch** (``readStream`` rows). Around each measured window the benchmark reads ZooKeeper's request
counters and the CPU time of the Spark JVM's processes from ``/proc``; caught up, the window is the measured time
after the warm-up batches (its batches: those that started in it); for the backlog, the whole run from the query's
start (so its figures include starting the query: the driver Python process's start and imports, its clients,
the first shard listing). *ZooKeeper writes* are the write requests the server answered (``mntr``'s
``zk_cnt_updatelatency``: creates, sets, deletes, a multi as one, failed creates too, and session opens and
closes); *ZooKeeper reads* are its other requests (``zk_cnt_readlatency``: getData, exists, getChildren, failed
reads too) less the pings of the sessions earlier runs left open (their connections' packets, from ``stat``).
*Driver Python CPU* is the CPU of the Python processes where PySpark 4 runs a data source's driver side: the one
``pyspark.sql.streaming.python_streaming_source_runner`` process the JVM starts per query (``initialOffset``,
``latestOffset``, ``partitions``, ``commit``: planning, the ZooKeeper and Kinesis clients, and in
``readMode=driver`` all the reading; in the backlog runs it ends inside the window and a thread follows its CPU to
its end) and the ``pyspark.sql.worker.*`` workers that create the source when a query starts. *JVM helper
processes* are the short-lived processes the JVM starts on the driver: Hadoop's local file system runs
``readlink`` and ``chmod`` (through Java's ``jspawnhelper``) as it writes the query's checkpoint files,
for want of Hadoop's native library. *Stream thread* is the JVM thread that drives the query (offset and
commit logs, calls into the driver Python, job submission; caught-up runs only: the thread ends with the query).
*Executor Python CPU* is the CPU of the ``pyspark.worker`` processes that run the tasks' ``read`` (Spark reuses
them between tasks). *JVM CPU* is the whole JVM's own: in ``local[2]`` it holds the driver and the executors (task
threads, Arrow batches from Python, the sink's count, GC, JIT). The process that runs the query and its
``foreachBatch`` is not counted. Each run's raw costs are in ``latest.json`` (``costs``).

**A 100-shard stream** (the estimate in the summary, for ``readMode=executors``). Assumptions: each of 100 shards
receives 1,000 records/s of 100 B (Kinesis' per-shard write limit in records) and the query runs one batch per
second (a 1 s trigger), so each batch has one task of about 1,000 records per shard. Executor cores for the reading
= tasks/s x CPU per task + records/s x CPU per record, both costs fitted (least squares, no intercept, neither below
0) to the executor Python CPU of every ``readMode=executors`` run, caught up (many small tasks) and backlog (fewer,
larger tasks). It counts the Python side of the reading (the task's start in a reused Python worker, GetRecords,
parsing, the ZooKeeper end, Arrow), not the JVM's side of the tasks nor what the query does with the rows, and CPU,
not the task slots, which also wait for Kinesis' and ZooKeeper's replies. When the per-record cost is too small to
tell apart from the per-task cost in these runs, the summary says so and the estimate carries the per-task cost
only; the per-task cost of a ``readMode=driver`` task (which reads nothing) is given next to it. ZooKeeper requests
and driver Python CPU per batch are taken as linear in the shards (a line through the 4- and 16-shard caught-up
medians) and multiplied by one batch per second. The shard checkpoints the source copies to ZooKeeper are written at
most once per shard per ``checkpointIntervalS`` (1 s): when the measured batches came faster than one per second,
each carried only part of them, and the "up to" figure adds the share they did not carry (at most one write per
shard per batch). The JVM's own driver work (stream thread, helper processes) is left out of the estimate: it does
not grow with the shards here, and the helper processes are an artefact of checkpoints on the local file system
without Hadoop's native library.
"""

from __future__ import annotations

import datetime as dt
import random
import shutil
import statistics
import tempfile
import threading
import time
import zipfile
from functools import partial
from pathlib import Path
from typing import Any, Callable

from benchmarks.context import ZK_PREFIX, BenchContext, BenchmarkError
from benchmarks.machine import load_average
from benchmarks.spark_costs import CostSnapshot, RunnerWatch, SparkCostProbe, costs_between, is_source_runner
from benchmarks.spark_estimate import estimate
from benchmarks.spout_read import spout_config
from benchmarks.stats import Stopwatch, ratio, summary
from benchmarks.zk_requests import ZkCounters
from kinesis_spout import KinesisSpout, ZooKeeperCheckpointStore
from kinesis_spout.spark.pipeline.metrics import BatchMetrics, percentile
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records

TITLE = "Spark: SpoutPipeline and the readStream source, batch latency and records/s"
GOAL_MS = 1_000.0
SHARDS = 4  # the SpoutPipeline rows' shards
RECORD_BYTES = 100
RATE = 1_000  # records/s put by the producer of the caught-up runs
TRIGGER_S = 1.0  # the pipeline's trigger interval in the caught-up runs
PIPELINE_WARMUP = 1  # batches left out of the percentiles
SOURCE_WARMUP = 2
#: How long the warm-up batches may take (the first Spark job of a session starts the Python workers).
WARMUP_TIMEOUT_S = 120.0
#: A caught-up run measures for its window and until it has this many batches after the warm-up ones, whichever
#: ends later: on a loaded machine a batch can take longer than a short window (a smoke run's 2 s).
MIN_MEASURED_BATCHES = 2
#: How long the measured batches may take after the window, before a caught-up run gives up (a hang, not speed).
MEASURE_TIMEOUT_S = 120.0
WARMUP_RECORDS = 40  # records of the session's warm-up query

#: ``source_shards``: the shard counts of the readStream rows (the smoke run keeps to 4, for time)
SIZES: dict[str, dict[str, Any]] = {
    "full": {"caught_up_s": 12.0, "backlog": 20_000, "max_batch": 10_000, "repeats": 3, "source_shards": (4, 16)},
    "quick": {"caught_up_s": 10.0, "backlog": 10_000, "max_batch": 5_000, "repeats": 1, "source_shards": (4, 16)},
    "smoke": {"caught_up_s": 2.0, "backlog": 400, "max_batch": 200, "repeats": 1, "source_shards": (4,)},
}

PIPELINE = "SpoutPipeline"
PLAIN_SPOUT = "KinesisSpout, no Spark (next_batch + ack_many)"
#: SpoutPipeline on a backlog against the plain spout with the same batch size: records/s at least this many times
GOAL_PIPELINE_VS_SPOUT = 0.9
#: the readStream source (readMode=driver, 4 shards) on a backlog against the plain spout: records/s at least this
GOAL_SOURCE_VS_SPOUT = 0.5
SOURCE = "readStream source"
SOURCE_EXECUTORS = "readStream source, readMode=executors"
#: readMode=executors against the driver's reading: backlog records/s at least this many times, caught-up p50 under
#: GOAL_EXECUTOR_P50_MS
GOAL_EXECUTOR_SPEEDUP = 2.0
GOAL_EXECUTOR_P50_MS = 250.0

COLUMNS = [
    ("case", "consumer", "{}"),
    ("shards", "shards", "{}"),
    ("trigger", "trigger", "{}"),
    ("batch_p50_ms", "batch p50 ms", "fig0"),
    ("batch_p95_ms", "batch p95 ms", "fig0"),
    ("records_per_s", "records/s", "fig0"),
    ("batches", "batches/run", "fig0"),
    ("records_per_batch", "records/batch", "fig0"),
    ("dataframe_ms", "DataFrame ms", "fig0"),
    ("process_ms", "process ms", "fig0"),
    ("zk_writes_per_batch", "ZK writes/batch", "fig1"),
    ("zk_reads_per_batch", "ZK reads/batch", "fig1"),
    ("driver_cpu_ms_per_batch", "driver Python CPU ms/batch", "fig1"),
    ("stream_thread_ms_per_batch", "stream thread CPU ms/batch", "fig1"),
    ("jvm_helpers_ms_per_batch", "JVM helper processes CPU ms/batch", "fig1"),
    ("executor_cpu_ms_per_batch", "executor Python CPU ms/batch", "fig1"),
    ("jvm_cpu_ms_per_batch", "JVM CPU ms/batch", "fig0"),
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
        return (bool(warm_at) and time.monotonic() - warm_at[0] >= seconds
                and len(seen) >= PIPELINE_WARMUP + MIN_MEASURED_BATCHES)

    producer = Producer(endpoint, stream, RATE, RECORD_BYTES).start()
    try:
        final = pipeline.run(timeout_s=seconds + WARMUP_TIMEOUT_S + MEASURE_TIMEOUT_S,
                             until=_watch_batches(pipeline, seen, measured_long_enough))
    finally:
        put = producer.stop()
    if final.last is not None:
        seen[final.last.batch_id] = final.last
    if final.failed or sum(counted) != final.records:
        raise BenchmarkError(f"pipeline: {final.failed} records failed, counts {sum(counted)} != {final.records}")
    kept = [seen[i] for i in sorted(seen)][PIPELINE_WARMUP:]
    if len(kept) < MIN_MEASURED_BATCHES:
        raise BenchmarkError(f"pipeline made {len(seen)} batches in {seconds + WARMUP_TIMEOUT_S + MEASURE_TIMEOUT_S:g}"
                             f" s; too few to measure")
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


def spout_backlog(ctx: BenchContext, records: int, max_batch: int) -> dict[str, Any]:
    """The baseline of the pipeline's backlog run: a plain KinesisSpout with the pipeline's configuration reads
    the same kind of stream in batches of the same size (``next_batch(max_batch)``, then ``ack_many``), no Spark."""
    loaded = ctx.stream(SHARDS, records, RECORD_BYTES)
    config = spout_config(loaded.name, ctx.unique_app("spark-plain-spout"), ctx.zookeeper_hosts, ZK_PREFIX,
                          loaded.endpoint.endpoint_url, limit=10_000, checkpoint_interval_s=1.0)
    latencies: list[float] = []
    sizes: list[int] = []
    count = 0
    watch = Stopwatch().start()
    deadline = time.monotonic() + 60 + records / 500
    with KinesisSpout(config, ZooKeeperCheckpointStore.from_config(config)) as spout:
        while count < records:
            if time.monotonic() > deadline:
                raise BenchmarkError(f"plain spout read {count} of {records} records")
            started = time.perf_counter()
            batch = spout.next_batch(max_records=max_batch, timeout_s=0.5)
            if batch:
                spout.ack_many([t.message_id for t in batch])
                latencies.append(time.perf_counter() - started)
                sizes.append(len(batch))
                count += len(batch)
        elapsed = watch.elapsed()
    p50, p95 = _ms(latencies)
    return {"records_per_s": records / elapsed, "batches": len(latencies), "p50": p50, "p95": p95,
            "records_per_batch": statistics.median(sizes)}


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


def _window(batches: dict[int, dict[str, Any]], before: CostSnapshot, after: CostSnapshot,
            baseline: ZkCounters | None = None, runners: dict[int, float] | None = None) -> dict[str, Any]:
    """The costs between two snapshots, with the batches that started between them and their records."""
    inside = [b for b in batches.values() if before.at <= b["start"] < after.at]
    costs = costs_between(before, after, baseline, runners)
    costs.update(batches=len(inside), records=sum(b["rows"] for b in inside))
    return costs


def source_caught_up(ctx: BenchContext, spark: Any, probe: SparkCostProbe, seconds: float,
                     read_mode: str = "driver", shards: int = SHARDS) -> dict[str, Any]:
    endpoint = ctx.endpoint("kinesalite")
    stream = endpoint.create_stream(endpoint.unique_stream_name("spark-live"), shards=shards)
    counted: list[int] = []
    batches: dict[int, dict[str, Any]] = {}
    checkpoint = tempfile.mkdtemp(prefix="kinesis-spout-bench-spark-")
    baseline = probe.zookeeper.read()  # before this run opens its ZooKeeper sessions
    snaps: list[CostSnapshot] = []
    producer = Producer(endpoint, stream, RATE, RECORD_BYTES).start()
    put = 0
    try:
        query = _query(spark, _source_options(ctx, endpoint, stream, readMode=read_mode), counted, checkpoint,
                       available_now=False)
        try:
            give_up_at = time.monotonic() + WARMUP_TIMEOUT_S
            warm_at = None

            def measured_long_enough() -> bool:
                nonlocal warm_at, give_up_at
                _progress(query, batches)
                if warm_at is None and len(batches) >= SOURCE_WARMUP:
                    snaps.append(probe.snapshot())
                    warm_at = time.monotonic()
                    give_up_at = warm_at + seconds + MEASURE_TIMEOUT_S
                done = (warm_at is not None and time.monotonic() >= warm_at + seconds
                        and len(batches) >= SOURCE_WARMUP + MIN_MEASURED_BATCHES)
                if done:
                    snaps.append(probe.snapshot())
                return done

            _await(query, measured_long_enough, lambda: time.monotonic() >= give_up_at)
            if warm_at is None:
                raise BenchmarkError(f"the readStream query made {len(batches)} batches in {WARMUP_TIMEOUT_S:g} s")
            if len(snaps) < 2:
                raise BenchmarkError(f"the readStream query made {len(batches)} batches in {seconds:g} s and "
                                     f"{MEASURE_TIMEOUT_S:g} s more; too few to measure")
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
    probe.wait_source_runners_gone([pid for snap in snaps for pid, p in snap.tree.processes.items()
                                    if is_source_runner(p)])  # not to end inside the next run's window
    ordered = [batches[i] for i in sorted(batches)]
    kept = ordered[SOURCE_WARMUP:]
    if len(kept) < MIN_MEASURED_BATCHES:
        raise BenchmarkError(f"the readStream query made {len(batches)} batches; too few to measure")
    p50, p95 = _ms([b["ms"] / 1000 for b in kept])
    window = (kept[-1]["start"] - kept[0]["start"]).total_seconds() + kept[-1]["ms"] / 1000
    return {"p50": p50, "p95": p95, "records_per_s": sum(b["rows"] for b in kept) / window,
            "batches": len(batches), "records_per_batch": statistics.median(b["rows"] for b in kept), "put": put,
            "costs": _window(batches, snaps[0], snaps[-1], baseline)}


def source_backlog(ctx: BenchContext, spark: Any, probe: SparkCostProbe | None, records: int, max_batch: int,
                   read_mode: str = "driver", shards: int = SHARDS) -> dict[str, Any]:
    loaded = ctx.stream(shards, records, RECORD_BYTES)
    counted: list[int] = []
    batches: dict[int, dict[str, Any]] = {}
    checkpoint = tempfile.mkdtemp(prefix="kinesis-spout-bench-spark-")
    options = _source_options(ctx, loaded.endpoint, loaded.name, maxRecordsPerTrigger=str(max_batch),
                              readMode=read_mode)
    before = probe.snapshot() if probe is not None else None
    runners = RunnerWatch(probe.jvm_pid).start() if probe is not None else None  # the query's runner ends in it
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
        if probe is not None:
            probe.wait_source_runners_gone()  # while the watch follows the runner to its end
        seen = runners.stop() if runners is not None else {}
        settled = probe.wait_source_runners_gone(seen) if probe is not None else True
    if query.exception() is not None or sum(counted) != records:
        raise BenchmarkError(f"the AvailableNow query read {sum(counted)} of {records} records: {query.exception()}")
    p50, p95 = _ms([b["ms"] / 1000 for b in batches.values()])
    in_batches_s = sum(b["ms"] for b in batches.values()) / 1000
    out = {"records_per_s": records / wall, "batches": len(batches), "p50": p50, "p95": p95,
           "records_per_batch": statistics.median(b["rows"] for b in batches.values()),
           "batches_records_per_s": records / in_batches_s if in_batches_s > 0 else None}
    if probe is not None and before is not None:
        out["costs"] = {**_window(batches, before, probe.snapshot(), runners=seen), "runner_reaped": settled}
    return out


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


def pyspark_imports(spark_home: str | None) -> str:
    """Where the Python processes a Spark JVM started with ``spark_home`` (its ``SPARK_HOME``) import PySpark from.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on their path. Python does not cache the bytecode of
    modules it imports from a zip, so each of those processes compiles PySpark again (about 0.5 s of CPU) unless the
    zip holds bytecode of its own; without the zip they import the installed package, whose bytecode is cached."""
    archive = Path(spark_home, "python", "lib", "pyspark.zip") if spark_home else None
    if archive is None or not archive.is_file():
        return "the installed pyspark package (no pyspark.zip under SPARK_HOME)"
    with zipfile.ZipFile(archive) as opened:
        compiled = any(name.endswith(".pyc") for name in opened.namelist())
    return f"SPARK_HOME's pyspark.zip ({'with' if compiled else 'no'} bytecode)"


def warm_up(ctx: BenchContext, spark: Any) -> float:
    """Run a first job and a first ``readStream`` query in each read mode (on a small stream): in a new session they
    take seconds more than the next ones (the Python workers start and import the source). Returns how long that
    took."""
    import pyarrow

    watch = Stopwatch().start()
    spark.createDataFrame(pyarrow.table({"n": list(range(100))})).count()
    for mode in ("driver", "executors"):
        source_backlog(ctx, spark, None, WARMUP_RECORDS, WARMUP_RECORDS, mode)
    return round(watch.stop().wall_s, 1)


#: Figures per batch taken from a run's costs: (row key, costs key, scale)
PER_BATCH = (("zk_writes_per_batch", "zk_writes", 1.0), ("zk_reads_per_batch", "zk_reads", 1.0),
             ("driver_cpu_ms_per_batch", "driver_python_s", 1000.0),
             ("jvm_helpers_ms_per_batch", "jvm_helpers_s", 1000.0),
             ("stream_thread_ms_per_batch", "stream_thread_s", 1000.0),
             ("executor_cpu_ms_per_batch", "executor_python_s", 1000.0), ("jvm_cpu_ms_per_batch", "jvm_s", 1000.0))


def per_batch(costs: dict[str, Any], key: str, scale: float = 1.0) -> float | None:
    """A run's cost ``key`` divided by the batches of its window (None when it has no batch or no such figure)."""
    value = costs.get(key)
    if value is None or not costs.get("batches"):
        return None
    return float(value) * scale / costs["batches"]


def _row(case: str, kind: str, trigger: str, runs: list[dict[str, Any]], spark: tuple[float, float],
         records: int | None, repeats: int, shards: int = SHARDS) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case, "kind": kind, "trigger": trigger, "emulator": "kinesalite",
                           "shards": shards, "record_bytes": RECORD_BYTES, "repeats": repeats,
                           "batch_p50_ms": summary([r["p50"] for r in runs]),
                           "batch_p95_ms": summary([r["p95"] for r in runs]),
                           "records_per_s": summary([r["records_per_s"] for r in runs]),
                           "batches": summary([float(r["batches"]) for r in runs]),
                           "records_per_batch": summary([float(r["records_per_batch"]) for r in runs]),
                           "loadavg_1m": [r["loadavg_1m"] for r in runs], "spark_start_s": spark[0],
                           "spark_warmup_s": spark[1]}
    for key in ("dataframe_ms", "process_ms", "batches_records_per_s"):
        if all(r.get(key) is not None for r in runs):
            row[key] = summary([r[key] for r in runs])
    if all("costs" in r for r in runs):
        row["costs"] = [r["costs"] for r in runs]
        for key, cost, scale in PER_BATCH:
            values = [per_batch(r["costs"], cost, scale) for r in runs]
            if all(v is not None for v in values):
                row[key] = summary([float(v) for v in values if v is not None])
    if records is not None:
        row["records"] = records
    else:
        row["producer_records_per_s"] = RATE
    return row


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    spark, spark_start_s = start_spark(ctx)
    imports_from = pyspark_imports(spark._jvm.java.lang.System.getenv("SPARK_HOME"))
    probe = SparkCostProbe.for_session(spark, ctx.zookeeper_hosts, ZK_PREFIX)
    live_s, backlog, max_batch = size["caught_up_s"], size["backlog"], size["max_batch"]
    # (case, kind, shards) -> one measured run; within a round the modes alternate at each shard count
    steps: list[tuple[tuple[str, str, int], Callable[[], dict[str, Any]]]] = [
        ((PIPELINE, "caught up", SHARDS), lambda: pipeline_caught_up(ctx, spark, live_s))]
    for n in size["source_shards"]:
        steps += [((SOURCE, "caught up", n), partial(source_caught_up, ctx, spark, probe, live_s, "driver", n)),
                  ((SOURCE_EXECUTORS, "caught up", n),
                   partial(source_caught_up, ctx, spark, probe, live_s, "executors", n))]
    steps += [((PIPELINE, "backlog", SHARDS), lambda: pipeline_backlog(ctx, spark, backlog, max_batch)),
              ((PLAIN_SPOUT, "backlog", SHARDS), lambda: spout_backlog(ctx, backlog, max_batch))]
    for n in size["source_shards"]:
        steps += [((SOURCE, "backlog", n), partial(source_backlog, ctx, spark, probe, backlog, max_batch, "driver", n)),
                  ((SOURCE_EXECUTORS, "backlog", n),
                   partial(source_backlog, ctx, spark, probe, backlog, max_batch, "executors", n))]
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {key: [] for key, _ in steps}
    try:
        warmup_s = warm_up(ctx, spark)
        probe.wait_source_runners_gone()  # the warm-up queries' runners end before the first measured window
        ctx.progress(f"spark: session started in {spark_start_s:.1f} s; a first job and a first readStream query "
                     f"in each read mode took {warmup_s:.1f} s more")
        for round_no in range(size["repeats"]):
            for key, step in steps:
                res = step()
                res["loadavg_1m"] = (load_average() or [0.0])[0]
                results[key].append(res)
                ctx.progress(f"spark: round {round_no + 1}/{size['repeats']}: {_label(*key)}: batch p50 "
                             f"{res['p50']:.0f} ms, p95 {res['p95']:.0f} ms, {res['records_per_s']:,.0f} records/s, "
                             f"{res['batches']} batches{_cost_note(res.get('costs'))}")
    finally:
        spark.stop()
    n, started = size["repeats"], (spark_start_s, warmup_s)
    rows = []
    for (case, kind, shards), runs in results.items():
        trigger = {("caught up", PIPELINE): f"{TRIGGER_S:g} s", ("backlog", PIPELINE): "0 s",
                   ("backlog", PLAIN_SPOUT): "-"}.get(
            (kind, case), "default" if kind == "caught up" else "AvailableNow")
        rows.append(_row(case, kind, trigger, runs, started, backlog if kind == "backlog" else None, n, shards))
    rows.sort(key=lambda r: (r["kind"] != "caught up", r["case"] != PIPELINE, r["shards"]))
    for row in rows:
        row["workers_pyspark"] = imports_from
    by = {(r["case"], r["kind"], r["shards"]): r for r in rows}
    plain = by.get((PLAIN_SPOUT, "backlog", SHARDS))
    for case in (PIPELINE, SOURCE):
        if plain is not None and (case, "backlog", SHARDS) in by:
            piped = by[(case, "backlog", SHARDS)]
            piped["records_per_s_vs_plain_spout"] = ratio(piped["records_per_s"], plain["records_per_s"])
            piped["batch_limit"] = plain["batch_limit"] = max_batch
            if "batches_records_per_s" in piped:
                piped["batches_records_per_s_vs_plain_spout"] = ratio(piped["batches_records_per_s"],
                                                                      plain["records_per_s"])
    for (case, kind, shards), row in by.items():
        driver = by.get((SOURCE, kind, shards))
        if case == SOURCE_EXECUTORS and driver is not None:
            row["records_per_s_vs_driver_reads"] = ratio(row["records_per_s"], driver["records_per_s"])
    return rows


def _label(case: str, kind: str, shards: int) -> str:
    return f"{case} ({shards} shards) {kind}"


def _cost_note(costs: dict[str, Any] | None) -> str:
    """The progress line's part on costs: ZooKeeper requests and driver CPU per batch."""
    if not costs or not costs.get("batches"):
        return ""
    def ms(key: str) -> str:
        value = per_batch(costs, key, 1000.0)
        return "-" if value is None else f"{value:.1f}"

    w, r = per_batch(costs, "zk_writes"), per_batch(costs, "zk_reads")
    return (f"; per batch: ZooKeeper {w:.1f} writes, {r:.1f} reads; CPU ms: driver Python {ms('driver_python_s')}, "
            f"JVM helpers {ms('jvm_helpers_s')}")


# -- the summary --------------------------------------------------------------------------------------------------
def _driver_cpu(row: dict[str, Any]) -> str:
    """'X ms (+ JVM: stream thread Y ms, helper processes Z ms)' of a row's driver CPU per batch."""
    text = f"{row['driver_cpu_ms_per_batch']['median']:.0f} ms" if "driver_cpu_ms_per_batch" in row else "-"
    jvm = [f"{label} {row[key]['median']:.0f} ms" for key, label in
           (("stream_thread_ms_per_batch", "stream thread"), ("jvm_helpers_ms_per_batch", "helper processes"))
           if key in row]
    return text + (f" (+ JVM {', '.join(jvm)})" if jvm else "")


def _short_of(value: float, goal: float, higher_is_better: bool, unit: str) -> str:
    """How far a figure is from its goal: '' when met."""
    if higher_is_better:
        return "" if value >= goal else f"; missed: needs {goal / value:.1f}x more" if value > 0 else "; missed"
    return "" if value <= goal else f"; missed by {value - goal:,.0f} {unit} ({value / goal:.2f}x the goal)"


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Batch latency of every consumer caught up against the 1 s goal, backlog records/s; then, per shard count,
    readMode=executors against its goals, ZooKeeper requests and driver CPU per batch; the 100-shard estimate."""
    out = []
    for row in rows:
        p50, p95 = row["batch_p50_ms"]["median"], row["batch_p95_ms"]["median"]
        name = f"{row['case']} ({row['shards']} shards)"
        if row["kind"] == "caught up":
            out.append({"figure": f"{name} batch latency, caught up at {RATE:,} records/s "
                                  f"(p50 / p95, first batches left out)",
                        "value": f"{p50:,.0f} / {p95:,.0f} ms; {row['records_per_s']['median']:,.0f} records/s",
                        "goal": f"< {GOAL_MS:,.0f} ms (AWS Scala connector: 5-10 s)", "met": p95 < GOAL_MS})
        else:
            out.append({"figure": f"{name} records/s, backlog of {row['records']:,} records "
                                  f"(trigger {row['trigger']})",
                        "value": f"{row['records_per_s']['median']:,.0f} records/s in "
                                 f"{row['batches']['median']:g} batches", "goal": "-", "met": None})
        vs_spout = row.get("records_per_s_vs_plain_spout")
        if vs_spout is not None:
            goal = GOAL_PIPELINE_VS_SPOUT if row["case"] == PIPELINE else GOAL_SOURCE_VS_SPOUT
            start = " (the query's start included)" if row["case"] == SOURCE else ""
            out.append({"figure": f"{row['case']} / plain KinesisSpout, backlog records/s, batches of up to "
                                  f"{row['batch_limit']:,} records{start}",
                        "value": f"{vs_spout:.2f}x{_short_of(vs_spout, goal, True, 'x')}",
                        "goal": f">= {goal:g}x", "met": vs_spout >= goal})
        in_batches = row.get("batches_records_per_s_vs_plain_spout")
        if in_batches is not None:
            out.append({"figure": f"{row['case']} / plain KinesisSpout, backlog records/s over the batches' own "
                                  f"time (Spark's triggerExecution; the query's start left out)",
                        "value": f"{in_batches:.2f}x", "goal": "-", "met": None})
    by = {(r["case"], r["kind"], r["shards"]): r for r in rows}
    for shards in sorted({r["shards"] for r in rows if r["case"] == SOURCE_EXECUTORS}):
        backlog, live = by.get((SOURCE_EXECUTORS, "backlog", shards)), by.get((SOURCE_EXECUTORS, "caught up", shards))
        if backlog is not None and backlog.get("records_per_s_vs_driver_reads") is not None:
            speedup = backlog["records_per_s_vs_driver_reads"]
            out.append({"figure": f"readMode=executors / driver reads, backlog records/s, {shards} shards",
                        "value": f"{speedup:.2f}x{_short_of(speedup, GOAL_EXECUTOR_SPEEDUP, True, 'x')}",
                        "goal": f">= {GOAL_EXECUTOR_SPEEDUP:g}x", "met": speedup >= GOAL_EXECUTOR_SPEEDUP})
        if live is not None:
            p50 = live["batch_p50_ms"]["median"]
            out.append({"figure": f"readMode=executors batch latency p50, caught up, {shards} shards",
                        "value": f"{p50:,.0f} ms{_short_of(p50, GOAL_EXECUTOR_P50_MS, False, 'ms')}",
                        "goal": f"<= {GOAL_EXECUTOR_P50_MS:g} ms", "met": p50 <= GOAL_EXECUTOR_P50_MS})
        for kind in ("caught up", "backlog"):
            pair = [by.get((case, kind, shards)) for case in (SOURCE, SOURCE_EXECUTORS)]
            if any(r is None or "zk_writes_per_batch" not in r for r in pair):
                continue
            where = "steady state" if kind == "caught up" else "whole run, query start included"
            zk = "; ".join(f"{mode}: {r['zk_writes_per_batch']['median']:.1f} writes, "
                           f"{r['zk_reads_per_batch']['median']:.1f} reads"
                           for mode, r in zip(("driver", "executors"), pair) if r is not None)
            out.append({"figure": f"ZooKeeper requests per batch, {kind}, {shards} shards ({where})",
                        "value": zk, "goal": "-", "met": None})
            cpu = "; ".join(f"{mode}: {_driver_cpu(r)}" for mode, r in zip(("driver", "executors"), pair)
                            if r is not None)
            out.append({"figure": f"driver Python CPU per batch, {kind}, {shards} shards ({where})",
                        "value": cpu, "goal": "-", "met": None})
    guess = estimate(rows, SOURCE_EXECUTORS, SOURCE)
    if guess is not None:
        zk = ""
        if guess["zk_writes_per_s"] is not None:
            more = guess["zk_writes_per_s_up_to"] - guess["zk_writes_per_s"]
            zk = (f"; ZooKeeper about {guess['zk_writes_per_s']:,.0f} writes/s"
                  + (f" (up to {guess['zk_writes_per_s_up_to']:,.0f})" if more >= 0.5 else "")
                  + f" and {guess['zk_reads_per_s']:,.0f} reads/s")
        driver = ("" if guess["driver_cpu_ms_per_batch"] is None else
                  f"; driver Python about {guess['driver_cpu_ms_per_batch']:,.0f} ms CPU per batch")
        if guess["records_per_cpu_s"]:
            costs = (f"{guess['cpu_ms_per_task']:.1f} ms CPU per shard task + {guess['cpu_us_per_record']:.1f} µs "
                     f"per record, i.e. {guess['records_per_cpu_s']:,.0f} records/s per core once a task runs")
        else:
            costs = (f"{guess['cpu_ms_per_task']:.1f} ms CPU per shard task; the per-record cost was too small "
                     f"to tell apart from it in these runs")
        if guess["driver_mode_cpu_ms_per_task"] is not None:
            costs += (f"; a readMode=driver task, which only decodes rows the driver read, costs "
                      f"{guess['driver_mode_cpu_ms_per_task']:.1f} ms")
        out.append({"figure": f"estimate: readMode=executors on {guess['shards']} shards at "
                              f"{guess['records_per_s_per_shard']:,} records/s each, "
                              f"{guess['batches_per_s']:g} batch/s (assumptions in the notes)",
                    "value": f"about {guess['executor_cores']:.1f} executor cores of Python reading ({costs})"
                             f"{zk}{driver}", "goal": "-", "met": None})
    if rows:
        imports = rows[0].get("workers_pyspark")
        out.append({"figure": "local[2] SparkSession start; then its first job and first readStream queries"
                              + ("; where Spark's Python processes import PySpark from" if imports else ""),
                    "value": f"{rows[0]['spark_start_s']:.1f} s; {rows[0]['spark_warmup_s']:.1f} s"
                             + (f"; {imports}" if imports else ""),
                    "goal": "-", "met": None})
    return out


def plot(ax: Any, rows: list[dict[str, Any]]) -> None:
    """Batch latency p50 and p95 of every consumer, caught up, against the 1 s goal."""
    live = [r for r in rows if r["kind"] == "caught up"]
    xs = range(len(live))
    for offset, key, label in ((-0.2, "batch_p50_ms", "p50"), (0.2, "batch_p95_ms", "p95")):
        figs = [r[key] for r in live]
        ax.bar([x + offset for x in xs], [f["median"] for f in figs], 0.4, label=label, capsize=3,
               yerr=[[f["median"] - f["min"] for f in figs], [f["max"] - f["median"] for f in figs]])
    ax.axhline(GOAL_MS, color="#c44e52", linestyle="--", linewidth=1, label="goal 1 s")
    ax.set_xticks(list(xs), [f"{r['case'].replace('readStream source', 'source').replace(', readMode=', ' ')}"
                             f"\n{r['shards']} shards" for r in live], fontsize=6)
    ax.set_ylabel("ms per batch")
    ax.set_title(f"Spark batch latency, caught up ({RATE:,} records/s in)")
    ax.legend(fontsize=7)
