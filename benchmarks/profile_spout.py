"""Where a spout read spends its CPU, by thread: ``python -m benchmarks.profile_spout [--single] [--plain]
[--freeze] [--kpl] [--batch-acks] [--columns] [--flat-out] [--interval=S]``.

A 4-shard kinesalite stream of 40,000 records of 100 B is read from TRIM_HORIZON by a KinesisSpout with checkpoints
in a private ZooKeeper; the consumer takes batches of 1,000 and acks them with ``ack_many`` (``--single``: one
``ack`` per record). cProfile runs on each thread's own CPU clock (``time.thread_time``) in the consumer and in the
reader pool's threads; the report gives each side's profiled CPU per record and its most expensive functions.
Profiling multiplies the costs: compare the sides, not the absolute figures with the read benchmark's.
``--kpl`` puts the same number of user records as KPL aggregates of 100 (this project's encoder, each aggregate to
its own shard); ``--batch-acks`` acks each batch whole (``batch.ack()``); ``--columns`` takes columnar batches
(``next_columns()``), builds each one's Arrow batch and acks it whole. ``--flat-out`` is the checkpoint benchmark's
flat-out consumer (:mod:`benchmarks.bench_checkpoint`): batches of 50, a 2 ms sink (a sleep) before each batch's
acks, one ``ack`` per record; ``--interval=S`` sets ``checkpoint_interval_s`` (default: the setting's default).
``--plain`` runs without the profilers: the process CPU per record as the read benchmark sees it, the consumer
thread's share of it (next_batch, the acks: what the spout adds to a read), and the garbage collector's share.
The profiled report also sums the consumer's CPU by group of functions (:data:`GROUPS`: taking records, emitting
them, each part of an ack), each group's time counted once (its callees included). ``--freeze`` calls
``gc.freeze()`` once the servers and the spout are made (as a long-running consumer can after its start-up): the
objects alive then (botocore's service models, the imported modules) leave the collector's work. The cyclic
garbage collector's share is timed apart (``gc.callbacks``, on the CPU clock of the thread that collects): records,
tuples and tracker entries live from the read to the ack, so they reach the older generations and make full
collections, which walk every live object, run often.
"""

from __future__ import annotations

import cProfile
import gc
import io
import os
import pstats
import sys
import time
from typing import Any

from benchmarks.bench_checkpoint import BATCH as FLAT_OUT_BATCH
from benchmarks.bench_checkpoint import SINK_S as FLAT_OUT_SINK_S
from benchmarks.machine import relative_paths
from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval import pool as pool_module
from kinesis_spout.testing.emulators import KinesaliteServer
from kinesis_spout.testing.kinesis import put_records, wait_for_stream
from kinesis_spout.testing.zookeeper import ZooKeeperServer

RECORDS = 40_000
SHARDS = 4
PER_AGGREGATE = 100


#: The consumer's function groups of the profiled report: name -> (file suffix, function name) of the functions whose
#: cumulative time (callees included) makes the group. Nested groups are counted apart, not subtracted.
GROUPS: dict[str, list[tuple[str, str]]] = {
    "next_batch (all)": [("spout/facade.py", "next_batch")],
    "  emit: spans, tuples, scheme": [("spout/emission.py", "_emit")],
    "next_columns (all)": [("spout/facade.py", "next_columns")],
    "  put in flight (spans)": [("spout/emission.py", "put_in_flight")],
    "to_arrow": [("spout/columns.py", "to_arrow")],
    "acks (all)": [("spout/facade.py", "ack"), ("spout/facade.py", "ack_many"), ("spout/batch.py", "ack_except")],
    "  message-id parse (+ lookup)": [("spout/acks.py", "lookup"), ("spout/acks.py", "_rank")],
    "  tracker ack": [("tracking/spans.py", "ack"), ("tracking/spans.py", "ack_many"),
                      ("tracking/spans.py", "ack_span"), ("tracking/spans.py", "ack_attempt")],
    "  checkpoint offer": [("spout/registry.py", "offer_checkpoint")],
    "  notify settled": [("spout/registry.py", "notify_settled")],
}


def group_costs(stats: pstats.Stats, records: int) -> dict[str, float]:
    """µs of profiled consumer CPU per record for each of :data:`GROUPS` (cumulative times, callees included)."""
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for group, functions in GROUPS.items():
        cum = sum(row[3] for (path, _line, name), row in table.items()
                  if any(path.endswith(suffix) and name == fn for suffix, fn in functions))
        out[group] = cum / records * 1e6
    return out


class GcClock:
    """CPU time (of the collecting thread) spent in the cyclic garbage collector, and collections by generation."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.collections = [0, 0, 0]
        self.cpu_by_generation = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            spent = time.thread_time() - self._started
            self.cpu_s += spent
            self.collections[info["generation"]] += 1
            self.cpu_by_generation[info["generation"]] += spent


def _aggregates(count: int) -> tuple[list[bytes], list[str]]:
    """``count`` user records of 100 B as aggregates of ``PER_AGGREGATE``, and each aggregate's partition key."""
    from kinesis_spout.kinesis.writing.aggregator import AggregateBuilder

    blobs, keys = [], []
    for first in range(0, count, PER_AGGREGATE):
        builder = AggregateBuilder()
        for _ in range(first, min(first + PER_AGGREGATE, count)):
            builder.add(f"agg-{first}", None, os.urandom(100))
        data, key, _ = builder.build()
        blobs.append(data)
        keys.append(key)
    return blobs, keys


