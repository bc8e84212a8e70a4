"""The results of a scale run, written to ``scale.md`` and ``scale.json`` (through the benchmarks' own writers).

Who calls: :mod:`benchmarks.scale.runner`, once the run ended (or failed: the error is reported too).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.report import table, write_atomically, write_json

#: Each phase's figures as (key, label) rows of the Markdown tables, in order.
ROWS: dict[str, list[tuple[str, str]]] = {
    "balance": [("workers_started_s", "all worker processes launched"),
                ("all_registered_s", "every worker registered in ZooKeeper"),
                ("first_lease_s", "first lease taken"), ("half_taken_s", "half of the leases taken"),
                ("p90_taken_s", "90 % of the leases taken"), ("all_owned_s", "every shard owned by one live worker"),
                ("balanced_s", "balanced: nobody above S // N + 1"), ("even_s", "even: counts within one"),
                ("moves_until_balanced", "lease moves until balanced"), ("moves_until_even", "lease moves until even"),
                ("moves_per_shard", "moves per shard (until even)"),
                ("peak_held", "most leases one worker held at once (fair share + 1: S // N + 1)")],
    "rest": [("zk_requests_per_s", "ZooKeeper requests/s (reads + writes)"), ("zk_writes_per_s", "of which writes/s"),
             ("zk_reads_per_s_per_shard", "ZooKeeper reads/s per shard"),
             ("zk_requests_per_s_per_worker", "ZooKeeper requests/s per worker (a round a second)"),
             ("zookeeper_cpu_pct", "ZooKeeper CPU %"), ("kinesalite_cpu_pct", "kinesalite CPU %"),
             ("zk_packets_per_s", "ZooKeeper packets/s (with pings)"), ("zk_znodes", "ZooKeeper znodes"),
             ("zk_connections", "ZooKeeper connections"), ("worker_cpu_pct_mean", "worker CPU % (mean)"),
             ("worker_cpu_pct_max", "worker CPU % (max)"), ("worker_rss_mib_mean", "worker RSS MiB (mean)"),
             ("worker_rss_mib_max", "worker RSS MiB (max)"),
             ("get_records_per_s_per_shard", "GetRecords calls/s per idle shard"),
             ("kinesis_requests_per_s", "Kinesis requests/s in all"), ("window_s", "window s")],
    "failover": [("killed", "workers SIGKILLed at once"), ("session_timeout_s", "session timeout s"),
                 ("orphaned_shards", "their shards"), ("sessions_dropped_s", "their sessions dropped by ZooKeeper"),
                 ("first_retaken_s", "first of their shards taken"), ("half_retaken_s", "half of them taken"),
                 ("p90_retaken_s", "90 % of them taken"),
                 ("owned_again_s", "their shards owned again"), ("balanced_again_s", "balanced again"),
                 ("even_again_s", "even again"), ("moves", "lease moves")],
    "join": [("registered_s", "the new worker registered"), ("even_s", "even again"), ("moves", "lease moves"),
             ("ideal_moves", "its fair share (fewest moves possible)")],
    "records": [("produced", "records put (one per shard per round)"), ("delivered", "delivered"),
                ("lost", "lost"), ("duplicates", "delivered twice or more (extra deliveries)"),
                ("drain_s", "drain after the producer stopped, s"), ("lease_lost_refusals",
                                                                     "checkpoint writes refused by the lease fence")],
}
TITLES = {"balance": "Balance: N workers started (seconds from the first launch)",
          "rest": "At rest: the producer paused, every record read",
          "failover": "Failover: K workers SIGKILLed at once (seconds from the kill)",
          "join": "Join: one more worker (seconds from its launch)", "records": "Records"}


def _cell(value: Any) -> str:
    return "did not happen in time" if value is None else str(value)


def markdown(doc: dict[str, Any]) -> str:
    """The report: how it ran, the goals, then each phase's table."""
    setup = doc["setup"]
    launched = f"one every {setup['stagger_s']:g} s" if setup.get("stagger_s") else "all at once"
    lines = ["# Scale: lease workers", "",
             f"Run {doc['finished']} on {doc['machine'].get('cores')} cores (load before {doc['load_before']}, "
             f"after {doc['load_after']}), `{doc['command']}`, {doc['wall_s'] / 60:.1f} min in all.", "",
             f"{setup['shards']} shards (kinesalite, `--shardLimit {max(setup['shards'], 10)}`), {setup['workers']} "
             f"lease worker processes (default config of `kinesis_spout.testing.lease_worker`, session timeout "
             f"{setup['session_timeout_s']:g} s), {setup['kill']} killed at once, one record put to every shard every "
             f"{setup['put_every_s']:g} s. Workers launched {launched}. Nodes: {doc['nodes']}.", ""]
    if doc.get("error"):
        lines += ["**The run failed:**", "", "```", *doc["error"].splitlines(), "```", ""]
    if doc.get("goals"):
        lines += ["## Goals (issue 41)", ""]
        lines += table(["goal", "measured", "met"],
                       [[g, m, "n/a" if ok is None else ("yes" if ok else "**no**")] for g, m, ok in doc["goals"]])
        lines.append("")
    for phase, rows in ROWS.items():
        figures = doc.get("figures", {}).get(phase)
        if not figures:
            continue
        lines += [f"## {TITLES[phase]}", ""]
        lines += table(["", "value"], [[label, _cell(figures.get(key))] for key, label in rows])
        lines.append("")
    lines += ["## Notes", "", *[f"- {note}" for note in doc.get("notes", [])], ""]
    return "\n".join(lines)


def write(doc: dict[str, Any], out: Path) -> None:
    """``out`` (Markdown) and ``out`` with ``.json`` (everything measured)."""
    doc = {**doc, "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    write_atomically(out, markdown(doc).encode())
    write_json(doc, out.with_suffix(".json"))
