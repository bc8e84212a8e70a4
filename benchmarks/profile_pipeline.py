"""Where SpoutPipeline spends its time on a backlog, beyond a plain KinesisSpout: ``python -m
benchmarks.profile_pipeline [--rounds N] [--records N] [--batch N] [--cprofile]``.

A 4-shard kinesalite stream of 20,000 records of 100 B (``--records``) is read from TRIM_HORIZON, with checkpoints
in a private ZooKeeper, by the two consumers of the Spark benchmark's backlog rows (``benchmarks.bench_spark``),
in turns within each round so that both see the same load: a plain KinesisSpout (``next_batch(max_records=10,000)``
then ``ack_many``, no Spark) and a SpoutPipeline on a ``local[2]`` session with ``max_batch_records=10,000``
(``--batch``), ``trigger_interval_s=0`` and a ``process(df, batch)`` that does ``df.count()``. Both are timed from
``open()``/``run()`` to the last record done, as in the benchmark; each round prints both records/s and their
ratio (pipeline / plain spout), and the end their medians.

The pipeline's run thread is timed by phase (a wrapper around each of the pipeline's steps; wall time): opening the
spout, taking a batch (``RunLoop.collect_columns``: waiting for the readers and taking what is ready), the Arrow table
(the columnar batch's ``to_arrow`` and the Spark columns added to it, ``ColumnView``), ``spark.createDataFrame``, the
Spark job (the ``process`` function with its count), acks (``ColumnView.settle``), the batch ids in ZooKeeper (the
first read, and storing each batch's id before its ``process``), the figures and log line of each batch
(``RunLoop.record``), pacing (``RunLoop.wait_until``) and the rest. The table gives each phase in ms
per batch and per 1,000 records, summed over the measured runs, and the run thread's own CPU in it
(``time.thread_time``): the rest of its wall time is waiting (for Spark's JVM, ZooKeeper, the readers, the GIL). The
timeline of the last measured run shows where the batches fall. ``--cprofile`` adds one more pipeline run under cProfile
(the run thread only, wall clock) and prints its most expensive functions; profiling slows the run, so compare its
shares, not its times. ``--no-job``: ``process`` runs no Spark job (it counts ``batch.records``), which leaves the
pipeline's own cost per batch (the DataFrame is still built).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from benchmarks.bench_spark import RECORD_BYTES, SHARDS, spout_backlog
from benchmarks.context import ZK_PREFIX, BenchContext, BenchmarkError
from benchmarks.machine import relative_paths
from benchmarks.spout_read import spout_config
from benchmarks.stats import Stopwatch

PHASES = ("open", "take batch", "Arrow table", "createDataFrame", "Spark job (count)", "acks", "batch id (ZooKeeper)",
          "figures/log", "pacing", "other")


class PhaseClock:
    """Wall time per phase of the pipeline's run thread, while ``active``.

    Who calls: the wrappers :meth:`install` puts around the pipeline's steps (on the run thread); a phase nested in
    another (none here) would be counted twice. ``reset`` between runs; the totals accumulate over runs.
    """

    def __init__(self) -> None:
        self.totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.cpu: dict[str, float] = dict.fromkeys(PHASES, 0.0)  # the run thread's own CPU in each phase
        self.active = False
        self.events: list[tuple[str, float, float]] = []  # (phase, start, end) of the last run, perf_counter
        self._undo: list[Callable[[], None]] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if not self.active:
            yield
            return
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            t1 = time.perf_counter()
            self.totals[name] += t1 - t0
            self.cpu[name] += time.thread_time() - c0
            self.events.append((name, t0, t1))

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        """Time ``owner.attr`` (a function of a module or class) as phase ``name``; undone by :meth:`uninstall`."""
        original = getattr(owner, attr, None)
        if original is None:
            return
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            with clock.phase(name):
                return original(*args, **kwargs)

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, original))

    def install(self) -> None:
        from kinesis_spout.spark.bookkeeping import batch_store
        from kinesis_spout.spark.pipeline import at_least_once, loop, views
        from kinesis_spout.spout import KinesisSpout

        self.wrap(KinesisSpout, "open", "open")
        self.wrap(loop.RunLoop, "collect", "take batch")
        self.wrap(loop.RunLoop, "collect_columns", "take batch")
        self.wrap(loop.RunLoop, "wait_until", "pacing")
        self.wrap(loop.RunLoop, "record", "figures/log")
        # the Arrow table: the columnar batch's Arrow batch and figures (ColumnView's constructor), the Spark columns
        self.wrap(views.ColumnView, "__init__", "Arrow table")
        for view in (views.ColumnView, views.TupleView):
            self.wrap(view, "table", "Arrow table")
            self.wrap(view, "settle", "acks")
        self.wrap(at_least_once.AtLeastOnceRunner, "_store_batch_id", "batch id (ZooKeeper)")
        for store in (batch_store.ZooKeeperBatchStore, batch_store.MemoryBatchStore):
            self.wrap(store, "load_batch_id", "batch id (ZooKeeper)")

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


class TimedSpark:
    """The SparkSession as the pipeline sees it: ``createDataFrame`` timed, everything else passed through."""

    def __init__(self, spark: Any, clock: PhaseClock) -> None:
        self._spark = spark
        self._clock = clock

    def createDataFrame(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - Spark's name
        with self._clock.phase("createDataFrame"):
            return self._spark.createDataFrame(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


def pipeline_backlog(ctx: BenchContext, spark: Any, clock: PhaseClock, records: int, max_batch: int,
                     profile: cProfile.Profile | None = None, job: bool = True) -> dict[str, Any]:
    """One pipeline run over the backlog, as ``bench_spark.pipeline_backlog`` (same configuration), its phases
    timed into ``clock`` (and under ``profile`` when given). Returns records/s, batches and the run's wall time."""
    from kinesis_spout.spark import SpoutPipeline

    loaded = ctx.stream(SHARDS, records, RECORD_BYTES)
    counted: list[int] = []

    def count(df: Any, batch: Any) -> None:
        with clock.phase("Spark job (count)"):
            counted.append(df.count() if job else batch.records)

    config = spout_config(loaded.name, ctx.unique_app("spark-pipeline"), ctx.zookeeper_hosts, ZK_PREFIX,
                          loaded.endpoint.endpoint_url, limit=10_000, checkpoint_interval_s=1.0)
    pipeline = SpoutPipeline(TimedSpark(spark, clock), config, count, trigger_interval_s=0.0,
                             max_batch_records=max_batch)
    done_at: list[float] = []

    def done() -> bool:
        if pipeline.metrics.records >= records:
            done_at.append(watch.elapsed())
            return True
        return False

    before = dict(clock.totals)
    clock.events = []
    clock.active = True
    watch = Stopwatch().start()
    began = time.perf_counter()
    if profile is not None:
        profile.enable()
    try:
        final = pipeline.run(timeout_s=60 + records / 500, until=done)
    finally:
        if profile is not None:
            profile.disable()
        clock.active = False
    if not done_at or sum(counted) != records or final.failed:
        raise BenchmarkError(f"pipeline read {final.records} of {records} records ({final.failed} failed)")
    measured = done_at[0]
    timed = sum(clock.totals[p] - before[p] for p in PHASES)
    clock.totals["other"] += max(0.0, measured - timed)
    timeline = [(name, t0 - began, t1 - began) for name, t0, t1 in clock.events]
    return {"records_per_s": records / measured, "batches": final.batches, "wall_s": measured, "timeline": timeline}


