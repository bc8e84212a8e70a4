"""The in-flight record tracker alone: emit+ack pairs per second, and bytes of memory per in-flight record.

Throughput. Records are spread round-robin over 1, 4 or 64 shards (one tracker each, as in the spout). Each cycle
emits 1,000 records, fails 1% of them, acks the others (in emission order, or shuffled within the cycle), lets
the failed ones come back through the retry queue and acks them, then reads every shard's checkpoint and runs its
timeout check (``expire``), as the spout's loop does. A pair is one record emitted and finally acked; the figure
is records / wall time, on one thread. Keys are made before the clock starts (key creation is not counted); the
``keys counted`` variant builds each key from its sequence-number string on emit and again on ack (as the spout
does from the GetRecords reply and from the message id).

Memory. tracemalloc measures what the trackers hold for N in-flight records: the keys were made before (their
size is given apart), the payload is one shared object (not counted), emission times are distinct floats (counted).
``all in flight``: N records emitted, none acked. ``after random acks``: 2N emitted, a random half acked.
"""

from __future__ import annotations

import gc
import random
import sys
import time
import tracemalloc
from typing import Any

from benchmarks.context import BenchContext
from benchmarks.stats import summary
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import InflightRecordTracker

TITLE = "In-flight record tracker: emit+ack pairs/s and memory per in-flight record"
GOAL_PAIRS_PER_S = 1_000_000
GOAL_BYTES_PER_RECORD = 150
SHARDS = (1, 4, 64)
ORDERS = ("in-order", "random")
FAIL_RATE = 0.01
CYCLE = 1000
#: A 56-digit sequence number like the ones Kinesis and kinesalite hand out; keys step up sparsely from it.
BASE_SEQUENCE = 49_590_338_271_490_256_608_559_692_538_361_571_095_921_575_989_136_588_898
STEP = 1 << 20

SIZES = {
    "full": {"pairs": 200_000, "repeats": 7, "inflight": 100_000, "memory_repeats": 3},
    "quick": {"pairs": 100_000, "repeats": 5, "inflight": 50_000, "memory_repeats": 2},
    "smoke": {"pairs": 4_000, "repeats": 2, "inflight": 2_000, "memory_repeats": 1},
}

COLUMNS = [
    ("case", "case", "{}"),
    ("pairs_per_s", "emit+ack pairs/s", "fig0"),
    ("bytes_per_inflight_record", "B/in-flight record", "fig0"),
    ("bytes_per_inflight_record_with_key", "with key", "fig0"),
]

Tracker = InflightRecordTracker
Ops = list[tuple[int, Any]]  # (shard index, key or sequence-number string)
Cycle = tuple[Ops, Ops, Ops]  # emits, fails, acks


