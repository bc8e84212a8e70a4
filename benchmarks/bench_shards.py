"""Many shards per worker: reader threads, CPU at rest, and busy shards read among idle ones.

Once leases hand a worker dozens or hundreds of shards, a thread per shard stops being cheap. The spout's readers
share a pool of ``reader_threads`` threads (default 8); the baseline in the same run is the same spout with one
reader thread per shard (``reader_threads=0``, what every version before the pool did).

- **At rest**: the spout owns every shard of an empty stream of ``total`` shards (kinesalite, TRIM_HORIZON) and is
  caught up; after a warm-up of 3 s, the process's CPU (all its threads: readers, ZooKeeper, the consumer's
  ``next_batch`` loop with a 0.5 s wait) is measured over ``rest_s`` seconds, as a share of one core. Each shard is
  polled once per ``empty_record_backoff_s`` (1 s, the default) with no cap (``max_empty_record_backoff_s=None``),
  or, with ``max_empty_record_backoff_s=4``, less and less often up to once per 4 s. Threads are those of the readers.
- **Busy among idle**: ``records`` records (100 B) sit in ``busy`` shards of a ``total``-shard stream, the other
  shards empty; the spout reads them all (acking each, checkpoints every second in ZooKeeper) from ``open()`` to the
  last ack. The baseline is a spout owning only those records' shards: a ``busy``-shard stream with the same
  records, default settings. records/s are given from ``open()`` and from its end (opening 200 shards, their
  checkpoints and readers, is a one-time cost of its own; the idle shards' first polls, a GetShardIterator and a
  GetRecords each, fall in the first second of reading too).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Any

from benchmarks.bench_read import LIMIT, timeout_for
from benchmarks.context import BenchContext
from benchmarks.spout_read import read_with_spout, spout_config
from benchmarks.stats import ratio, summary
from kinesis_spout import KinesisSpout, ZooKeeperCheckpointStore
from kinesis_spout.testing.kinesis import wait_for_stream

TITLE = "Many shards per worker: reader threads, CPU at rest, busy shards among idle ones"
ZK_PREFIX = "/bench-shards"

SIZES = {
    "full": {"total": 200, "busy": 10, "records": 20_000, "rest_s": 10.0, "repeats": 3},
    "quick": {"total": 200, "busy": 10, "records": 10_000, "rest_s": 6.0, "repeats": 2},
    "smoke": {"total": 20, "busy": 2, "records": 200, "rest_s": 1.0, "repeats": 1},
}

COLUMNS = [
    ("case", "case", "{}"),
    ("reader_threads", "reader threads", "{}"),
    ("threads", "threads used", "{}"),
    ("cpu_percent", "CPU % of a core at rest", "fig1"),
    ("records_per_s", "records/s", "fig0"),
    ("ratio", "vs baseline", "x"),
    ("records_per_s_after_open", "records/s once open", "fig0"),
    ("ratio_after_open", "vs baseline, once open", "x"),
]


def _reader_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("kinesis-reader"))


def _stream(ctx: BenchContext, shards: int, busy: int, records: int) -> tuple[str, int]:
    """A ``shards``-shard stream whose first ``busy`` shards hold ``records`` records of 100 B (none if 0)."""
    client = ctx.endpoint("kinesalite").client()
    name = f"bench-shards-{shards}-{busy}-{uuid.uuid4().hex[:6]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    wait_for_stream(client, name, timeout_s=120)
    listed = client.list_shards(StreamName=name)["Shards"]
    if records:
        ctx.progress(f"shards: loading {records:,} records into {busy} of the {shards} shards of {name}")
        _put(ctx, name, busy, records)
    return name, len(listed)


def _put(ctx: BenchContext, name: str, busy: int, records: int) -> None:
    """Put ``records`` records of 100 B into the first ``busy`` shards of ``name``, 500 a call."""
    client = ctx.endpoint("kinesalite").client()
    listed = client.list_shards(StreamName=name)["Shards"]
    keys = [s["HashKeyRange"]["StartingHashKey"] for s in listed[:busy]]
    payload = b"x" * 100
    for start in range(0, records, 500):
        entries = [{"Data": payload, "PartitionKey": "p", "ExplicitHashKey": keys[i % busy]}
                   for i in range(start, min(records, start + 500))]
        reply = client.put_records(StreamName=name, Records=entries)
        if reply.get("FailedRecordCount"):
            raise RuntimeError(f"kinesalite refused {reply['FailedRecordCount']} records")


def _rest(ctx: BenchContext, stream: str, threads: int, rest_s: float, idle_max_s: float | None) -> dict[str, Any]:
    url = ctx.endpoint("kinesalite").endpoint_url
    config = dataclasses.replace(
        spout_config(stream, ctx.unique_app("rest"), ctx.zookeeper_hosts, ZK_PREFIX, url, limit=LIMIT,
                     checkpoint_interval_s=1.0), reader_threads=threads, max_empty_record_backoff_s=idle_max_s)
    before = _reader_threads()
    spout = KinesisSpout(config, ZooKeeperCheckpointStore.from_config(config))
    try:
        spout.open()
        end_warmup = time.monotonic() + 3.0
        while time.monotonic() < end_warmup:
            spout.next_batch(max_records=100, timeout_s=0.5)
        used = _reader_threads() - before
        cpu0, t0 = time.process_time(), time.monotonic()
        while time.monotonic() - t0 < rest_s:
            if spout.next_batch(max_records=100, timeout_s=0.5):
                raise RuntimeError(f"stream {stream} was to be empty")
        cpu = (time.process_time() - cpu0) / (time.monotonic() - t0)
    finally:
        spout.close()
    return {"threads": used, "cpu_percent": cpu * 100}


def _read(ctx: BenchContext, stream: str, records: int, threads: int | None) -> tuple[float, float]:
    """records/s from ``open()`` to the last ack, and from the end of ``open()`` (the reading alone: a worker
    owning 200 shards opens longer, reading 200 checkpoints and making 200 readers)."""
    url = ctx.endpoint("kinesalite").endpoint_url
    config = spout_config(stream, ctx.unique_app("busy"), ctx.zookeeper_hosts, ZK_PREFIX, url, limit=LIMIT,
                          checkpoint_interval_s=1.0)
    if threads is not None:
        config = dataclasses.replace(config, reader_threads=threads)
    res = read_with_spout(config, records, timeout_for(records))
    open_s = float((res.extra or {}).get("open_s", 0.0))
    return res.records_per_s, res.records / max(res.wall_s - open_s, 1e-9)


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    total, busy, records, repeats = size["total"], size["busy"], size["records"], size["repeats"]
    pooled, per_shard = 8, 0
    empty, _ = _stream(ctx, total, 0, 0)
    mixed, _ = _stream(ctx, total, busy, records)
    alone, _ = _stream(ctx, busy, busy, records)
    rest_cases = [("pool, max_empty_record_backoff_s=None", pooled, None),
                  ("pool, max_empty_record_backoff_s=4", pooled, 4.0),
                  ("a thread per shard (baseline)", per_shard, None)]
    rest: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in rest_cases}
    reads: dict[str, list[float]] = {"pool": [], "per shard": [], "alone": []}
    after_open: dict[str, list[float]] = {"pool": [], "per shard": [], "alone": []}
    for round_no in range(repeats):
        forward = round_no % 2 == 0
        for label, threads, idle_max_s in rest_cases[::1 if forward else -1]:
            got = _rest(ctx, empty, threads, size["rest_s"], idle_max_s)
            rest[label].append(got)
            ctx.progress(f"shards: at rest, {total} shards, {label}: {got['threads']} threads, "
                         f"{got['cpu_percent']:.1f}% of a core")
        for label, stream, threads in [("alone", alone, None), ("pool", mixed, pooled),
                                       ("per shard", mixed, per_shard)][::1 if forward else -1]:
            whole, reading = _read(ctx, stream, records, threads)
            reads[label].append(whole)
            after_open[label].append(reading)
            ctx.progress(f"shards: {label}: {whole:,.0f} records/s ({reading:,.0f} after open())")
    base = {"emulator": "kinesalite", "shards": total, "records": records, "record_bytes": 100, "repeats": repeats}
    rows: list[dict[str, Any]] = []
    baseline_cpu = summary([r["cpu_percent"] for r in rest[rest_cases[-1][0]]])["median"]
    for label, threads, idle_max_s in rest_cases:
        cpu = summary([r["cpu_percent"] for r in rest[label]])
        rows.append({**base, "records": 0, "kind": "rest", "case": f"at rest, {total} idle shards, {label}",
                     "reader_threads": threads, "idle_max_s": idle_max_s,
                     "threads": max(r["threads"] for r in rest[label]), "cpu_percent": cpu,
                     "ratio": ratio(cpu["median"], baseline_cpu)})
    alone_rate, alone_reading = summary(reads["alone"]), summary(after_open["alone"])
    rows.append({**base, "kind": "busy", "shards": busy, "case": f"{busy} busy shards alone (baseline)",
                 "reader_threads": pooled, "records_per_s": alone_rate, "records_per_s_after_open": alone_reading,
                 "ratio": 1.0, "ratio_after_open": 1.0})
    for label, threads in (("pool", pooled), ("per shard", per_shard)):
        rate, reading = summary(reads[label]), summary(after_open[label])
        rows.append({**base, "kind": "busy", "case": f"{busy} busy among {total} shards, "
                                                    f"{'pool (default)' if label == 'pool' else 'a thread per shard'}",
                     "reader_threads": threads, "records_per_s": rate, "records_per_s_after_open": reading,
                     "ratio": ratio(rate["median"], alone_rate["median"]),
                     "ratio_after_open": ratio(reading["median"], alone_reading["median"])})
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Goal 4 of the consumer-cost work: bounded threads, <= 5% of a core at rest, busy shards >= 0.9x."""
    out = []
    rest = [r for r in rows if r["kind"] == "rest" and r["reader_threads"] == 8]
    busy = [r for r in rows if r["kind"] == "busy" and r["reader_threads"] == 8 and "among" in r["case"]]
    for r in rest:
        setting = "no cap" if r["idle_max_s"] is None else f"max_empty_record_backoff_s={r['idle_max_s']:g}"
        out.append({"figure": f"worker owning {r['shards']} idle shards ({setting}): reader threads; CPU at rest",
                    "value": f"{r['threads']} threads; {r['cpu_percent']['median']:.1f}% of a core "
                             f"({r['ratio']:.2f}x a thread per shard)",
                    "goal": "bounded; <= 5%", "met": r["cpu_percent"]["median"] <= 5.0})
    if busy:
        r = busy[0]
        out.append({"figure": "busy shards read among idle ones / alone, records/s from open() (once open)",
                    "value": f"{r['ratio']:.2f}x ({r['records_per_s']['median']:,.0f} records/s); once open: "
                             f"{r['ratio_after_open']:.2f}x ({r['records_per_s_after_open']['median']:,.0f} "
                             f"records/s)",
                    "goal": ">= 0.9x (with open())", "met": r["ratio"] >= 0.9})
    return out
