"""The readStream source's own Python work per record, without Spark: ``python -m benchmarks.profile_source
[--rounds N] [--records N] [--batch N] [--cprofile]``.

A 4-shard kinesalite stream of 20,000 records of 100 B (``--records``) is read from TRIM_HORIZON to its end by the
source's stream readers driven as Spark drives them (``Trigger.AvailableNow``, ``maxRecordsPerTrigger`` 10,000,
``--batch``): ``latestOffset``, ``partitions``, every partition's ``read`` (its Arrow batches), ``commit``, with the
checkpoints in a private ZooKeeper, all in this one process. Three readers take turns within each round, so that all
see the same load:

- ``driver, records``: ``readMode=driver`` on the planner that keeps records (``DriverPlanner``, the record path
  before the columnar one: a ``Record`` per record, rows made from them);
- ``driver, columns``: ``readMode=driver`` as it ships (``ColumnDriverPlanner``: the decoded columns kept and
  made Arrow);
- ``executors``: ``readMode=executors`` (each shard's task read in this process: GetRecords as columns, the end
  recorded in ZooKeeper).

Each run's process CPU (``time.process_time``: the planning thread, the read-ahead threads, the tasks' reads; not
kinesalite's or ZooKeeper's) over its records gives µs per record; the wall time records/s. The medians are printed,
and the ratios columns / records and executors / driver columns. ``--cprofile`` adds one more run of each driver
reader under cProfile and prints their most expensive functions (compare shares, not times).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from typing import Any, Callable

from benchmarks.context import ZK_PREFIX, BenchContext, BenchmarkError
from benchmarks.machine import relative_paths

SHARDS = 4
RECORD_BYTES = 100
READERS = ("driver, records", "driver, columns", "executors")


def _reader(which: str, options: dict[str, str]) -> Any:
    from kinesis_spout.spark.source import ExecutorStreamReader, KinesisSpoutStreamReader
    from kinesis_spout.spark.source.driver_planner import DriverPlanner

    class RecordReader(KinesisSpoutStreamReader):
        planner_type = DriverPlanner

    if which == "executors":
        return ExecutorStreamReader({**options, "readMode": "executors"})
    return (RecordReader if which == "driver, records" else KinesisSpoutStreamReader)(options)


def read_all(ctx: BenchContext, which: str, records: int, batch: int,
             profile: cProfile.Profile | None = None) -> dict[str, float]:
    """One run of reader ``which`` over the loaded stream: records/s (wall) and µs of process CPU per record."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    loaded = ctx.stream(SHARDS, records, RECORD_BYTES)
    options = {"streamName": loaded.name, "appName": ctx.unique_app("profile-source"),
               "zookeeper": ctx.zookeeper_hosts, "zookeeperPrefix": ZK_PREFIX,
               "endpointUrl": loaded.endpoint.endpoint_url, "region": "us-east-1", "initialPosition": "TRIM_HORIZON",
               "maxRecordsPerTrigger": str(batch)}
    reader = _reader(which, options)
    count = 0
    wall, cpu = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    try:
        reader.prepareForTriggerAvailableNow()
        start = reader.initialOffset()
        limit = ReadMaxRows(batch)
        for _ in range(10_000):
            end = reader.latestOffset(start, limit)
            if end == start:
                break
            count += sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))
            reader.commit(end)
            start = end
    finally:
        if profile is not None:
            profile.disable()
        reader.stop()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if count != records:
        raise BenchmarkError(f"{which} read {count} of {records} records")
    return {"records_per_s": count / wall, "cpu_us_per_record": cpu / count * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_source", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the three readers; default 4")
    parser.add_argument("--records", type=int, default=20_000, help="backlog records; default 20,000")
    parser.add_argument("--batch", type=int, default=10_000, help="maxRecordsPerTrigger; default 10,000")
    parser.add_argument("--cprofile", action="store_true", help="one more run of each driver reader under cProfile")
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    ctx = BenchContext(quick=False)
    try:
        ctx.stream(SHARDS, args.records, RECORD_BYTES)
        for which in READERS:  # warm-up: imports, clients
            read_all(ctx, which, args.records, args.batch)
        runs: dict[str, list[dict[str, float]]] = {w: [] for w in READERS}
        for round_no in range(args.rounds):
            order = READERS if round_no % 2 == 0 else tuple(reversed(READERS))
            for which in order:
                runs[which].append(read_all(ctx, which, args.records, args.batch))
            print(f"round {round_no + 1}: " + "; ".join(
                f"{w} {runs[w][-1]['records_per_s']:,.0f} records/s, {runs[w][-1]['cpu_us_per_record']:.1f} µs CPU "
                f"a record" for w in READERS), flush=True)
        med: Callable[[str, str], float] = lambda w, k: statistics.median(r[k] for r in runs[w])  # noqa: E731
        print(f"\nmedians of {args.rounds} rounds ({args.records:,} records, {SHARDS} shards, batches of "
              f"{args.batch:,}):\n")
        print("| reader | records/s | CPU µs per record |\n|---|---:|---:|")
        for which in READERS:
            print(f"| {which} | {med(which, 'records_per_s'):,.0f} | {med(which, 'cpu_us_per_record'):.1f} |")
        recs, cols, execs = (med(w, "cpu_us_per_record") for w in READERS)
        print(f"\nCPU per record: driver columns / driver records {cols / recs:.2f}x; executors / driver columns "
              f"{execs / cols:.2f}x; records/s driver columns / driver records "
              f"{med(READERS[1], 'records_per_s') / med(READERS[0], 'records_per_s'):.2f}x")
        if args.cprofile:
            for which in READERS[:2]:
                profile = cProfile.Profile()
                read_all(ctx, which, args.records, args.batch, profile)
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(20)
                print(f"\ncProfile of {which} (one run):")
                print(relative_paths(out.getvalue()))
    finally:
        ctx.close()


if __name__ == "__main__":
    main()
