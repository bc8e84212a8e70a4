"""The phases of the Spark scale run, on a :class:`~benchmarks.scale.spark_nodes.SparkNodes` cluster: a backlog
read with ``Trigger.AvailableNow``, a caught-up stream (a producer on a few busy shards, the others idle), each in
``readMode=executors`` and ``readMode=driver``; and a worker node cut off from every other node and from the driver
while a batch runs, counted exactly once.

Per run: the query's batches (Spark's progress: ``latestOffset`` and the other durations, ms), ZooKeeper requests
the server answered (``mntr``: write requests, and the reads under the run's prefix), the driver's Python CPU (the
source runner PySpark starts per query: ``latestOffset``, ``partitions``, ``commit``), and the executors' Python
and JVM CPU (the worker nodes' process trees, from ``/proc``). Who calls: :mod:`benchmarks.scale.spark`.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
import uuid
from typing import Any, Callable

from benchmarks.scale.spark_load import Batches, BusyProducer, Placed, WorkerTrees, executor_cpu, progress
from benchmarks.scale.spark_nodes import PREFIX, SparkNodes
from benchmarks.spark_costs import RunnerWatch, SparkCostProbe, costs_between
from kinesis_spout.testing.partitions import heal_from_host, heal_groups, partition_from_host, partition_groups
from kinesis_spout.testing.process import wait_until

Log = Callable[[str], None]


def options(nodes: SparkNodes, mode: str, **extra: str) -> dict[str, str]:
    assert nodes.kinesalite is not None and nodes.zookeeper is not None
    return {"streamName": nodes.stream, "appName": f"{mode}-{uuid.uuid4().hex[:6]}", "zookeeper": nodes.zookeeper.hosts,
            "zookeeperPrefix": PREFIX, "endpointUrl": nodes.kinesalite.endpoint_url, "region": "us-east-1",
            "readMode": mode, **extra}


def _start(spark: Any, opts: dict[str, str], sink: Batches, checkpoint: str, available_now: bool) -> Any:
    df = spark.readStream.format("kinesis_spout").options(**opts).load()
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    return (writer.trigger(availableNow=True) if available_now else writer).start()


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _figures(batches: dict[int, dict[str, Any]], sink: Batches, costs: dict[str, Any], cpu: dict[str, float],
             mode: str) -> dict[str, Any]:
    """One run's figures from its kept batches and the costs of its window (PURE)."""
    n = len(batches)
    records = sum(b["rows"] for b in batches.values())
    busy = [len(sink.by_batch.get(i, {})) for i in batches]
    tasks = sum(busy) if mode == "executors" else None  # executors: one task per shard with new records
    # reads: the successful ones under the run's prefix (the executors' Python workers keep their ZooKeeper sessions
    # from run to run, so the pings of sessions open before a window cannot be told from their reads by connection)
    zk = costs["zk_writes"] + costs["zk_namespace_reads"]
    driver_s = costs.get("driver_python_s")
    out: dict[str, Any] = {
        "batches": n, "records": records, "records_per_batch": _median([b["rows"] for b in batches.values()]),
        "shards_with_records_per_batch": _median([float(b) for b in busy]),
        "latest_offset_ms_p50": _median([b["latestOffset"] for b in batches.values()]),
        "trigger_ms_p50": _median([b["triggerExecution"] for b in batches.values()]),
        "add_batch_ms_p50": _median([b["addBatch"] for b in batches.values()]),
        "driver_outside_job_ms_p50": _median([b["triggerExecution"] - b["addBatch"] for b in batches.values()]),
        "zk_requests_per_batch": round(zk / n, 1) if n else None,
        "zk_writes_per_batch": round(costs["zk_writes"] / n, 1) if n else None,
        "zk_reads_per_batch": round(costs["zk_namespace_reads"] / n, 1) if n else None,
        "zk_znode_writes_per_batch": round(costs["zk_namespace_writes"] / n, 1) if n else None,
        "driver_python_ms_per_batch": round(driver_s * 1000 / n, 1) if driver_s is not None and n else None,
        "executor_python_ms_per_batch": round(cpu["executor_python_s"] * 1000 / n, 1) if n else None,
        "executor_jvm_ms_per_batch": round(cpu["executor_jvm_s"] * 1000 / n, 1) if n else None,
        "tasks": tasks,
        "executor_python_ms_per_task": round(cpu["executor_python_s"] * 1000 / tasks, 1) if tasks else None,
        "executor_python_us_per_record": round(cpu["executor_python_s"] * 1e6 / records, 1) if records else None,
        "python_us_per_record": (round((cpu["executor_python_s"] + driver_s) * 1e6 / records, 1)
                                 if records and driver_s is not None else None),
        "raw": {**{k: v for k, v in costs.items() if not isinstance(v, (list, dict))}, **cpu}}
    return out


