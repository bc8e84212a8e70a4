"""Read throughput: KinesisSpout (acking every record, checkpointing to ZooKeeper every second) against a plain
boto3 GetRecords loop over the same shards of the same emulator, in the same run. The spout is measured twice: acking
each record with ``spout.ack(message_id)``, acking each batch whole with ``batch.ack()`` ("batch acks"; its
``vs per-record acks`` is its records/s over the per-record row's), and taking columnar batches with
``next_columns()`` (the data looked at as an Arrow column, each batch acked whole: "columns").

Fairness: both read the same stream (same shards, same records) from TRIM_HORIZON to its last record, with the
same GetRecords limit, and run alternately (the order flips every round); each figure is the median of the runs
and the ratio is the ratio of medians. The loop gets the same botocore client configuration as the spout
(``make_client``, whose arrival-timestamp parser is cheaper than botocore's default); a loop on a
``boto3.client("kinesis")`` with botocore's defaults is measured too. Clients are made before the clock starts, and
so are pyarrow's imports (:func:`warm_arrow`).
Each run starts after a full collection (``gc.collect()``, outside the clock): otherwise the cyclic collector's full
collections, about 50 ms each (they walk every object the process holds: botocore's models, the servers'
clients), fall on whichever consumer happens to run when the count is reached, adding up to 5 µs per record to
it alone in a 10,000-record run. Each consumer still pays the collections its own objects cause.
"""

from __future__ import annotations

import gc
from typing import Any, Callable

from benchmarks.context import ZK_PREFIX, BenchContext, LoadedStream
from benchmarks.loops import ReadResult, read_boto3_loop
from benchmarks.spout_read import read_with_spout, spout_config
from benchmarks.stats import ratio, summary
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.testing.kinesis import kinesis_client

TITLE = "Read throughput: KinesisSpout vs a plain boto3 GetRecords loop"
GOAL_RATIO = 1.0  # the spout's records/s over the loop's, at least
GOAL_CPU_RATIO = 1.0  # the spout's CPU per record over the loop's, at most
LIMIT = 10_000  # GetRecords limit of every consumer (Kinesis' maximum)

SIZES = {
    "full": {"shards": 4, "records": 20_000, "record_bytes": 100, "repeats": 5},
    "quick": {"shards": 4, "records": 10_000, "record_bytes": 100, "repeats": 3},
    "smoke": {"shards": 4, "records": 400, "record_bytes": 100, "repeats": 1},
}

LOOP = "boto3 loop"
SPOUT = "KinesisSpout"
SPOUT_BATCH = "KinesisSpout, batch acks"
SPOUT_COLUMNS = "KinesisSpout, columns (next_columns)"
LOOP_DEFAULTS = "boto3 loop, botocore defaults"

