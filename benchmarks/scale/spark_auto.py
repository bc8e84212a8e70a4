"""Which reader ``readMode=auto`` (the default) picks on the standalone cluster, with the data source registered by
hand (``spark.dataSource.register(KinesisSpoutDataSource)``) and with ``kinesis_spout.spark.register(spark)``; and
whether the Python process Spark runs the source's driver side in (the source runner) could learn the master by
itself: its command line and environment are searched for the master's URL.

Who calls: :mod:`benchmarks.scale.spark`, at each size before anything is measured (the queries warm the cluster up).
Each query reads about one record per shard from TRIM_HORIZON, until a batch with rows completed; the mode is read
back from the offset Spark stored (``readMode=executors`` stores a planned batch with a ``query`` id, ``driver`` a
position per shard).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.proc_cpu import snapshot
from benchmarks.scale.spark_load import Batches
from benchmarks.scale.spark_nodes import SparkNodes
from benchmarks.scale.spark_phases import options
from benchmarks.spark_costs import is_source_runner
from kinesis_spout.testing.process import wait_until


def _stored_mode(checkpoint: Path) -> str:
    files = sorted((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    offset = json.loads(files[-1].read_text().splitlines()[-1])
    return "executors" if "query" in offset else "driver"


def _runner_knows_master(jvm_pid: int, master: str) -> bool | None:
    """Whether a source runner's command line or environment names the master; None when none was found."""
    runners = [pid for pid, p in snapshot(jvm_pid, with_threads=False).processes.items() if is_source_runner(p)]
    if not runners:
        return None
    for pid in runners:
        for name in ("cmdline", "environ"):
            try:
                if master.encode() in Path(f"/proc/{pid}/{name}").read_bytes():
                    return True
            except OSError:
                continue
    return False


def _one_batch(nodes: SparkNodes, opts: dict[str, str], what: str, jvm_pid: int | None, timeout_s: float
               ) -> tuple[str, bool | None]:
    """Run a query of ``opts`` until a batch with rows completed, then stop it; returns the mode its stored offset
    shows and (``jvm_pid`` given) whether its source runner could see the master."""
    checkpoint = Path(tempfile.mkdtemp(prefix="scale-spark-auto-"))
    sink = Batches()
    query = (nodes.spark.readStream.format("kinesis_spout").options(**opts).load().writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(checkpoint)).start())
    knows: bool | None = None
    try:
        def seen() -> bool:
            nonlocal knows
            if knows is None and jvm_pid is not None:
                knows = _runner_knows_master(jvm_pid, nodes.master_url)
            if query.exception() is not None:
                raise RuntimeError(f"{what}: the query failed: {query.exception()}")
            return sink.records > 0

        if not wait_until(seen, timeout_s, interval_s=0.2):
            raise RuntimeError(f"{what}: no batch with rows in {timeout_s:g} s")
    finally:
        query.stop()
    mode = _stored_mode(checkpoint)
    shutil.rmtree(checkpoint, ignore_errors=True)
    return mode, knows


def auto_choice(nodes: SparkNodes, shards: int, log: Callable[[str], None], timeout_s: float) -> dict[str, Any]:
    """One batch (about one record per shard, from TRIM_HORIZON) under ``readMode=auto`` with the source registered
    by hand, then with ``register(spark)`` (which stays registered), then one in each mode neither picked: every
    executor has started its Python workers and imported the reading code before anything is measured."""
    from kinesis_spout.spark import register
    from kinesis_spout.spark.source import KinesisSpoutDataSource

    spark = nodes.spark
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    out: dict[str, Any] = {"master": nodes.master_url}
    began = time.monotonic()
    for how, registering in (("by hand", lambda: spark.dataSource.register(KinesisSpoutDataSource)),
                             ("register(spark)", lambda: register(spark))):
        registering()
        opts = options(nodes, "auto", initialPosition="TRIM_HORIZON", maxRecordsPerTrigger=str(shards))
        del opts["readMode"]
        mode, knows = _one_batch(nodes, opts, f"readMode=auto ({how})", jvm_pid, timeout_s)
        out[how] = {"mode": mode, "runner_sees_master": knows}
        log(f"readMode=auto, source registered {how}: {mode}; the source runner's command line or environment "
            f"names the master: {knows}")
    for mode in {"executors", "driver"} - {out[how]["mode"] for how in ("by hand", "register(spark)")}:
        _one_batch(nodes, options(nodes, mode, initialPosition="TRIM_HORIZON", maxRecordsPerTrigger=str(shards)),
                   f"warm-up {mode}", None, timeout_s)
    out["warm_up_s"] = round(time.monotonic() - began, 1)
    return out