def backlog(nodes: SparkNodes, probe: SparkCostProbe, mode: str, records: int, max_per_trigger: int,
            log: Log, timeout_s: float) -> dict[str, Any]:
    """Read the stream from TRIM_HORIZON to its end with AvailableNow in ``mode``: records/s from the query's start
    to its end, and the costs of the whole run."""
    sink, batches = Batches(), dict[int, dict[str, Any]]()
    checkpoint = tempfile.mkdtemp(prefix="scale-spark-")
    opts = options(nodes, mode, initialPosition="TRIM_HORIZON", maxRecordsPerTrigger=str(max_per_trigger))
    before, workers_before = probe.snapshot(), WorkerTrees.take(nodes.worker_pids())
    runners = RunnerWatch(probe.jvm_pid).start()
    try:
        started = time.monotonic()
        query = _start(nodes.spark, opts, sink, checkpoint, available_now=True)
        finished = query.awaitTermination(timeout_s)
        wall = time.monotonic() - started
        if not finished:
            query.stop()
            raise RuntimeError(f"backlog {mode}: AvailableNow did not end in {timeout_s:g} s ({sink.records} of "
                               f"{records} records)")
        progress(query, batches)
        probe.wait_source_runners_gone()
    finally:
        seen = runners.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    if query.exception() is not None:
        raise RuntimeError(f"backlog {mode}: the query failed: {query.exception()}")
    costs = costs_between(before, probe.snapshot(), runners=seen)
    cpu = executor_cpu(workers_before, WorkerTrees.take(nodes.worker_pids()))
    out = {"mode": mode, "app": opts["appName"], "wall_s": round(wall, 1), "expected": records, "read": sink.records,
           "records_per_s": round(sink.records / wall, 1), **_figures(batches, sink, costs, cpu, mode)}
    batch_s = sum(b["triggerExecution"] for b in batches.values()) / 1000
    out["records_per_s_in_batches"] = round(sink.records / batch_s, 1) if batch_s else None
    log(f"backlog {mode}: {sink.records:,} of {records:,} records in {wall:.1f} s ({out['records_per_s']:,.0f}/s), "
        f"{out['batches']} batches; ZK {out['zk_requests_per_batch']}/batch; driver Python "
        f"{out['driver_python_ms_per_batch']} ms/batch; executor Python {out['executor_python_us_per_record']} µs/rec")
    return out


def caught_up(nodes: SparkNodes, probe: SparkCostProbe, mode: str, app: str, keys: list[str], rate: int,
              placed: Placed, seconds: float, log: Log, timeout_s: float, warmup: int = 2) -> dict[str, Any]:
    """A new query of the backlog run's ``app`` (it starts at the app's ZooKeeper checkpoints: the backlog's end)
    while the producer puts ``rate`` records/s on the busy shards (``keys``): after ``warmup`` batches, the costs of
    ``seconds`` (and at least two batches) per batch. Not from LATEST: kinesalite never answers a GetShardIterator
    AT_TIMESTAMP (what LATEST is pinned to) on a shard with no record after the time, so idle shards would hang."""
    sink, batches = Batches(), dict[int, dict[str, Any]]()
    checkpoint = tempfile.mkdtemp(prefix="scale-spark-")
    producer = BusyProducer(nodes.kinesalite.endpoint_url, nodes.stream, keys, rate, placed)  # type: ignore[union-attr]
    query = _start(nodes.spark, {**options(nodes, mode, initialPosition="TRIM_HORIZON"), "appName": app}, sink,
                   checkpoint, False)
    producer.start()
    try:
        def batches_done() -> int:
            progress(query, batches)
            if query.exception() is not None:
                raise RuntimeError(f"caught up {mode}: the query failed: {query.exception()}")
            return len(batches)

        if not wait_until(lambda: batches_done() >= warmup, timeout_s, interval_s=0.2):
            raise RuntimeError(f"caught up {mode}: {len(batches)} batches in {timeout_s:g} s")
        warm = set(batches)
        before, workers_before = probe.snapshot(), WorkerTrees.take(nodes.worker_pids())
        began = time.monotonic()
        def measured() -> int:  # batches that started after the window opened
            batches_done()
            return sum(1 for i, b in batches.items() if i not in warm and b["start"] >= before.at)

        if not wait_until(lambda: measured() >= 2 and time.monotonic() - began >= seconds, timeout_s,
                          interval_s=0.2):
            raise RuntimeError(f"caught up {mode}: {len(batches) - len(warm)} measured batches in {timeout_s:g} s")
        after, workers_after = probe.snapshot(), WorkerTrees.take(nodes.worker_pids())
    finally:
        producer.stop()
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    progress(query, batches)
    kept = {i: b for i, b in batches.items() if i not in warm and before.at <= b["start"] < after.at}
    costs = costs_between(before, after)
    out = {"mode": mode, "busy_shards": len(keys), "rate": rate, "window_s": round((after.at - before.at)
                                                                                  .total_seconds(), 1),
           **_figures(kept, sink, costs, executor_cpu(workers_before, workers_after), mode)}
    out["records_per_s"] = round(out["records"] / out["window_s"], 1) if out["window_s"] else None
    log(f"caught up {mode}: {out['batches']} batches, {out['records_per_batch']} records/batch on "
        f"{out['shards_with_records_per_batch']} shards; latestOffset p50 {out['latest_offset_ms_p50']} ms; ZK "
        f"{out['zk_requests_per_batch']}/batch; executor Python {out['executor_python_ms_per_task']} ms/task")
    return out


