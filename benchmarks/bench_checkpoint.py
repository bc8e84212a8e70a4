"""Checkpoint cost: ZooKeeper writes per second and the spout's throughput for several checkpoint intervals.

The spout reads the same stream to its end with ``checkpoint_interval_s`` = 0 (a write whenever a shard's
checkpoint advances, as fast as ZooKeeper takes them), 0.1, 1 and 10 s; the intervals take turns in every round
(the order rotates). The consumer hands each batch of 50 records to a sink that takes 2 ms (a sleep, as a network
call would) and then acks them: acks, and so checkpoint advances, are spread over the whole read instead of
coming in one burst per GetRecords reply, and the interval alone decides how many writes are made.

ZooKeeper writes are counted by the store the spout writes through; writes/s are the writes made while reading
divided by the read's wall time (the final flush on close is counted in ``zk_writes`` only). Each write is a
compare-and-set: a read and a conditional write of the shard's znode. ``close s`` is how long ``close()`` took:
it flushes the last checkpoints.
"""

from __future__ import annotations

from typing import Any

from kinesis_spout.kinesis.client import make_client

from benchmarks.bench_read import LIMIT, timeout_for
from benchmarks.context import ZK_PREFIX, BenchContext
from benchmarks.loops import ReadResult
from benchmarks.spout_read import read_with_spout, spout_config
from benchmarks.stats import ratio, summary

TITLE = "Checkpoint cost: ZooKeeper writes and spout throughput by checkpoint interval"
INTERVALS = (0.0, 0.1, 1.0, 10.0)
#: The smoke run stops at 2 s: closing a spout can wait up to one interval for its last write (see close_s).
SMOKE_INTERVALS = (0.0, 0.1, 1.0, 2.0)
BATCH = 50
SINK_S = 0.002

SIZES = {
    "full": {"shards": 4, "records": 20_000, "record_bytes": 100, "repeats": 3},
    "quick": {"shards": 4, "records": 10_000, "record_bytes": 100, "repeats": 2},
    "smoke": {"shards": 4, "records": 400, "record_bytes": 100, "repeats": 1},
}

COLUMNS = [
    ("checkpoint_interval_s", "interval s", "{:g}"),
    ("zk_writes_per_s", "ZK writes/s", "fig1"),
    ("zk_writes", "ZK writes", "fig0"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
    ("ratio_vs_interval_1s", "vs 1 s", "x"),
    ("close_s", "close s", "fig2"),
]


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    stream = ctx.stream(size["shards"], size["records"], size["record_bytes"])
    url = stream.endpoint.endpoint_url
    intervals = SMOKE_INTERVALS if smoke else INTERVALS
    results: dict[float, list[ReadResult]] = {interval: [] for interval in intervals}
    for round_no in range(size["repeats"]):
        shift = round_no % len(intervals)
        for interval in intervals[shift:] + intervals[:shift]:
            config = spout_config(stream.name, ctx.unique_app("checkpoint"), ctx.zookeeper_hosts, ZK_PREFIX, url,
                                  limit=LIMIT, checkpoint_interval_s=interval)
            res = read_with_spout(config, stream.records, timeout_for(stream.records),
                                  client=make_client("us-east-1", url), last_sequence=stream.last_sequence,
                                  batch=BATCH, sink_s=SINK_S)
            results[interval].append(res)
            extra = res.extra or {}
            ctx.progress(f"checkpoint: round {round_no + 1}/{size['repeats']}: interval {interval:g} s: "
                         f"{res.records_per_s:,.0f} records/s, {extra.get('zk_writes_during_read', 0)} ZK writes "
                         f"while reading ({extra.get('zk_writes', 0)} in all)")
    rows = []
    for interval, res in results.items():
        extras = [r.extra or {} for r in res]
        rows.append({
            "case": f"interval {interval:g} s", "checkpoint_interval_s": interval, "emulator": stream.emulator,
            "shards": stream.shards, "records": stream.records, "record_bytes": stream.record_bytes,
            "batch_limit": LIMIT, "repeats": len(res), "ack_batch": BATCH, "sink_s": SINK_S,
            "zk_writes_per_s": summary([e["zk_writes_during_read"] / r.wall_s for e, r in zip(extras, res)]),
            "zk_writes": summary([float(e["zk_writes"]) for e in extras]),
            "records_per_s": summary([r.records_per_s for r in res]),
            "cpu_us_per_record": summary([r.cpu_us_per_record for r in res]),
            "wall_s": summary([r.wall_s for r in res]),
            "open_s": summary([e["open_s"] for e in extras]),
            "close_s": summary([e["close_s"] for e in extras]),
            "checkpoints_at_end": all(e.get("checkpoints_at_end", False) for e in extras),
        })
    base = next(row for row in rows if row["checkpoint_interval_s"] == 1.0)
    for row in rows:
        row["ratio_vs_interval_1s"] = ratio(row["records_per_s"], base["records_per_s"])
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What checkpointing on every advance costs, next to the default interval."""
    by = {row["checkpoint_interval_s"]: row for row in rows}
    every, default = by[0.0], by[1.0]
    return [{"figure": "checkpoint on every advance (interval 0) vs every 1 s",
             "value": f"{every['zk_writes_per_s']['median']:,.0f} vs {default['zk_writes_per_s']['median']:,.1f} "
                      f"ZK writes/s; throughput {every['ratio_vs_interval_1s']:.2f}x",
             "goal": "-", "met": None}]