def sequence_numbers(count: int, shards: int) -> list[tuple[int, int]]:
    """``(shard index, sequence number)`` of ``count`` records dealt round-robin over ``shards`` shards."""
    return [(i % shards, BASE_SEQUENCE + (i // shards) * STEP + i % shards) for i in range(count)]


def plan(shards: int, pairs: int, order: str, keys_counted: bool, seed: int = 0) -> list[Cycle]:
    """The operations of every cycle, prepared once before any clock starts: ``(emits, fails, acks)``, each a list
    of ``(shard index, key)`` (a sequence-number string instead of a key when ``keys_counted``)."""
    rng = random.Random(seed)
    numbers = sequence_numbers(pairs, shards)
    cycles: list[Cycle] = []
    for start in range(0, pairs, CYCLE):
        chunk = numbers[start:start + CYCLE]
        emits: Ops = [(shard, str(seq) if keys_counted else SequenceKey(seq, 0)) for shard, seq in chunk]
        done = list(emits)
        if order == "random":
            rng.shuffle(done)
        failing = set(rng.sample(range(len(done)), max(1, int(len(done) * FAIL_RATE))))
        fails = [op for i, op in enumerate(done) if i in failing]
        acks = [op for i, op in enumerate(done) if i not in failing]
        cycles.append((emits, fails, acks))
    return cycles


def bind(trackers: list[Tracker], cycles: list[Cycle]) -> list[tuple[list[Any], list[Any], list[Any]]]:
    """The cycles with each shard index replaced by the bound method to call (done before the clock starts)."""
    emit = [t.emit for t in trackers]
    fail = [t.fail for t in trackers]
    ack = [t.ack for t in trackers]
    return [([(emit[s], k) for s, k in emits], [(fail[s], k) for s, k in fails], [(ack[s], k) for s, k in acks])
            for emits, fails, acks in cycles]


def run_cycles(trackers: list[Tracker], cycles: list[tuple[list[Any], list[Any], list[Any]]],
               keys_counted: bool) -> float:
    """Play the bound cycles; returns the wall time. Failed records come back through ``next_retry`` (due after
    the tracker's 0.1 s backoff) and are acked; then each shard's checkpoint is read and ``expire`` runs."""
    key_of = SequenceKey
    now = 1_000.0
    t0 = time.perf_counter()
    for emits, fails, acks in cycles:
        if keys_counted:
            for emit, s in emits:
                emit(key_of(int(s), 0), now)
            for fail, s in fails:
                fail(key_of(int(s), 0), now)
            for ack, s in acks:
                ack(key_of(int(s), 0))
        else:
            for emit, key in emits:
                emit(key, now)
            for fail, key in fails:
                fail(key, now)
            for ack, key in acks:
                ack(key)
        now += 0.2
        for tracker in trackers:
            if tracker.retry_queue_len:
                while (got := tracker.next_retry(now)) is not None:
                    tracker.ack(got[0])
            tracker.checkpoint  # noqa: B018 - read as the spout does after acks
            tracker.expire(now)
    return time.perf_counter() - t0


def check_done(trackers: list[Tracker], pairs: int) -> None:
    """Every record must have been acked, none left in flight."""
    acked = sum(t.stats.acked for t in trackers)
    inflight = sum(t.inflight_count for t in trackers)
    if acked != pairs or inflight:
        raise AssertionError(f"tracker benchmark lost count: {acked} acked of {pairs}, {inflight} still in flight")


def throughput_runs(shards: int, order: str, pairs: int, repeats: int, keys_counted: bool = False) -> list[float]:
    """Pairs per second of ``repeats`` runs of the same plan, each on fresh trackers."""
    cycles = plan(shards, pairs, order, keys_counted)
    rates = []
    for _ in range(repeats):
        trackers = [Tracker(f"shardId-{i:012d}") for i in range(shards)]
        bound = bind(trackers, cycles)
        gc.collect()
        wall = run_cycles(trackers, bound, keys_counted)
        check_done(trackers, pairs)
        rates.append(pairs / wall)
    return rates


def key_bytes() -> int:
    """Bytes of one key: the 2-tuple and its 56-digit int (the sub-sequence 0 is a shared small int)."""
    key = SequenceKey(BASE_SEQUENCE + STEP, 0)
    return sys.getsizeof(key) + sys.getsizeof(key.sequence)


def bytes_per_inflight(inflight: int, shards: int, with_random_acks: bool = True, seed: int = 0
                       ) -> tuple[float, float | None]:
    """Bytes the trackers hold per in-flight record: first with ``inflight`` records emitted and none acked; then
    (if ``with_random_acks``) after ``inflight`` more were emitted and a random half of all of them acked."""
    emitted = inflight * 2 if with_random_acks else inflight
    keys = [(shard, SequenceKey(seq, 0)) for shard, seq in sequence_numbers(emitted, shards)]
    to_ack = random.Random(seed).sample(keys, emitted - inflight)
    payload = object()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trackers = [Tracker(f"shardId-{i:012d}") for i in range(shards)]
        emit = [t.emit for t in trackers]
        start = 1_000.0
        for i in range(inflight):
            shard, key = keys[i]
            emit[shard](key, start + i * 1e-6, payload, 100)
        all_inflight = (tracemalloc.get_traced_memory()[0] - before) / inflight
        after_acks = None
        if with_random_acks:
            for i in range(inflight, emitted):
                shard, key = keys[i]
                emit[shard](key, start + i * 1e-6, payload, 100)
            for shard, key in to_ack:
                trackers[shard].ack(key)
            gc.collect()
            after_acks = (tracemalloc.get_traced_memory()[0] - before) / inflight
    finally:
        tracemalloc.stop()
    if sum(t.inflight_count for t in trackers) != inflight:
        raise AssertionError("tracker memory benchmark: wrong number of records in flight")
    return all_inflight, after_acks


def memory_rows(inflight: int, shards: int, repeats: int, with_random_acks: bool = True) -> list[dict[str, Any]]:
    """Rows for the memory figures of ``inflight`` records on ``shards`` shards (median of ``repeats`` runs)."""
    runs = [bytes_per_inflight(inflight, shards, with_random_acks, seed) for seed in range(repeats)]
    states = [("all in flight", [r[0] for r in runs])]
    if with_random_acks:
        states.append(("after random acks", [float(r[1]) for r in runs if r[1] is not None]))
    rows = []
    for state, values in states:
        per = summary(values)
        median = float(per["median"])  # type: ignore[arg-type]
        rows.append({"case": f"{shards} shard{'s' if shards > 1 else ''}, {inflight:,} in flight, {state}",
                     "kind": "memory", "shards": shards, "inflight_records": inflight, "state": state,
                     "repeats": repeats, "bytes_per_inflight_record": per, "key_bytes": key_bytes(),
                     "bytes_per_inflight_record_with_key": round(median + key_bytes(), 1)})
    return rows


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    rows: list[dict[str, Any]] = []
    variants = [(shards, order, False) for shards in SHARDS for order in ORDERS]
    variants += [(4, order, True) for order in ORDERS]
    for shards, order, counted in variants:
        rates = throughput_runs(shards, order, size["pairs"], size["repeats"], counted)
        case = f"{shards} shard{'s' if shards > 1 else ''}, {order} acks" + (", keys counted" if counted else "")
        fig = summary(rates)
        ctx.progress(f"tracker: {case}: {fig['median']:,.0f} pairs/s (spread {fig['spread_pct']}%)")
        rows.append({"case": case, "kind": "throughput", "shards": shards, "ack_order": order,
                     "fail_rate": FAIL_RATE, "key_creation_counted": counted, "pairs": size["pairs"],
                     "repeats": size["repeats"], "pairs_per_s": fig})
    for shards in SHARDS:
        for row in memory_rows(size["inflight"], shards, size["memory_repeats"]):
            ctx.progress(f"tracker: {row['case']}: {row['bytes_per_inflight_record']['median']:.0f} B per record "
                         f"(+{row['key_bytes']} B for its key)")
            rows.append(row)
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slowest and fastest main throughput cases, and the largest memory figure of each state, against the
    goals. After random acks a dict keeps the size it grew to, and the emission-order list keeps acked keys until
    it is compacted, so that state costs more per record still in flight."""
    speed = [r for r in rows if r["kind"] == "throughput" and not r["key_creation_counted"]]
    out = []
    if speed:
        worst = min(speed, key=lambda r: r["pairs_per_s"]["median"])
        best = max(speed, key=lambda r: r["pairs_per_s"]["median"])
        out.append({"figure": "tracker emit+ack pairs/s (keys made beforehand), slowest to fastest case",
                    "value": f"{worst['pairs_per_s']['median']:,.0f} ({worst['case']}) to "
                             f"{best['pairs_per_s']['median']:,.0f} ({best['case']})",
                    "goal": f">= {GOAL_PAIRS_PER_S:,}", "met": worst["pairs_per_s"]["median"] >= GOAL_PAIRS_PER_S})
    for state in ("all in flight", "after random acks"):
        rows_in_state = [r for r in rows if r["kind"] == "memory" and r["state"] == state]
        if not rows_in_state:
            continue
        worst = max(rows_in_state, key=lambda r: r["bytes_per_inflight_record"]["median"])
        out.append({"figure": f"tracker bytes per in-flight record, {state} (keys and payload not counted), "
                              f"largest case",
                    "value": f"{worst['bytes_per_inflight_record']['median']:.0f} B ({worst['case']}); "
                             f"+{worst['key_bytes']} B per key",
                    "goal": f"<= {GOAL_BYTES_PER_RECORD}",
                    "met": worst["bytes_per_inflight_record"]["median"] <= GOAL_BYTES_PER_RECORD})
    return out