def main(single: bool, plain: bool = False, freeze: bool = False, kpl: bool = False, batch_acks: bool = False,
         columns: bool = False, flat_out: bool = False, interval_s: float | None = None) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")  # emulators take any credentials
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    profiles: list[tuple[str, cProfile.Profile]] = []
    work = pool_module.ReaderPool._work

    def profiled_work(self: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        profiles.append(("readers", profile))
        profile.enable()
        try:
            work(self)
        finally:
            profile.disable()

    if columns:  # Arrow's compute functions are imported by the first batch, and pyarrow imports pandas on its first
        # conversion of a Python list (0.25 s of CPU): both before the clock, as a long run would have them
        import pyarrow
        import pyarrow.compute  # noqa: F401

        pyarrow.array([0])
    if not plain:
        pool_module.ReaderPool._work = profiled_work  # type: ignore[method-assign]
    with KinesaliteServer() as kinesis, ZooKeeperServer() as zk:
        client = make_client("us-east-1", kinesis.endpoint_url)
        client.create_stream(StreamName="profile", ShardCount=SHARDS)
        wait_for_stream(client, "profile")
        if kpl:
            blobs, keys = _aggregates(RECORDS)
            put_records(client, "profile", blobs, partition_keys=keys, batch=100)
        else:
            put_records(client, "profile", [os.urandom(100) for _ in range(RECORDS)])
        config = SpoutConfig(stream_name="profile", app_name="profile", endpoint_url=kinesis.endpoint_url,
                             region="us-east-1", zookeeper=zk.hosts, initial_position=InitialPosition.TRIM_HORIZON,
                             **({} if interval_s is None else {"checkpoint_interval_s": interval_s}))
        take = FLAT_OUT_BATCH if flat_out else 1000
        spout = KinesisSpout(config, ZooKeeperCheckpointStore.from_config(config),
                             client=make_client("us-east-1", kinesis.endpoint_url))
        consumer = cProfile.Profile(time.thread_time)
        profiles.append(("consumer", consumer))
        if freeze:
            gc.collect()
            gc.freeze()
        cpu = time.process_time()
        consumer_cpu = time.thread_time()
        gc_clock = GcClock()
        gc.callbacks.append(gc_clock)
        if not plain:
            consumer.enable()
        spout.open()
        count = 0
        ack_cpu = 0.0  # the consumer thread's CPU in the acks alone
        while count < RECORDS:
            if columns:
                taken = spout.next_columns(max_records=1000, timeout_s=0.5)
                if taken:
                    taken.to_arrow()
                acked_at = time.thread_time()
                taken.ack()
                ack_cpu += time.thread_time() - acked_at
                count += len(taken)
                continue
            batch = spout.next_batch(max_records=take, timeout_s=0.5)
            if flat_out and batch:
                time.sleep(FLAT_OUT_SINK_S)
            acked_at = time.thread_time()
            if batch_acks:
                batch.ack()
            elif single or flat_out:
                for tup in batch:
                    spout.ack(tup.message_id)
            else:
                spout.ack_many([tup.message_id for tup in batch])
            ack_cpu += time.thread_time() - acked_at
            count += len(batch)
        consumer.disable()
        consumer_cpu = time.thread_time() - consumer_cpu
        cpu = time.process_time() - cpu
        gc.callbacks.remove(gc_clock)
        spout.close()
    how = ("columnar batches, ack()" if columns else "one by one, flat out" if flat_out else "batch.ack()"
           if batch_acks else "one by one" if single else "with ack_many")
    print(f"{RECORDS:,} {'user records in aggregates' if kpl else 'records'}, acks {how}: process CPU "
          f"{cpu / RECORDS * 1e6:.1f} µs per record{'' if plain else ' (profiled)'}")
    print(f"consumer thread: {consumer_cpu / RECORDS * 1e6:.1f} µs per record{'' if plain else ' (profiled)'}, of "
          f"which acks {ack_cpu / RECORDS * 1e6:.1f} µs, next_batch {(consumer_cpu - ack_cpu) / RECORDS * 1e6:.1f} µs")
    print(f"garbage collector: {gc_clock.cpu_s / RECORDS * 1e6:.1f} µs per record "
          f"({gc_clock.cpu_s / cpu:.0%} of the process CPU; collections by generation {gc_clock.collections}, "
          f"ms by generation {[round(s * 1e3, 1) for s in gc_clock.cpu_by_generation]})")
    for role in () if plain else ("consumer", "readers"):
        mine = [p for r, p in profiles if r == role]
        out = io.StringIO()
        stats = pstats.Stats(mine[0], stream=out)
        for profile in mine[1:]:
            stats.add(profile)
        stats.sort_stats("tottime").print_stats(25)
        total = getattr(stats, "total_tt", 0.0)
        print(f"\n== {role}: {total / RECORDS * 1e6:.1f} µs of thread CPU per record (profiled)")
        print("\n".join(relative_paths(out.getvalue()).splitlines()[6:34]))
        if role == "consumer":
            for group, us in group_costs(stats, RECORDS).items():
                print(f"{group:<36} {us:6.1f} µs per record")


if __name__ == "__main__":
    flags = sys.argv[1:]
    intervals = [float(flag.split("=", 1)[1]) for flag in flags if flag.startswith("--interval=")]
    main("--single" in flags, "--plain" in flags, "--freeze" in flags, "--kpl" in flags, "--batch-acks" in flags,
         "--columns" in flags, "--flat-out" in flags, intervals[-1] if intervals else None)