COLUMNS = [
    ("emulator", "emulator", "{}"),
    ("case", "consumer", "{}"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
    ("ratio_vs_loop", "vs loop", "x"),
    ("ratio_vs_spout", "vs per-record acks", "x"),
    ("zk_writes", "ZK writes", "fig0"),
]


def warm_arrow() -> None:
    """Import what the columnar consumer's first batch imports (pyarrow's compute functions, and pandas, which
    pyarrow imports on its first conversion of a Python list: 0.25 s of CPU) before any clock starts, as the clients
    are made before it: otherwise the first columnar run of the process alone pays it."""
    import pyarrow
    import pyarrow.compute  # noqa: F401

    pyarrow.array([0])


def timeout_for(records: int) -> float:
    """A generous deadline for one read: the emulators read well over 1,000 records/s."""
    return 60.0 + records / 500


def consumers(ctx: BenchContext, stream: LoadedStream, interval_s: float = 1.0
              ) -> list[tuple[str, Callable[[], ReadResult]]]:
    """The consumers compared on ``stream``: name and a function doing one measured read."""
    url = stream.endpoint.endpoint_url
    timeout = timeout_for(stream.records)

    def loop() -> ReadResult:
        return read_boto3_loop(make_client("us-east-1", url), stream.name, stream.records, LIMIT, timeout)

    def loop_defaults() -> ReadResult:
        return read_boto3_loop(kinesis_client(url), stream.name, stream.records, LIMIT, timeout)

    def spout(batch_acks: bool = False, columns: bool = False) -> ReadResult:
        config = spout_config(stream.name, ctx.unique_app("read"), ctx.zookeeper_hosts, ZK_PREFIX, url,
                              limit=LIMIT, checkpoint_interval_s=interval_s)
        return read_with_spout(config, stream.records, timeout, client=make_client("us-east-1", url),
                               last_sequence=stream.last_sequence, batch_acks=batch_acks, columns=columns)

    return [(LOOP, loop), (SPOUT, spout), (SPOUT_BATCH, lambda: spout(batch_acks=True)),
            (SPOUT_COLUMNS, lambda: spout(columns=True)), (LOOP_DEFAULTS, loop_defaults)]


def alternate(ctx: BenchContext, label: str, runs: list[tuple[str, Callable[[], ReadResult]]], repeats: int
              ) -> dict[str, list[ReadResult]]:
    """Run every consumer ``repeats`` times, flipping their order each round, each run after a full collection (see
    the module's docstring); one progress line per run."""
    results: dict[str, list[ReadResult]] = {name: [] for name, _ in runs}
    for round_no in range(repeats):
        ordered = runs if round_no % 2 == 0 else runs[::-1]
        for name, read in ordered:
            gc.collect()
            res = read()
            results[name].append(res)
            ctx.progress(f"{label}: round {round_no + 1}/{repeats}: {name}: {res.records_per_s:,.0f} records/s, "
                         f"{res.cpu_us_per_record:.1f} µs CPU/record")
    return results


def result_row(name: str, res: list[ReadResult], stream: LoadedStream, repeats: int) -> dict[str, Any]:
    """One consumer's figures over its runs, with what they were measured on."""
    row: dict[str, Any] = {
        "case": name, "emulator": stream.emulator, "shards": stream.shards, "records": stream.records,
        "record_bytes": stream.record_bytes, "batch_limit": LIMIT, "repeats": repeats,
        "records_per_s": summary([r.records_per_s for r in res]),
        "cpu_us_per_record": summary([r.cpu_us_per_record for r in res]),
        "wall_s": summary([r.wall_s for r in res]),
    }
    extras = [r.extra for r in res if r.extra]
    if extras:
        row["zk_writes"] = summary([float(e["zk_writes"]) for e in extras])
        row["open_s"] = summary([e["open_s"] for e in extras])
        row["close_s"] = summary([e["close_s"] for e in extras])
        row["checkpoints_at_end"] = all(e.get("checkpoints_at_end", False) for e in extras)
    return row


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    warm_arrow()
    rows: list[dict[str, Any]] = []
    for emulator in ctx.emulators if not smoke else ("kinesalite",):
        stream = ctx.stream(size["shards"], size["records"], size["record_bytes"], emulator)
        results = alternate(ctx, f"read/{emulator}", consumers(ctx, stream), size["repeats"])
        group = {name: result_row(name, res, stream, size["repeats"]) for name, res in results.items()}
        for row in group.values():
            row["ratio_vs_loop"] = ratio(row["records_per_s"], group[LOOP]["records_per_s"])
            row["ratio_vs_loop_defaults"] = ratio(row["records_per_s"], group[LOOP_DEFAULTS]["records_per_s"])
            row["cpu_ratio_vs_loop"] = ratio(row["cpu_us_per_record"], group[LOOP]["cpu_us_per_record"])
            row["ratio_vs_spout"] = ratio(row["records_per_s"], group[SPOUT]["records_per_s"])
            row["cpu_ratio_vs_spout"] = ratio(row["cpu_us_per_record"], group[SPOUT]["cpu_us_per_record"])
        rows.extend(group.values())
    ctx.shared["read"] = rows
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spout's throughput relative to the loop, per emulator, against the goal."""
    out = []
    for row in rows:
        if row["case"] == SPOUT and row["ratio_vs_loop"] is not None:
            out.append({"figure": f"KinesisSpout / boto3 loop, records/s ({row['emulator']}, {row['shards']} shards)",
                        "value": f"{row['ratio_vs_loop']:.2f}x (vs botocore defaults: "
                                 f"{row['ratio_vs_loop_defaults']:.2f}x); CPU per record "
                                 f"{row['cpu_ratio_vs_loop']:.1f}x the loop's",
                        "goal": f">= {GOAL_RATIO}x, CPU <= {GOAL_CPU_RATIO}x",
                        "met": row["ratio_vs_loop"] >= GOAL_RATIO and row["cpu_ratio_vs_loop"] <= GOAL_CPU_RATIO})
    return out