def cut(nodes: SparkNodes, keys: list[str], rate: int, placed: Placed, max_per_trigger: int, log: Log,
        timeout_s: float) -> dict[str, Any]:
    """``readMode=executors`` from TRIM_HORIZON (the backlog and every record put since) while the producer puts
    more; once a batch is running, worker node 1 is cut off from every other node and from the driver; it is healed
    after two more batches. Every record put must be in exactly one batch (a replayed batch id replaces its rows)."""
    node, _ = nodes.workers["spark-worker-1"]
    others = [n for n in nodes.network.nodes.values() if n is not node]
    sink, batches = Batches(ids=True), dict[int, dict[str, Any]]()
    checkpoint = tempfile.mkdtemp(prefix="scale-spark-")
    producer = BusyProducer(nodes.kinesalite.endpoint_url, nodes.stream, keys, rate, placed)  # type: ignore[union-attr]
    opts = options(nodes, "executors", initialPosition="TRIM_HORIZON", maxRecordsPerTrigger=str(max_per_trigger))
    query = _start(nodes.spark, opts, sink, checkpoint, False)
    producer.start()
    out: dict[str, Any] = {"node": node.name, "address": node.address}
    healed = False
    try:
        def state() -> int:
            progress(query, batches)
            if query.exception() is not None:
                raise RuntimeError(f"cut: the query failed: {query.exception()}")
            return max(batches, default=-1)

        if not wait_until(lambda: state() >= 0 and query.status["isTriggerActive"], timeout_s, interval_s=0.1):
            raise RuntimeError("cut: no batch running in time")
        cut_after = state()
        partition_groups([node], others)
        partition_from_host(nodes.network, node)
        cut_at = time.monotonic()
        out["cut_during_batch"] = cut_after + 1
        log(f"cut: {node.name} ({node.address}) cut off during batch {cut_after + 1}")
        if not wait_until(lambda: state() >= cut_after + 2, timeout_s, interval_s=0.2):
            raise RuntimeError(f"cut: no batch completed in {timeout_s:g} s after the cut")
        out["batch_done_after_cut_s"] = round(time.monotonic() - cut_at, 1)
        out["executors_seen_after_cut"] = len(nodes.executor_hosts(nodes.spark))
        heal_groups([node], others)
        heal_from_host(nodes.network, node)
        healed = True
        out["healed_after_s"] = round(time.monotonic() - cut_at, 1)
        log(f"cut: two batches done {out['batch_done_after_cut_s']} s after the cut; healed")
        put = producer.stop()
        expected = placed.snapshot()
        if not wait_until(lambda: state() >= 0 and {m for r in sink.rows.values() for m in r} >= expected,
                          timeout_s, interval_s=0.5):
            log("cut: not every record read in time")
    finally:
        producer.stop()
        if not healed:
            heal_groups([node], others)
            heal_from_host(nodes.network, node)
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    progress(query, batches)
    delivered: dict[str, int] = {}
    for rows in sink.rows.values():
        for mid in rows:
            delivered[mid] = delivered.get(mid, 0) + 1
    out.update({"produced_during": put, "expected": len(expected), "delivered": len(delivered),
                "lost": len(expected - set(delivered)), "doubled": sum(1 for c in delivered.values() if c > 1),
                "batches": len(sink.rows), "foreach_batch_calls": sink.attempts,
                "rows_with_replays": sink.rows_with_replays,
                "cut_batch_ms": batches.get(out["cut_during_batch"], {}).get("triggerExecution")})
    log(f"cut: {out['delivered']:,} of {out['expected']:,} records, lost {out['lost']}, doubled {out['doubled']}")
    return out
