"""The in-flight record tracker alone: emit+ack pairs per second, and bytes of memory per in-flight record.

Two trackers in the same run. The library's one tracker (``SpanTracker``, exported as ``InflightRecordTracker``),
and as the baseline the per-record tracker it replaced (one map entry a record, a port of the original Storm
spout's), which now lives in the tests as their reference model (``tests/unit/core/reference_tracker.py``,
``PerRecordTracker``): the rows without "span" are the baseline's. Run from the project's root (``python -m
benchmarks``), which puts ``tests`` on the import path.

Throughput. Records are spread round-robin over 1, 4 or 64 shards (one tracker each, as in the spout). Each cycle
emits 1,000 records, fails 1% of them, acks the others (in emission order, or shuffled within the cycle), lets
the failed ones come back through the retry queue and acks them, then reads every shard's checkpoint and runs its
timeout check (``expire``), as the spout's loop does. A pair is one record emitted and finally acked; the figure
is records / wall time, on one thread. Keys are the tracker's ranks (``SequenceKey.rank``: the key as one int).
``keys made beforehand``: made before the clock starts, the same object for emit and ack. The other cases build
every key from a string on emit and again on fail and ack, inside the clock. ``keys counted``: the rank from the
sequence-number string on both sides (``int(s) * RANK_BASE``, which is ``rank_of`` inlined: one ``int()``), one
call per record. ``keys counted, batched calls``: the same, with one ``emit_many`` and one ``ack_many`` per shard
and cycle and the keys built in a list comprehension, as a spout that takes records and acks in chunks would.
``as SequenceKey``: a ``SequenceKey(int(s), 0)`` instead of a rank, as the spout and its getter pass keys until
they pass ranks (the tracker converts it). ``message ids parsed``: the rank from the sequence-number string on
emit and from the whole message id (``parse_message_id_rank``, validation included) on fail and ack, as the spout
does from the id a consumer acks (finding the shard's tracker by its id is not counted).

Memory. tracemalloc measures what the trackers hold for N in-flight records: the keys were made before (their
size is given apart), the payload is one shared object (not counted), emission times are distinct floats (counted).
``all in flight``: N records emitted, none acked. ``after random acks``: 2N emitted, a random half acked.
``after compaction``: 4N emitted, a random three quarters acked (compactions ran while they were).

The columnar path (``next_columns()``), in the same run: bytes per in-flight record of the span tracker as the
columnar batches fill it (4 shards, pieces of 1,000 records, all in flight), before spans emitted by their ends (a
rank made of each sequence-number string, held by the span and by the piece's ``RowSource``, and a size a record)
and with them (``emit_span_of_ends``: the ends' ranks; the others and the sizes made only when a record is looked at
alone). The ranks are counted there (they are made for the tracker alone; the columns are the payload, not counted),
so the ratio is to the record path's span row with its keys (``with key``).

Span tracker (``SpanTracker``: a batch of one shard's records is one span, acked whole in O(1)), in the same run,
each row beside the per-record baseline with the ratio span / per-record. ``span, keys counted, batched
calls``: each cycle emits one span per shard (``emit_span`` of the ranks built from strings in a list
comprehension, as above), fails 1% one by one, and acks each span whole (``ack_span``: the failed records are left
to their retries); the per-record row it is compared with is ``keys counted, batched calls``. ``span, keys
counted``: one ``emit``/``fail``/``ack`` call per record, against ``keys counted``. Memory: the same three states,
records emitted one by one (one open span) and in spans of 1,000 records. ``whole batch``: one batch of 10,000
records dealt round-robin over the shards, acked whole: ``ack_many`` of each shard's keys (per-record tracker) or
``ack_span`` of each shard's span, in microseconds per batch; the span tracker's own work is O(1) a span, and what
grows with the batch is CPython freeing the span's key list when it is done (a decref per key): the row "key lists
still held by the caller" leaves that out.
"""

from __future__ import annotations

