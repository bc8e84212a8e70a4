"""State update cost: what one Spark task's bulk state update costs per batch, by map type and backend.

One partition's update of a batch, as ``persistent_aggregate`` makes it on an executor: the batch's partial
counts of N distinct keys (1,000 and 10,000) are folded into the stored values through a map state: one bulk
read (``multi_get``) and one bulk conditional write (compare-and-set: Redis runs a Lua script, memcached gets a
pipelined ``cas``/``add``). Each measured batch is a new txid over keys that already exist (a first batch made
them and is not measured); the map types take turns in every round.

``plain write`` is the baseline in the same run: the at-least-once sink's cost, one blind bulk write of the same
N values (Redis ``MSET``, memcached pipelined ``set``) with no read and no txid. ``added ms`` is the median
update time minus the plain write's, ``vs plain`` the ratio of the two: the batch latency exactly-once adds to
an at-least-once write of the same results. The in-memory backing map (same serializer, no network) shows the
map logic and the JSON encoding alone. Redis and memcached are private local servers on loopback, so a real
network adds its round-trip time per round trip (2 per batch).

The ``spark`` rows measure whole batches on a ``local[2]`` session against Redis: a cached DataFrame of 3 rows
per key is grouped and counted, and the counts written, either by ``persistent_aggregate`` into a
TransactionalMap or an OpaqueMap (2 partitions, each one bulk read and one conditional bulk write), or, as the
at-least-once baseline, by the same group-by and count followed by a blind ``MSET`` per partition
(``foreachPartition``). ``vs plain`` is then the batch latency ratio, ``added ms`` the batch latency exactly-once
adds.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any, Callable

from benchmarks.context import BenchContext
from benchmarks.stats import ratio, summary
from kinesis_spout.state import MemoryBackingMap, NonTransactionalMap, OpaqueMap, TransactionalMap
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap
from kinesis_spout.testing.memcached import MemcachedServer
from kinesis_spout.testing.redis import RedisServer

TITLE = "State: exactly-once map updates per batch by map type and backend"
MAPS = (("transactional", TransactionalMap), ("opaque", OpaqueMap), ("non-transactional", NonTransactionalMap))
SIZES = {
    "full": {"keys": (1_000, 10_000), "repeats": 7, "spark_repeats": 5},
    "quick": {"keys": (1_000, 10_000), "repeats": 3, "spark_repeats": 3},
    "smoke": {"keys": (100,), "repeats": 1, "spark_repeats": 1},
}

COLUMNS = [
    ("backend", "backend", "{}"),
    ("map", "map", "{}"),
    ("keys", "keys/batch", "{:,}"),
    ("keys_per_s", "keys/s", "fig0"),
    ("ms_per_batch", "ms/batch", "fig1"),
    ("round_trips_per_batch", "round trips/batch", "{:g}"),
    ("plain_ms_per_batch", "plain write ms", "fig1"),
    ("added_ms", "added ms", "{:,.1f}"),
    ("ratio_vs_plain", "vs plain", "x"),
]


def _update(backing: Any, cls: Any, keys: list[tuple[str]], txid: int) -> tuple[float, int]:
    """One batch: (seconds, round trips) of a multi_update adding 1..3 to each key under ``txid``, and its commit
    (where a map state writes what the batch updated)."""
    state = cls(backing)
    before = backing.round_trips
    state.begin_commit(txid)
    updaters = [_Add(1 + i % 3) for i in range(len(keys))]
    t0 = time.perf_counter()
    state.multi_update(keys, updaters)
    state.commit(txid)
    elapsed = time.perf_counter() - t0
    return elapsed, backing.round_trips - before


class _Add:
    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, stored: Any) -> Any:
        return (stored or 0) + self.n


def _plain(backing: Any, keys: list[tuple[str]], txid: int) -> float:
    values = [txid + i % 3 for i in range(len(keys))]
    t0 = time.perf_counter()
    backing.multi_put(keys, values)
    return time.perf_counter() - t0


def measure(ctx: BenchContext, backend: str, make: Callable[[str], Any], keys_n: int, repeats: int
            ) -> list[dict[str, Any]]:
    """Rows of one backend and batch size: each map type and the plain write, alternating."""
    keys = [(f"word-{i:06d}",) for i in range(keys_n)]
    run = uuid.uuid4().hex[:8]
    backings = {name: make(f"bench-{run}-{name}") for name, _ in MAPS}
    plain = make(f"bench-{run}-plain")
    times: dict[str, list[float]] = {name: [] for name, _ in MAPS}
    trips: dict[str, list[int]] = {name: [] for name, _ in MAPS}
    plain_times: list[float] = []
    try:
        for name, cls in MAPS:  # the first batch creates the keys: not measured
            _update(backings[name], cls, keys, 1)
        _plain(plain, keys, 1)
        for round_no in range(repeats):
            order = MAPS[round_no % len(MAPS):] + MAPS[:round_no % len(MAPS)]
            for name, cls in order:
                elapsed, n = _update(backings[name], cls, keys, round_no + 2)
                times[name].append(elapsed)
                trips[name].append(n)
            plain_times.append(_plain(plain, keys, round_no + 2))
        ctx.progress(f"state/{backend}, {keys_n:,} keys: " + ", ".join(
            f"{name} {sorted(t)[len(t) // 2] * 1000:.1f} ms" for name, t in times.items())
            + f", plain write {sorted(plain_times)[len(plain_times) // 2] * 1000:.1f} ms")
    finally:
        for b in [*backings.values(), plain]:
            b.close()
    plain_fig = summary([t * 1000 for t in plain_times])
    rows = []
    for name, _ in MAPS:
        ms = summary([t * 1000 for t in times[name]])
        rows.append({
            "case": f"{backend}, {name}, {keys_n:,} keys", "backend": backend, "map": name, "keys": keys_n,
            "repeats": repeats,
            "keys_per_s": summary([keys_n / t for t in times[name]]),
            "ms_per_batch": ms,
            "round_trips_per_batch": sorted(trips[name])[len(trips[name]) // 2],
            "plain_ms_per_batch": plain_fig,
            "added_ms": round(float(ms["median"]) - float(plain_fig["median"]), 2),  # type: ignore[arg-type]
            "ratio_vs_plain": ratio(ms, plain_fig),
        })
    return rows


def _plain_partition(url: str, namespace: str) -> Callable[[Any], None]:
    def write(rows: Any) -> None:
        taken = [(r["word"], r["n"]) for r in rows]
        if not taken:
            return
        backing = RedisBackingMap(url, namespace=namespace)
        try:
            backing.multi_put([(w,) for w, _ in taken], [n for _, n in taken])
        finally:
            backing.close()

    return write


def measure_spark(ctx: BenchContext, spark: Any, url: str, keys_n: int, repeats: int) -> list[dict[str, Any]]:
    """Batch latency on Spark: persistent_aggregate into each exactly-once map vs group-by + blind write."""
    from pyspark.sql import functions as F

    from kinesis_spout.state import Count, SpoutKind, TxBatch, persistent_aggregate

    run_id = uuid.uuid4().hex[:8]
    df = spark.createDataFrame([(f"word-{i % keys_n:06d}",) for i in range(3 * keys_n)], "word string")
    df = df.repartition(2).cache()
    df.count()
    kinds = (("transactional", TransactionalMap), ("opaque", OpaqueMap))
    factories = {name: cls.factory(RedisBackingMap.factory(url, namespace=f"bench-spark-{run_id}-{name}"))
                 for name, cls in kinds}
    plain_ns = f"bench-spark-{run_id}-plain"

    def plain() -> None:
        df.groupBy("word").agg(F.count(F.lit(1)).alias("n")).coalesce(2).rdd.foreachPartition(
            _plain_partition(url, plain_ns))

    times: dict[str, list[float]] = {name: [] for name in ("plain", *factories)}
    trips: dict[str, list[int]] = {name: [] for name in factories}
    steps: list[tuple[str, Callable[[int], Any]]] = [("plain", lambda txid: plain())] + [
        (name, lambda txid, f=f: persistent_aggregate(df, TxBatch(txid, SpoutKind.TRANSACTIONAL, run=run_id), f,
                                                      group_by=["word"], aggregator=Count(),
                                                      partitions=2)) for name, f in factories.items()]
    for _name, step in steps:  # warm-up (creates the keys), not measured
        step(0)
    for round_no in range(repeats):
        for name, step in steps[round_no % len(steps):] + steps[:round_no % len(steps)]:
            t0 = time.perf_counter()
            result = step(round_no + 1)
            times[name].append(time.perf_counter() - t0)
            if name in trips:
                trips[name].append(result.round_trips)
    df.unpersist()
    plain_fig = summary([t * 1000 for t in times["plain"]])
    ctx.progress(f"state/spark, {keys_n:,} keys: " + ", ".join(
        f"{name} {sorted(t)[len(t) // 2] * 1000:.0f} ms" for name, t in times.items()))
    rows = []
    for name in factories:
        ms = summary([t * 1000 for t in times[name]])
        rows.append({
            "case": f"spark + redis, {name}, {keys_n:,} keys", "backend": "spark + redis", "map": name,
            "keys": keys_n, "repeats": repeats, "rows_per_batch": 3 * keys_n,
            "keys_per_s": summary([keys_n / t for t in times[name]]),
            "ms_per_batch": ms,
            "round_trips_per_batch": sorted(trips[name])[len(trips[name]) // 2],
            "plain_ms_per_batch": plain_fig,
            "added_ms": round(float(ms["median"]) - float(plain_fig["median"]), 2),  # type: ignore[arg-type]
            "ratio_vs_plain": ratio(ms, plain_fig),
        })
    return rows


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        ctx.progress("state: starting Redis and memcached")
        redis = stack.enter_context(RedisServer())
        memcached = stack.enter_context(MemcachedServer(memory_mb=256))
        backends: dict[str, Callable[[str], Any]] = {
            "memory": lambda ns: MemoryBackingMap(ns),
            "redis": lambda ns: RedisBackingMap(redis.url, namespace=ns),
            "memcached": lambda ns: MemcachedBackingMap(memcached.server, namespace=ns),
        }
        for keys_n in size["keys"]:
            for backend, make in backends.items():
                rows += measure(ctx, backend, make, keys_n, size["repeats"])
        from kinesis_spout.testing.spark import local_spark_session

        ctx.progress("state: starting a local[2] Spark session")
        spark = local_spark_session("kinesis-spout-bench-state")
        try:
            for keys_n in size["keys"]:
                rows += measure_spark(ctx, spark, redis.url, keys_n, size["spark_repeats"])
        finally:
            spark.stop()
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The opaque map's update at the largest batch, on each network backend, next to the plain write."""
    out = []
    largest = max(row["keys"] for row in rows)
    for row in rows:
        if row["map"] != "opaque" or row["keys"] != largest or row["backend"] == "memory":
            continue
        what = "Spark batch with an OpaqueMap on Redis" if row["backend"].startswith("spark") \
            else f"OpaqueMap update on {row['backend']}"
        out.append({"figure": f"{what}, {largest:,} keys per batch",
                    "value": f"{row['keys_per_s']['median']:,.0f} keys/s, {row['round_trips_per_batch']} round trips; "
                             f"+{row['added_ms']:,.1f} ms ({row['ratio_vs_plain']}x) over a plain write",
                    "goal": "-", "met": None})
    return out