def _table(clock: PhaseClock, batches: int, records: int) -> str:
    total = sum(clock.totals.values())
    lines = ["| phase | ms per batch | ms per 1,000 records | share | run thread CPU ms per batch |",
             "|---|---:|---:|---:|---:|"]
    for name in PHASES:
        s = clock.totals[name]
        cpu = f"{clock.cpu[name] / batches * 1000:.1f}" if name != "other" else "-"
        lines.append(f"| {name} | {s / batches * 1000:.1f} | {s / records * 1e6:.2f} | {s / total:.0%} | {cpu} |")
    lines.append(f"| **total** | {total / batches * 1000:.1f} | {total / records * 1e6:.2f} | 100% | - |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_pipeline", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of (plain spout, pipeline); default 4")
    parser.add_argument("--records", type=int, default=20_000, help="backlog records; default 20,000")
    parser.add_argument("--batch", type=int, default=10_000, help="records per batch at most; default 10,000")
    parser.add_argument("--cprofile", action="store_true", help="one more pipeline run under cProfile")
    parser.add_argument("--no-job", action="store_true",
                        help="process() runs no Spark job (it counts batch.records): the pipeline's own cost")
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    import pyarrow

    from kinesis_spout.testing.spark import local_spark_session

    ctx = BenchContext(quick=False)
    clock = PhaseClock()
    try:
        ctx.stream(SHARDS, args.records, RECORD_BYTES)  # servers and the loaded stream before Spark's JVM starts
        spark = local_spark_session("kinesis-spout-profile", cores=2)
        try:
            spark.createDataFrame(pyarrow.table({"n": list(range(100))})).count()  # the session's first job
            clock.install()
            # warm-up: Python workers, imports
            pipeline_backlog(ctx, spark, clock, args.records, args.batch, job=not args.no_job)
            clock.totals, clock.cpu = dict.fromkeys(PHASES, 0.0), dict.fromkeys(PHASES, 0.0)
            plain_rates, piped_rates, ratios = [], [], []
            batches = 0
            last_timeline: list[tuple[str, float, float]] = []
            for round_no in range(args.rounds):
                runs: dict[str, dict[str, Any]] = {}
                order = ("plain", "pipeline") if round_no % 2 == 0 else ("pipeline", "plain")
                for which in order:
                    if which == "plain":
                        runs[which] = spout_backlog(ctx, args.records, args.batch)
                    else:
                        runs[which] = pipeline_backlog(ctx, spark, clock, args.records, args.batch,
                                                       job=not args.no_job)
                plain, piped = runs["plain"]["records_per_s"], runs["pipeline"]["records_per_s"]
                plain_rates.append(plain)
                piped_rates.append(piped)
                ratios.append(piped / plain)
                batches += runs["pipeline"]["batches"]
                last_timeline = runs["pipeline"]["timeline"]
                print(f"round {round_no + 1}: plain spout {plain:,.0f} records/s ({runs['plain']['batches']} "
                      f"batches), pipeline {piped:,.0f} records/s ({runs['pipeline']['batches']} batches): "
                      f"{piped / plain:.3f}x", flush=True)
            print("\ntimeline of the last pipeline run (ms from run()):")
            for name, t0, t1 in last_timeline:
                print(f"  {t0 * 1000:7.1f} - {t1 * 1000:7.1f}  {name}")
            print(f"\nmedians of {args.rounds} rounds: plain spout {statistics.median(plain_rates):,.0f} records/s, "
                  f"pipeline {statistics.median(piped_rates):,.0f} records/s; ratio median "
                  f"{statistics.median(ratios):.3f}x (rounds: {', '.join(f'{r:.3f}' for r in ratios)})")
            print(f"\npipeline run thread, {batches} batches of {args.rounds * args.records:,} records "
                  f"(wall time, summed over the measured runs):\n")
            print(_table(clock, batches, args.rounds * args.records))
            if args.cprofile:
                profile = cProfile.Profile()
                pipeline_backlog(ctx, spark, clock, args.records, args.batch, profile, job=not args.no_job)
                out = io.StringIO()
                stats = pstats.Stats(profile, stream=out)
                stats.sort_stats("tottime").print_stats(25)
                stats.sort_stats("cumulative").print_stats(40)
                print("\ncProfile of the run thread (one run, wall clock):")
                print(relative_paths(out.getvalue()))
        finally:
            clock.uninstall()
            spark.stop()
    finally:
        ctx.close()


if __name__ == "__main__":
    main()
