"""The results of the Spark scale run, written to ``scale-spark.md`` and ``scale-spark.json``; the goals of issue 41
judged on them.

Who calls: :mod:`benchmarks.scale.spark`, once the run ended (a size that failed is reported with its error).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.report import table, write_atomically, write_json

#: (key, label) rows of the per-mode tables, in order
ROWS = [("batches", "batches measured"), ("records", "records in them"), ("records_per_batch", "records/batch (p50)"),
        ("shards_with_records_per_batch", "shards with records per batch (p50)"),
        ("records_per_s", "records/s"), ("records_per_s_in_batches", "records/s over the batches' own time"),
        ("latest_offset_ms_p50", "driver planning: latestOffset ms (p50)"),
        ("driver_outside_job_ms_p50", "driver outside the batch's job: trigger - addBatch ms (p50)"),
        ("trigger_ms_p50", "batch ms, triggerExecution (p50)"),
        ("driver_python_ms_per_batch", "driver Python CPU ms/batch (source runner)"),
        ("zk_requests_per_batch", "ZooKeeper requests/batch"), ("zk_writes_per_batch", "of which writes"),
        ("zk_znode_writes_per_batch", "znodes written/batch (a multi's ops each)"),
        ("executor_python_ms_per_batch", "executor Python CPU ms/batch"),
        ("executor_jvm_ms_per_batch", "executor JVM CPU ms/batch"), ("tasks", "shard tasks (executors: one per "
                                                                          "shard with records)"),
        ("executor_python_ms_per_task", "executor Python CPU ms per shard task"),
        ("executor_python_us_per_record", "executor Python CPU µs/record"),
        ("python_us_per_record", "Python CPU µs/record, driver + executors"), ("wall_s", "wall s, query start "
                                                                                        "included")]


def _met(value: float | None, goal: float, at_most: bool) -> bool | None:
    if value is None:
        return None
    return value <= goal if at_most else value >= goal


def goals(doc: dict[str, Any]) -> list[list[Any]]:
    """[goal, measured, met] of issue 41's Spark goals, at each size measured (PURE)."""
    out: list[list[Any]] = []
    for size in doc["sizes"]:
        n = size["shards"]
        live = size.get("caught_up", {}).get("executors")
        if live:
            busy = live["shards_with_records_per_batch"] or 0.0
            bound = 5 + busy / 10
            out.append([f"{n} shards: ZooKeeper requests per caught-up batch <= 5 + shards with new records / 10 "
                        f"({busy:g} busy: {bound:.1f})", live["zk_requests_per_batch"],
                        _met(live["zk_requests_per_batch"], bound, True)])
            out.append([f"{n} shards: driver planning <= 200 ms per batch (caught up, latestOffset p50; driver "
                        f"Python CPU ms/batch beside)",
                        f"{live['latest_offset_ms_p50']} ms ({live['driver_python_ms_per_batch']} ms CPU)",
                        _met(live["latest_offset_ms_p50"], 200.0, True)])
        back = size.get("backlog", {})
        if "executors" in back and "driver" in back:
            ex, dr = back["executors"], back["driver"]
            if ex.get("python_us_per_record") and dr.get("python_us_per_record"):
                r = ex["python_us_per_record"] / dr["python_us_per_record"]
                out.append([f"{n} shards: executor reads' CPU per record within 1.2x driver reads' (backlog, Python "
                            f"CPU of driver + executors)", f"{ex['python_us_per_record']} against "
                            f"{dr['python_us_per_record']} µs: {r:.2f}x", r <= 1.2])
            r = ex["records_per_s"] / dr["records_per_s"] if dr["records_per_s"] else None
            out.append([f"{n} shards: backlog records/s of executor reads >= driver reads' on the same cluster",
                        f"{ex['records_per_s']:,} against {dr['records_per_s']:,}: "
                        f"{'-' if r is None else f'{r:.2f}x'}", _met(r, 1.0, False)])
        cut = size.get("cut")
        if cut and "lost" in cut:
            out.append([f"{n} shards: a worker node cut off during a batch: nothing lost, nothing doubled "
                        f"(exactly-once count)", f"{cut['delivered']:,} of {cut['expected']:,}; lost {cut['lost']}, "
                        f"doubled {cut['doubled']}", cut["lost"] == 0 and cut["doubled"] == 0])
        auto = size.get("auto")
        if auto and "by hand" in auto:
            out.append(["readMode=auto picks executors on a cluster without register(spark)",
                        f"registered by hand: {auto['by hand']['mode']}; with register(spark): "
                        f"{auto['register(spark)']['mode']}", auto["by hand"]["mode"] == "executors"])
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:,}" if isinstance(value, (int, float)) else str(value)