import gc
import random
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable
from typing import Any

from benchmarks.context import BenchContext
from benchmarks.stats import ratio, summary
from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns, RowSource, ranks_of, slice_columns
from kinesis_spout.records import RANK_BASE, SequenceKey, parse_message_id_rank
from kinesis_spout.tracking.spans import SpanTracker
from tests.unit.core.reference_tracker import PerRecordTracker

TITLE = "In-flight record tracker: emit+ack pairs/s and memory per in-flight record"
GOAL_PAIRS_PER_S = 2_000_000
GOAL_BYTES_PER_RECORD = 150
SHARDS = (1, 4, 64)
ORDERS = ("in-order", "random")
FAIL_RATE = 0.01
CYCLE = 1000
#: A 56-digit sequence number like the ones Kinesis and kinesalite hand out; keys step up sparsely from it.
BASE_SEQUENCE = 49_590_338_271_490_256_608_559_692_538_361_571_095_921_575_989_136_588_898
STEP = 1 << 20
#: How the keys reach the tracker in each throughput case (see the module docstring).
MADE, RANK, SEQUENCE_KEY, MESSAGE_ID = "made beforehand", "keys counted", "as SequenceKey", "message ids parsed"
BATCHED = "keys counted, batched calls"
STATES = ("all in flight", "after random acks", "after compaction")

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
    ("us_per_batch", "µs per 10,000-record batch acked whole", "fig1"),
    ("ratio_to_per_record", "span / per-record", "x"),
]

Tracker = PerRecordTracker  # the baseline (see the module docstring)
SPAN = "span"  # the kind of tracker of a row: per-record (the baseline) or span (the library's tracker)
SPAN_EMITS = 1000  # records per span in the span memory rows emitted in spans
WHOLE_BATCH = 10_000
BATCHES_TIMED = 20
Ops = list[tuple[int, Any]]  # (shard index, key, sequence-number string or message id)
Cycle = tuple[Ops, Ops, Ops]  # emits, fails, acks


