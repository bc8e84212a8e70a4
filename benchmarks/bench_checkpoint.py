"""Checkpoint cost: ZooKeeper writes per second and the spout's throughput for several checkpoint intervals.

The spout reads the same stream to its end with ``checkpoint_interval_s`` = 0 (a write whenever a shard's
checkpoint advances, as fast as ZooKeeper takes them), 0.1, 1 and 10 s; the intervals take turns in every round
(the order rotates). Two consumers:

``steady``: a consumer that processes 1,500 records/s, in batches of 50 (its sink sleeps as long as that takes):
the checkpoints advance all the time for about 13 s, so the interval alone decides how many writes are made, and
the CPU per record shows what the writes cost the consumer's process.

``flat out``: a consumer that hands each batch of 50 records to a sink taking 2 ms (a sleep, as a network call
would) and then acks them, as fast as the spout delivers: records/s show what checkpointing costs throughput.

ZooKeeper writes are counted by the store the spout writes through; writes/s are the writes made while reading
divided by the read's wall time (the final flush on close is counted in ``ZK writes`` only). Each write is a
compare-and-set: a read and a conditional write of the shard's znode. The first checkpoint of each shard is
written at once, whatever the interval. ``close s`` is how long ``close()`` took: it flushes the last checkpoints.
"""

from __future__ import annotations

from typing import Any

from benchmarks.bench_read import LIMIT, timeout_for
from benchmarks.context import ZK_PREFIX, BenchContext
from benchmarks.loops import ReadResult
from benchmarks.spout_read import read_with_spout, spout_config
from benchmarks.stats import ratio, summary
from kinesis_spout.kinesis.client import make_client

TITLE = "Checkpoint cost: ZooKeeper writes and spout throughput by checkpoint interval"
INTERVALS = (0.0, 0.1, 1.0, 10.0)
#: The smoke run stops at 2 s: closing a spout can wait up to one interval for its last write (see close s).
SMOKE_INTERVALS = (0.0, 0.1, 1.0, 2.0)
BATCH = 50
SINK_S = 0.002
STEADY_PER_S = 1_500.0

SIZES = {
    "full": {"shards": 4, "records": 20_000, "record_bytes": 100, "repeats": 3, "steady_repeats": 2},
    "quick": {"shards": 4, "records": 10_000, "record_bytes": 100, "repeats": 2, "steady_repeats": 1},
    "smoke": {"shards": 4, "records": 400, "record_bytes": 100, "repeats": 1, "steady_repeats": 1},
}

COLUMNS = [
    ("consumer", "consumer", "{}"),
    ("checkpoint_interval_s", "interval s", "{:g}"),
    ("zk_writes_per_s", "ZK writes/s", "fig1"),
    ("zk_writes", "ZK writes", "fig0"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
    ("ratio_vs_interval_1s", "records/s vs 1 s", "x"),
    ("cpu_ratio_vs_interval_1s", "CPU vs 1 s", "x"),
    ("close_s", "close s", "fig2"),
]


def measure(ctx: BenchContext, consumer: str, intervals: tuple[float, ...], repeats: int, size: dict[str, Any]
            ) -> list[dict[str, Any]]:
    """Rows of one consumer (``steady`` or ``flat out``) for each interval."""
    stream = ctx.stream(size["shards"], size["records"], size["record_bytes"])
    url = stream.endpoint.endpoint_url
    how = {"batch": BATCH, "pace_per_s": STEADY_PER_S} if consumer == "steady" else {"batch": BATCH,
                                                                                       "sink_s": SINK_S}
    results: dict[float, list[ReadResult]] = {interval: [] for interval in intervals}
    for round_no in range(repeats):
        shift = round_no % len(intervals)
        for interval in intervals[shift:] + intervals[:shift]:
            config = spout_config(stream.name, ctx.unique_app("checkpoint"), ctx.zookeeper_hosts, ZK_PREFIX, url,
                                  limit=LIMIT, checkpoint_interval_s=interval)
            res = read_with_spout(config, stream.records, timeout_for(stream.records) + stream.records / STEADY_PER_S,
                                  client=make_client("us-east-1", url), last_sequence=stream.last_sequence, **how)
            results[interval].append(res)
            extra = res.extra or {}
            ctx.progress(f"checkpoint/{consumer}: round {round_no + 1}/{repeats}: interval {interval:g} s: "
                         f"{res.records_per_s:,.0f} records/s, {res.cpu_us_per_record:.1f} µs CPU/record, "
                         f"{extra.get('zk_writes_during_read', 0)} ZK writes while reading "
                         f"({extra.get('zk_writes', 0)} in all), close {extra.get('close_s', 0):.2f} s")
    rows = []
    for interval, res in results.items():
        extras = [r.extra or {} for r in res]
        rows.append({
            "case": f"{consumer}, interval {interval:g} s", "kind": consumer, "consumer": consumer,
            "checkpoint_interval_s": interval, "emulator": stream.emulator, "shards": stream.shards,
            "records": stream.records, "record_bytes": stream.record_bytes, "batch_limit": LIMIT,
            "repeats": len(res), "ack_batch": BATCH, **{k: v for k, v in how.items() if k != "batch"},
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
        row["cpu_ratio_vs_interval_1s"] = ratio(row["cpu_us_per_record"], base["cpu_us_per_record"])
    return rows


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    intervals = SMOKE_INTERVALS if smoke else INTERVALS
    return (measure(ctx, "steady", intervals, size["steady_repeats"], size)
            + measure(ctx, "flat out", intervals, size["repeats"], size))


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What checkpointing on every advance costs, next to the default interval."""
    steady = {row["checkpoint_interval_s"]: row for row in rows if row["consumer"] == "steady"}
    flat = {row["checkpoint_interval_s"]: row for row in rows if row["consumer"] == "flat out"}
    return [{"figure": "checkpoint on every advance (interval 0) vs every 1 s",
             "value": f"{steady[0.0]['zk_writes_per_s']['median']:,.0f} vs "
                      f"{steady[1.0]['zk_writes_per_s']['median']:,.1f} ZK writes/s at 1,500 records/s "
                      f"({steady[0.0]['cpu_ratio_vs_interval_1s']:.2f}x the CPU per record); flat out "
                      f"{flat[0.0]['ratio_vs_interval_1s']:.2f}x the records/s",
             "goal": "-", "met": None}]