def markdown(doc: dict[str, Any]) -> str:
    setup = doc["setup"]
    lines = ["# Scale: Spark on several nodes", "",
             f"Run {doc['finished']} on {doc['machine'].get('cores')} cores (load average before "
             f"{doc['load_before']}, after {doc['load_after']}: the machine is shared), `{doc['command']}`, "
             f"{doc['wall_s'] / 60:.1f} min in all.", "",
             f"A Spark standalone cluster: master and three one-core workers (each with its executor and Python "
             f"workers) on nodes of their own, ZooKeeper and kinesalite on nodes, the driver on the host. Backlog: "
             f"{setup['per_shard']} records of 100 B on every shard, read with AvailableNow in about "
             f"{setup['batches']} batches (`maxRecordsPerTrigger`); caught up: {setup['rate']} records/s on one shard "
             f"in {setup['busy_every']}, {setup['seconds']:g} s measured after two warm-up batches.", ""]
    if doc.get("goals"):
        lines += ["## Goals (issue 41)", ""]
        lines += table(["goal", "measured", "met"],
                       [[g, _cell(m), "n/a" if ok is None else ("yes" if ok else "**no**")]
                        for g, m, ok in doc["goals"]])
        lines.append("")
    for size in doc["sizes"]:
        lines += [f"## {size['shards']:,} shards", "",
                  f"Nodes: {size.get('nodes', 'not made')}. Cluster and stream up in {size.get('cluster_start_s')} s; "
                  f"load average before {size['load_before']}, after {size['load_after']}.", ""]
        if size.get("error"):
            lines += ["**This size failed:**", "", "```", *size["error"].splitlines(), "```", ""]
        for kind, title in (("backlog", "Backlog (AvailableNow)"), ("caught_up", "Caught up")):
            runs = size.get(kind)
            if not runs:
                continue
            modes = list(runs)
            lines += [f"### {title}", ""]
            lines += table(["", *[f"readMode={m}" for m in modes]],
                           [[label, *[_cell(runs[m].get(key)) for m in modes]] for key, label in ROWS
                            if any(runs[m].get(key) is not None for m in modes)])
            lines.append("")
        if size.get("auto"):
            auto = size["auto"]
            lines += ["### readMode=auto on this cluster", ""]
            lines += table(["data source registered", "mode auto picked", "the source runner could see the master"],
                           [[how, auto[how]["mode"], _cell(auto[how]["runner_sees_master"])]
                            for how in ("by hand", "register(spark)") if how in auto])
            lines.append("")
        if size.get("cut"):
            cut = size["cut"]
            lines += ["### A worker node cut off during a batch", ""]
            lines += table(["", "value"], [[k.replace("_", " "), _cell(v)] for k, v in cut.items()])
            lines.append("")
    lines += ["## Notes", "", *[f"- {note}" for note in NOTES], ""]
    return "\n".join(lines)


NOTES = [
    "ZooKeeper requests are the server's own counters (mntr): every write request (a multi counts once; failed "
    "ones, session opens and closes too) and the successful reads under the run's prefix (pings and failed reads "
    "left out: the executors' Python workers keep their sessions from run to run, so pings cannot be told apart by "
    "connection); per batch over the batches that started in the measured window. A backlog run's figures cover "
    "the whole query, its start included.",
    "Driver planning is Spark's own timing of the source's latestOffset on the driver (progress durationMs); the "
    "driver's Python CPU is the source runner's (latestOffset, partitions, commit) and the query's planning workers'.",
    "Executor CPU is read from /proc on the worker nodes' process trees: the Python workers (pyspark.daemon "
    "pyspark.worker) and the executor JVMs. Shard tasks are counted as the shards with rows in each batch (executor "
    "reads run one task per shard with new records).",
    "Records/s of a backlog run from the query's start to its end (the source runner's start and the first shard "
    "listing included); over the batches' own time beside it.",
    "The cut: the worker node's packets to and from every other node and the host go nowhere (partitions.py), so "
    "its connections hang as across a real partition; Spark notices by missed heartbeats (spark.network.timeout 20 "
    "s here). foreachBatch keeps each batch id's message ids once (a replayed batch id replaces its rows): the "
    "exactly-once count; rows with replays counts every call.",
]


def write(doc: dict[str, Any], out: Path) -> None:
    """``out`` (Markdown) and ``out`` with ``.json`` (everything measured)."""
    doc = {**doc, "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    write_atomically(out, markdown(doc).encode())
    write_json(doc, out.with_suffix(".json"))