def sequence_numbers(count: int, shards: int) -> list[tuple[int, int]]:
    """``(shard index, sequence number)`` of ``count`` records dealt round-robin over ``shards`` shards."""
    return [(i % shards, BASE_SEQUENCE + (i // shards) * STEP + i % shards) for i in range(count)]


def shard_id(index: int) -> str:
    return f"shardId-{index:012d}"


def plan(shards: int, pairs: int, order: str, keys: str, seed: int = 0) -> list[Cycle]:
    """The operations of every cycle, prepared once before any clock starts: ``(emits, fails, acks)``, each a list
    of ``(shard index, what the key is built from)``: the rank itself (``MADE``, the same object on both sides), the
    sequence-number string, or for the fails and acks of ``MESSAGE_ID`` the message id."""
    rng = random.Random(seed)
    numbers = sequence_numbers(pairs, shards)
    cycles: list[Cycle] = []
    for start in range(0, pairs, CYCLE):
        chunk = numbers[start:start + CYCLE]
        emits: Ops = [(shard, seq * RANK_BASE if keys == MADE else str(seq)) for shard, seq in chunk]
        done = list(emits)
        if keys == MESSAGE_ID:
            done = [(shard, f"{shard_id(shard)}:{text}") for shard, text in done]
        if order == "random":
            rng.shuffle(done)
        failing = set(rng.sample(range(len(done)), max(1, int(len(done) * FAIL_RATE))))
        fails = [op for i, op in enumerate(done) if i in failing]
        acks = [op for i, op in enumerate(done) if i not in failing]
        if keys == BATCHED:  # one call per shard: (shard index, the strings of its records, in order)
            emits, acks = _by_shard(emits, shards), _by_shard(acks, shards)
        cycles.append((emits, fails, acks))
    return cycles


def _by_shard(ops: Ops, shards: int) -> Ops:
    grouped: list[list[Any]] = [[] for _ in range(shards)]
    for shard, text in ops:
        grouped[shard].append(text)
    return [(shard, texts) for shard, texts in enumerate(grouped) if texts]


def bind(trackers: list[Tracker], cycles: list[Cycle], keys: str = MADE
         ) -> list[tuple[list[Any], list[Any], list[Any]]]:
    """The cycles with each shard index replaced by the bound method to call (done before the clock starts)."""
    batched = keys == BATCHED
    emit = [t.emit_many if batched else t.emit for t in trackers]
    fail = [t.fail for t in trackers]
    ack = [t.ack_many if batched else t.ack for t in trackers]
    return [([(emit[s], k) for s, k in emits], [(fail[s], k) for s, k in fails], [(ack[s], k) for s, k in acks])
            for emits, fails, acks in cycles]


def run_cycles(trackers: list[Tracker], cycles: list[tuple[list[Any], list[Any], list[Any]]], keys: str) -> float:
    """Play the bound cycles; returns the wall time. Failed records come back through ``next_retry`` (due after
    the tracker's 0.1 s backoff) and are acked; then each shard's checkpoint is read and ``expire`` runs."""
    base, key_of, parse = RANK_BASE, SequenceKey, parse_message_id_rank
    now = 1_000.0
    t0 = time.perf_counter()
    for emits, fails, acks in cycles:
        if keys == MADE:
            for emit, key in emits:
                emit(key, now)
            for fail, key in fails:
                fail(key, now)
            for ack, key in acks:
                ack(key)
        elif keys == RANK:
            for emit, s in emits:
                emit(int(s) * base, now)
            for fail, s in fails:
                fail(int(s) * base, now)
            for ack, s in acks:
                ack(int(s) * base)
        elif keys == BATCHED:
            for emit_many, texts in emits:
                emit_many([int(s) * base for s in texts], now)
            for fail, s in fails:
                fail(int(s) * base, now)
            for ack_many, texts in acks:
                ack_many([int(s) * base for s in texts])
        elif keys == SEQUENCE_KEY:
            for emit, s in emits:
                emit(key_of(int(s), 0), now)
            for fail, s in fails:
                fail(key_of(int(s), 0), now)
            for ack, s in acks:
                ack(key_of(int(s), 0))
        else:
            for emit, s in emits:
                emit(int(s) * base, now)
            for fail, mid in fails:
                fail(parse(mid)[1], now)
            for ack, mid in acks:
                ack(parse(mid)[1])
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


def run_span_cycles(trackers: list[Any], cycles: list[Cycle]) -> float:
    """The batched cycles on span trackers: one ``emit_span`` per shard and cycle, the failures one by one, then
    ``ack_span`` of each span (its failed records are left to their retries, acked as they come back)."""
    base = RANK_BASE
    emit = [t.emit_span for t in trackers]
    fail = [t.fail for t in trackers]
    ack_span = [t.ack_span for t in trackers]
    now = 1_000.0
    t0 = time.perf_counter()
    for emits, fails, _ in cycles:
        spans = [(ack_span[shard], emit[shard]([int(s) * base for s in texts], now)) for shard, texts in emits]
        for shard, s in fails:
            fail[shard](int(s) * base, now)
        for ack, span in spans:
            ack(span)
        now += 0.2
        for tracker in trackers:
            if tracker.retry_queue_len:
                while (got := tracker.next_retry(now)) is not None:
                    tracker.ack(got[0])
            tracker.checkpoint  # noqa: B018 - read as the spout does after acks
            tracker.expire(now)
    return time.perf_counter() - t0


def throughput_runs(shards: int, order: str, pairs: int, repeats: int, keys: str = MADE,
                    kind: type = Tracker) -> list[float]:
    """Pairs per second of ``repeats`` runs of the same plan, each on fresh trackers of ``kind``."""
    cycles = plan(shards, pairs, order, keys)
    rates = []
    for _ in range(repeats):
        trackers = [kind(shard_id(i)) for i in range(shards)]
        gc.collect()
        if kind is SpanTracker and keys == BATCHED:
            wall = run_span_cycles(trackers, cycles)
        else:
            wall = run_cycles(trackers, bind(trackers, cycles, keys), keys)
        check_done(trackers, pairs)
        rates.append(pairs / wall)
    return rates


def key_bytes() -> int:
    """Bytes of one key as the tracker holds it: a rank, one int of about 250 bits."""
    return sys.getsizeof((BASE_SEQUENCE + STEP) * RANK_BASE)


def bytes_per_inflight(inflight: int, shards: int, with_acks: bool = True, seed: int = 0, kind: type = Tracker,
                       spans_of: int = 0) -> list[float]:
    """Bytes the trackers hold per in-flight record: with ``inflight`` records emitted and none acked; then (if
    ``with_acks``) after ``inflight`` more were emitted and a random half of all of them acked; then, on fresh
    trackers, after ``4 * inflight`` were emitted and a random three quarters acked. ``kind``: the tracker class;
    ``spans_of`` > 0 emits each shard's records in runs of that many with ``emit_span`` (span trackers)."""
    def measure(emitted: int, acked: int) -> float:
        keys = [(shard, seq * RANK_BASE) for shard, seq in sequence_numbers(emitted, shards)]
        to_ack = random.Random(seed).sample(keys, acked)
        payload = object()

        def fill() -> list[Any]:
            trackers = [kind(shard_id(i)) for i in range(shards)]
            emit = [t.emit for t in trackers]
            start = 1_000.0
            if spans_of:
                for begin in range(0, emitted, spans_of * shards):
                    chunk = keys[begin:begin + spans_of * shards]
                    for shard, tracker in enumerate(trackers):
                        mine = [key for s, key in chunk if s == shard]
                        if mine:
                            tracker.emit_span(mine, start + begin * 1e-6, [payload] * len(mine), [100] * len(mine))
            else:
                for i in range(emitted):
                    shard, key = keys[i]
                    emit[shard](key, start + i * 1e-6, payload, 100)
            for shard, key in to_ack:
                trackers[shard].ack(key)
            return trackers

        return held_per_inflight(fill, inflight)

    out = [measure(inflight, 0)]
    if with_acks:
        out += [measure(2 * inflight, inflight), measure(4 * inflight, 3 * inflight)]
    return out


def memory_rows(inflight: int, shards: int, repeats: int, with_random_acks: bool = True, kind: type = Tracker,
                spans_of: int = 0) -> list[dict[str, Any]]:
    """Rows for the memory figures of ``inflight`` records on ``shards`` shards (median of ``repeats`` runs): kind
    ``memory`` for the states all in flight and (with ``with_random_acks``) after random acks, kind
    ``memory after compaction`` for the third state."""
    runs = [bytes_per_inflight(inflight, shards, with_random_acks, seed, kind, spans_of) for seed in range(repeats)]
    rows = []
    for i, state in enumerate(STATES[:len(runs[0])]):
        per = summary([r[i] for r in runs])
        median = float(per["median"])  # type: ignore[arg-type]
        case = f"{shards} shard{'s' if shards > 1 else ''}, {inflight:,} in flight, {state}"
        kind_of_row = "memory after compaction" if state == "after compaction" else "memory"
        if kind is SpanTracker:
            how = f"emitted in spans of {spans_of:,}" if spans_of else "emitted one by one"
            case, kind_of_row = f"span, {case}, {how}", "span memory"
        rows.append({"case": case, "kind": kind_of_row, "tracker": SPAN if kind is SpanTracker else "per-record",
                     "shards": shards, "inflight_records": inflight, "state": state,
                     "repeats": repeats, "bytes_per_inflight_record": per, "key_bytes": key_bytes(),
                     "bytes_per_inflight_record_with_key": round(median + key_bytes(), 1)})
    return rows


def columnar_bytes_per_inflight(inflight: int, shards: int, by_ends: bool) -> float:
    """Bytes the trackers hold per in-flight record when the spout's columnar batches put the records in flight
    (``next_columns()``): each shard's records in pieces of ``SPAN_EMITS``, each piece's item a ``RowSource`` (one
    pointer a record), all in flight. ``by_ends``: as they do now (``emit_span_of_ends``: the ends' ranks and a
    maker of the others); else as they did before it (a rank made of each sequence-number string, kept by the span
    and by the piece's ``RowSource``, and a size a record). The columns themselves (the payload: sequence-number
    strings, keys, data) are made before the measure and not counted; the ranks are counted, since they are made
    for the tracker alone."""
    payload = b"x" * 100
    pieces: list[tuple[int, RecordColumns]] = []
    for shard in range(shards):
        mine = [str(seq) for s, seq in sequence_numbers(inflight, shards) if s == shard]
        for begin in range(0, len(mine), SPAN_EMITS):
            seqs = mine[begin:begin + SPAN_EMITS]
            n = len(seqs)
            pieces.append((shard, RecordColumns(shard_id(shard), seqs, None, ["key"] * n, [payload] * n,
                                                [1.7e9] * n, True, None)))
    def fill() -> list[Any]:
        trackers = [SpanTracker(shard_id(i)) for i in range(shards)]
        for shard, cols in pieces:
            n = len(cols)
            if by_ends:
                ends = ranks_of(slice_columns(cols, 0, 1))[0], ranks_of(slice_columns(cols, n - 1, n))[0]
                trackers[shard].emit_span_of_ends(n, ends[0], ends[1], 1_000.0,
                                                  lambda c=cols: (ranks_of(c), _sizes(c)),  # type: ignore[misc]
                                                  [RowSource(cols)] * n,
                                                  sum(map(len, cols.data)) + sum(map(len, cols.partition_keys)))
            else:
                ranks = ranks_of(cols)
                trackers[shard].emit_span(ranks, 1_000.0, [RowSource(cols, ranks)] * n, _sizes(cols))
        return trackers

    return held_per_inflight(fill, inflight)


def held_per_inflight(fill: Callable[[], list[Any]], inflight: int) -> float:
    """Bytes per in-flight record that the trackers ``fill()`` makes and fills hold, measured by tracemalloc from
    before they are made (after a full collection) to after (another); raises if they do not hold ``inflight``."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trackers = fill()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    if sum(t.inflight_count for t in trackers) != inflight:
        raise AssertionError("tracker memory benchmark: wrong number of records in flight")
    return held / inflight


def _sizes(cols: RecordColumns) -> array[int]:
    """Each record's size, as the columnar batches compute them."""
    return array("q", [len(d) + len(k) for d, k in zip(cols.data, cols.partition_keys)])


def columnar_memory_rows(inflight: int, repeats: int, record_path: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The columnar path's rows (4 shards, all in flight), before and after spans emitted by their ends, each with
    its ratio to ``record_path``: the span tracker's row of the record path in the same state (spans of
    ``SPAN_EMITS``), its keys counted (``with key``), since the columnar rows count theirs."""
    out = []
    for by_ends, how in ((False, "a rank made of each sequence number (before)"),
                         (True, "spans emitted by their ends (ranks made when needed)")):
        per = summary([columnar_bytes_per_inflight(inflight, 4, by_ends) for _ in range(repeats)])
        row = {"case": f"span, columnar path (next_columns), 4 shards, {inflight:,} in flight, all in flight, {how}",
               "kind": "columnar memory", "tracker": SPAN, "shards": 4, "inflight_records": inflight,
               "state": STATES[0], "repeats": repeats, "bytes_per_inflight_record": per,
               "bytes_per_inflight_record_with_key": per["median"]}
        if record_path is not None:
            row["ratio_to_per_record"] = round(float(per["median"])  # type: ignore[arg-type]
                                               / record_path["bytes_per_inflight_record_with_key"], 2)
        out.append(row)
    return out


def whole_batch_us(shards: int, kind: type, repeats: int, keep_keys: bool = False) -> list[float]:
    """Microseconds to ack one batch of ``WHOLE_BATCH`` records dealt round-robin over ``shards`` shards, whole:
    ``ack_many`` of each shard's keys (per-record tracker) or ``ack_span`` of each shard's span (span tracker). The
    keys are made before. Each figure is the mean over ``BATCHES_TIMED`` batches, each on fresh trackers, timed
    together (one batch alone is below the clock's resolution for the span tracker). ``keep_keys``: the caller
    still holds each span's key list, so that what is timed is the tracker's own work, without CPython freeing the
    list (a decref per key) when the span is done."""
    keys: list[list[int]] = [[] for _ in range(shards)]
    for shard, seq in sequence_numbers(WHOLE_BATCH, shards):
        keys[shard].append(seq * RANK_BASE)
    out = []
    for _ in range(repeats):
        batches = []
        for _ in range(BATCHES_TIMED):
            trackers = [kind(shard_id(i)) for i in range(shards)]
            if kind is SpanTracker:
                handles = [t.emit_span(k, 1_000.0) for t, k in zip(trackers, keys)]
                kept = [span.ranks for span in handles] if keep_keys else []
                batches.append((trackers, [t.ack_span for t in trackers], handles, kept))
            else:
                for tracker, k in zip(trackers, keys):
                    tracker.emit_many(k, 1_000.0)
                batches.append((trackers, [t.ack_many for t in trackers], keys, []))
        gc.collect()
        t0 = time.perf_counter()
        for _, acks, args, _ in batches:
            for ack, arg in zip(acks, args):
                ack(arg)
        wall = time.perf_counter() - t0
        for trackers, _, _, _ in batches:
            check_done(trackers, WHOLE_BATCH)
        out.append(wall / BATCHES_TIMED * 1e6)
    return out


def span_rows(ctx: BenchContext, size: dict[str, int], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The span tracker's rows, each with its ratio to the per-record row of the same case in ``rows``."""
    out: list[dict[str, Any]] = []
    for keys, order in [(BATCHED, o) for o in ORDERS] + [(RANK, o) for o in ORDERS]:
        rates = throughput_runs(4, order, size["pairs"], size["repeats"], keys, SpanTracker)
        case = f"4 shards, {order} acks, {keys}"
        fig = summary(rates)
        same = [r for r in rows if r["kind"] == "throughput" and r["case"] == case]
        ratio_ = ratio(fig, same[0]["pairs_per_s"]) if same else None
        ctx.progress(f"tracker: span, {case}: {fig['median']:,.0f} pairs/s ({ratio_}x the per-record tracker)")
        out.append({"case": f"span, {case}", "kind": "span throughput", "tracker": SPAN, "shards": 4,
                    "ack_order": order, "fail_rate": FAIL_RATE, "key_creation_counted": True, "keys": keys,
                    "pairs": size["pairs"], "repeats": size["repeats"], "pairs_per_s": fig,
                    "ratio_to_per_record": ratio_})
    for spans_of in (0, SPAN_EMITS):
        for mem in memory_rows(size["inflight"], 4, size["memory_repeats"], True, SpanTracker, spans_of):
            same = [r for r in rows if r["kind"].startswith("memory") and r["shards"] == 4
                    and r["state"] == mem["state"]]
            mem["ratio_to_per_record"] = ratio(mem["bytes_per_inflight_record"],
                                               same[0]["bytes_per_inflight_record"]) if same else None
            ctx.progress(f"tracker: {mem['case']}: {mem['bytes_per_inflight_record']['median']:.0f} B per record "
                         f"({mem['ratio_to_per_record']}x the per-record tracker)")
            out.append(mem)
    record_path = [r for r in out if r["kind"] == "span memory" and r["state"] == STATES[0]
                   and r["case"].endswith(f"spans of {SPAN_EMITS:,}")]
    for mem in columnar_memory_rows(size["inflight"], size["memory_repeats"], record_path[0] if record_path else None):
        ctx.progress(f"tracker: {mem['case']}: {mem['bytes_per_inflight_record']['median']:.0f} B per record, keys "
                     f"counted ({mem.get('ratio_to_per_record')}x the record path's span with its keys)")
        out.append(mem)
    for shards in SHARDS:
        per_record = summary(whole_batch_us(shards, Tracker, size["repeats"]))
        span = summary(whole_batch_us(shards, SpanTracker, size["repeats"]))
        work = summary(whole_batch_us(shards, SpanTracker, size["repeats"], keep_keys=True))
        where = f"whole batch of {WHOLE_BATCH:,} over {shards} shard{'s' if shards > 1 else ''}"
        for name, fig in (("per-record", per_record), ("span", span),
                          ("span, key lists still held by the caller (the tracker's own work)", work)):
            row = {"case": f"{name}, {where}", "kind": "whole batch", "shards": shards,
                   "tracker": "per-record" if fig is per_record else SPAN, "records": WHOLE_BATCH,
                   "repeats": size["repeats"], "us_per_batch": fig}
            if fig is not per_record:
                row["ratio_to_per_record"] = ratio(fig, per_record)
            ctx.progress(f"tracker: {row['case']}: {fig['median']:,.1f} µs")
            out.append(row)
    return out


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    rows: list[dict[str, Any]] = []
    variants = [(shards, order, MADE) for shards in SHARDS for order in ORDERS]
    variants += [(4, order, keys) for keys in (RANK, BATCHED, SEQUENCE_KEY, MESSAGE_ID) for order in ORDERS]
    for shards, order, keys in variants:
        rates = throughput_runs(shards, order, size["pairs"], size["repeats"], keys)
        case = f"{shards} shard{'s' if shards > 1 else ''}, {order} acks" + ("" if keys == MADE else f", {keys}")
        fig = summary(rates)
        ctx.progress(f"tracker: {case}: {fig['median']:,.0f} pairs/s (spread {fig['spread_pct']}%)")
        rows.append({"case": case, "kind": "throughput", "shards": shards, "ack_order": order,
                     "fail_rate": FAIL_RATE, "key_creation_counted": keys != MADE, "keys": keys,
                     "pairs": size["pairs"], "repeats": size["repeats"], "pairs_per_s": fig})
    for shards in SHARDS:
        for row in memory_rows(size["inflight"], shards, size["memory_repeats"]):
            ctx.progress(f"tracker: {row['case']}: {row['bytes_per_inflight_record']['median']:.0f} B per record "
                         f"(+{row['key_bytes']} B for its key)")
            rows.append(row)
    rows += span_rows(ctx, size, rows)
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slowest and fastest throughput case of each way of passing keys (the goal is on keys built from strings
    as the spout builds them: one call per record, and in batched calls), and the largest memory figure of each
    state, against the goals."""
    out = []
    for keys in (MADE, RANK, BATCHED, SEQUENCE_KEY, MESSAGE_ID):
        speed = [r for r in rows if r["kind"] == "throughput" and _keys(r) == keys]
        if not speed:
            continue
        worst = min(speed, key=lambda r: r["pairs_per_s"]["median"])
        best = max(speed, key=lambda r: r["pairs_per_s"]["median"])
        goal = keys in (RANK, BATCHED)
        label = {RANK: "built from strings, a call per record", BATCHED: "built from strings, batched calls"}
        out.append({"figure": f"per-record tracker (baseline) emit+ack pairs/s, keys {label.get(keys, keys)}, "
                              "slowest to fastest case",
                    "value": f"{worst['pairs_per_s']['median']:,.0f} ({worst['case']}) to "
                             f"{best['pairs_per_s']['median']:,.0f} ({best['case']})",
                    "goal": f">= {GOAL_PAIRS_PER_S:,}" if goal else "-",
                    "met": worst["pairs_per_s"]["median"] >= GOAL_PAIRS_PER_S if goal else None})
    span_speed = [r for r in rows if r["kind"] == "span throughput" and r["keys"] == BATCHED]
    if span_speed:
        worst = min(span_speed, key=lambda r: r["pairs_per_s"]["median"])
        out.append({"figure": "span tracker emit+ack pairs/s, keys built from strings, one span per shard and batch "
                              "acked whole, slowest case",
                    "value": f"{worst['pairs_per_s']['median']:,.0f} ({worst['case']}; "
                             f"{worst['ratio_to_per_record']}x the per-record tracker)",
                    "goal": f">= {GOAL_PAIRS_PER_S:,}", "met": worst["pairs_per_s"]["median"] >= GOAL_PAIRS_PER_S})
    span_memory = [r for r in rows if r["kind"] == "span memory"]
    if span_memory:
        worst = max(span_memory, key=lambda r: r["bytes_per_inflight_record"]["median"])
        out.append({"figure": "span tracker bytes per in-flight record, every state (keys and payload not counted), "
                              "largest case",
                    "value": f"{worst['bytes_per_inflight_record']['median']:.0f} B ({worst['case']})",
                    "goal": f"<= {GOAL_BYTES_PER_RECORD}",
                    "met": worst["bytes_per_inflight_record"]["median"] <= GOAL_BYTES_PER_RECORD})
    columnar = [r for r in rows if r["kind"] == "columnar memory"]
    if len(columnar) == 2 and columnar[1].get("ratio_to_per_record") is not None:
        before, after = columnar
        out.append({"figure": "columnar path (next_columns) bytes per in-flight record, all in flight, keys counted "
                              "(payload not): spans emitted by their ends / the record path's spans with their keys",
                    "value": f"{after['bytes_per_inflight_record']['median']:.0f} B / "
                             f"{after['bytes_per_inflight_record']['median'] / after['ratio_to_per_record']:.0f} B "
                             f"({after['ratio_to_per_record']}x; before: "
                             f"{before['bytes_per_inflight_record']['median']:.0f} B, "
                             f"{before['ratio_to_per_record']}x)",
                    "goal": "<= 1x", "met": after["ratio_to_per_record"] <= 1})
    batch = [r for r in rows if r["kind"] == "whole batch" and r["tracker"] == SPAN and "held" not in r["case"]]
    if batch:
        out.append({"figure": f"span tracker: a {WHOLE_BATCH:,}-record batch acked whole, µs by shards "
                              f"({' / '.join(str(r['shards']) for r in batch)})",
                    "value": " / ".join(f"{r['us_per_batch']['median']:,.1f}" for r in batch)
                             + " (per-record tracker: " + " / ".join(
                                 f"{r['us_per_batch']['median']:,.0f}" for r in rows
                                 if r["kind"] == "whole batch" and r["tracker"] != SPAN) + ")",
                    "goal": "O(shards)", "met": None})
    for state in STATES:
        rows_in_state = [r for r in rows if r["kind"] in ("memory", "memory after compaction") and r["state"] == state]
        if not rows_in_state:
            continue
        worst = max(rows_in_state, key=lambda r: r["bytes_per_inflight_record"]["median"])
        out.append({"figure": f"per-record tracker (baseline) bytes per in-flight record, {state} (keys and "
                              "payload not counted), "
                              f"largest case",
                    "value": f"{worst['bytes_per_inflight_record']['median']:.0f} B ({worst['case']}); "
                             f"+{worst['key_bytes']} B per key",
                    "goal": f"<= {GOAL_BYTES_PER_RECORD}",
                    "met": worst["bytes_per_inflight_record"]["median"] <= GOAL_BYTES_PER_RECORD})
    return out


def _keys(row: dict[str, Any]) -> str:
    """How a throughput row passed its keys (rows written before ranks existed built SequenceKeys when counted)."""
    return str(row.get("keys", SEQUENCE_KEY if row["key_creation_counted"] else MADE))
