"""Scaling: read throughput as the shards grow (1, 4, 16, 64, 200; --smoke: 1, 4, 16), and tracker memory as the
in-flight records grow (10^3 to 10^6).

Throughput: the same number of records is spread over 1, 4, 16, 64 and 200 shards of kinesalite (at 200, a
hundred records a shard: the worker owning many shards that leases hand out); the spout (acking every
record, checkpoints every second) and the boto3 loop (the spout's client configuration) read each stream
alternately, as in the read benchmark. Memory: one tracker holding N records, none acked, measured as in the
tracker benchmark (keys and payload not counted).
"""

from __future__ import annotations

from typing import Any

from benchmarks.bench_read import LOOP, SPOUT, alternate, consumers, result_row
from benchmarks.bench_tracker import memory_rows
from benchmarks.context import BenchContext
from benchmarks.stats import ratio

TITLE = "Scaling: throughput by shard count, tracker memory by records in flight"
SIZES: dict[str, dict[str, Any]] = {
    "full": {"records": 20_000, "record_bytes": 100, "repeats": 3, "shards": (1, 4, 16, 64, 200),
             "inflight": (1_000, 10_000, 100_000, 1_000_000)},
    "quick": {"records": 10_000, "record_bytes": 100, "repeats": 2, "shards": (1, 4, 16, 64, 200),
              "inflight": (1_000, 10_000, 100_000)},
    "smoke": {"records": 320, "record_bytes": 100, "repeats": 1, "shards": (1, 4, 16), "inflight": (1_000, 10_000)},
}

COLUMNS = [
    ("case", "case", "{}"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
    ("ratio_vs_loop", "vs loop", "x"),
    ("bytes_per_inflight_record", "B/in-flight record", "fig0"),
]


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    rows: list[dict[str, Any]] = []
    for shards in size["shards"]:
        stream = ctx.stream(shards, size["records"], size["record_bytes"])
        runs = [(name, read) for name, read in consumers(ctx, stream) if name in (LOOP, SPOUT)]
        results = alternate(ctx, f"scaling/{shards} shards", runs, size["repeats"])
        group = {name: result_row(name, res, stream, size["repeats"]) for name, res in results.items()}
        for name, row in group.items():
            row.update(kind="throughput", case=f"{name}, {shards} shard{'s' if shards > 1 else ''}",
                       consumer=name, ratio_vs_loop=ratio(row["records_per_s"], group[LOOP]["records_per_s"]))
            rows.append(row)
    for inflight in size["inflight"]:
        for row in memory_rows(inflight, 1, 1 if inflight >= 1_000_000 else 3, with_random_acks=False):
            ctx.progress(f"scaling: {row['case']}: {row['bytes_per_inflight_record']['median']:.0f} B per record")
            rows.append(row)
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spout's throughput at the smallest and largest shard counts, and memory at the largest N."""
    spout = [r for r in rows if r.get("consumer") == SPOUT]
    memory = [r for r in rows if r["kind"] == "memory"]
    out = []
    if spout:
        out.append({"figure": "KinesisSpout records/s by shards (" + " / ".join(str(r["shards"]) for r in spout) + ")",
                    "value": " / ".join(f"{r['records_per_s']['median']:,.0f} ({r['ratio_vs_loop']:.2f}x loop)"
                                        for r in spout), "goal": "-", "met": None})
    if memory:
        out.append({"figure": "tracker bytes per in-flight record by records in flight ("
                              + " / ".join(f"{r['inflight_records']:,}" for r in memory) + ")",
                    "value": " / ".join(f"{r['bytes_per_inflight_record']['median']:.0f}" for r in memory),
                    "goal": "<= 150", "met": all(r["bytes_per_inflight_record"]["median"] <= 150 for r in memory)})
    return out
