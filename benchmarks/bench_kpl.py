"""KPL aggregated records: user records of 100 B read as aggregates (100 user records in each Kinesis record, made by
aws-kinesis-agg; ten times as many user records as the stream put one by one, so that the spout's ``open()`` does not
weigh as much as the reading: rates are compared) and put one by one, by KinesisSpout (de-aggregating, tracking and
acking each user record, checkpoints in ZooKeeper) and by a plain boto3 GetRecords loop (de-aggregating with
aws-kinesis-agg's own ``iter_deaggregate_records`` on the aggregated stream).

Figures are per user record. The consumers run alternately on kinesalite, the order flipping each round; each
figure is the median of the runs. The decoder rows time de-aggregation alone, in this process, over the stream's
own aggregates: ``kinesis_spout.kinesis.aggregation.deaggregate`` (and ``deaggregate_columns``, the form the spout's
getter reads with: no object per user record) against aws-kinesis-agg's de-aggregator on the same bytes. The spout
runs twice: acking each tuple (``spout.ack``) and acking each batch whole (``batch.ack()``). The goals:
de-aggregation costs at most 1 µs CPU per user record; the spout reads the aggregated stream at least 3x faster
(user records/s) than the same records put one by one; acking batches, it reads aggregates at least as fast as the
boto3 loop, at no more than 1.5x its CPU per user record.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

from benchmarks.bench_read import LIMIT, alternate, timeout_for
from benchmarks.context import ZK_PREFIX, BenchContext, LoadedStream
from benchmarks.loops import ReadResult, ShortRead, read_boto3_loop
from benchmarks.spout_read import read_with_spout, spout_config
from benchmarks.stats import ratio, summary
from kinesis_spout.kinesis.aggregation import deaggregate, deaggregate_columns, hash_key
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.testing.kinesis import put_records, wait_for_stream

TITLE = "KPL aggregated records: user records/s and CPU per user record, aggregated vs one by one"
GOAL_DECODE_US = 1.0
GOAL_SPEEDUP = 3.0
GOAL_VS_LOOP = 1.0  # the spout acking batches, against the boto3 loop de-aggregating with aws-kinesis-agg
GOAL_CPU_VS_LOOP = 1.5
PER_AGGREGATE = 100

#: ``aggregated``: the user records of the aggregated stream. More than one by one: 10,000 user records are 100
#: Kinesis records, read in well under a tenth of a second, so the spout's open() (a ZooKeeper session, the shard
#: listing, the checkpoints: 20-30 ms) would weigh as much as the reading; rates (records/s) are compared.
SIZES = {
    "full": {"shards": 4, "records": 20_000, "aggregated": 200_000, "record_bytes": 100, "repeats": 5},
    "quick": {"shards": 4, "records": 10_000, "aggregated": 100_000, "record_bytes": 100, "repeats": 3},
    "smoke": {"shards": 2, "records": 400, "aggregated": 400, "record_bytes": 100, "repeats": 1},
}

LOOP = "boto3 loop"
SPOUT = "KinesisSpout"
SPOUT_BATCH = "KinesisSpout (batch acks)"
SPOUT_COLUMNS = "KinesisSpout (columns, next_columns)"
DECODER = "decoder: kinesis_spout"
DECODER_COLUMNS = "decoder: kinesis_spout, columns (what the spout reads with)"
DECODER_PEER = "decoder: aws-kinesis-agg"

COLUMNS = [
    ("stream", "stream", "{}"),
    ("case", "consumer", "{}"),
    ("user_records_per_s", "user records/s", "fig0"),
    ("cpu_us_per_user_record", "CPU µs/user record", "fig2"),
    ("speedup_vs_plain", "vs one by one", "x"),
    ("vs_loop", "vs boto3 loop", "x"),
    ("cpu_vs_loop", "CPU vs boto3 loop", "x"),
]


def load_aggregated(ctx: BenchContext, shards: int, records: int, record_bytes: int
                    ) -> tuple[LoadedStream, list[bytes]]:
    """A kinesalite stream of ``records`` user records of ``record_bytes`` B, packed ``PER_AGGREGATE`` a Kinesis
    record by aws-kinesis-agg (each aggregate under its own partition key, so they spread over the shards), and the
    aggregates' bytes."""
    from aws_kinesis_agg.aggregator import RecordAggregator

    endpoint = ctx.endpoint("kinesalite")
    client = endpoint.client()
    name = f"bench-kpl-{shards}x{records}-{uuid.uuid4().hex[:6]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    wait_for_stream(client, name, timeout_s=60)
    payload = bytes(range(ord("a"), ord("a") + 25)) * (record_bytes // 25 + 1)
    blobs: list[bytes] = []
    keys: list[str] = []
    for first in range(0, records, PER_AGGREGATE):
        aggregator = RecordAggregator()
        # aws-kinesis-agg's own key is the first user record's: spread the aggregates instead, each user record
        # routed (its explicit hash key) to its aggregate's shard, as a producer that aggregates by shard puts them
        route = str(hash_key(f"agg-{first}", None))
        for i in range(first, min(first + PER_AGGREGATE, records)):
            assert aggregator.add_user_record(f"pk-{i}", payload[i % 25:i % 25 + record_bytes],
                                              explicit_hash_key=route) is None
        key, _, blob = aggregator.clear_and_get().get_contents()
        keys.append(f"agg-{first}")
        blobs.append(bytes(blob))
    ctx.progress(f"loading {records:,} user records of {record_bytes} B as {len(blobs)} aggregates into {name}")
    t0 = time.perf_counter()
    placed = put_records(client, name, blobs, partition_keys=keys, batch=100)  # ~1 MB a call (Kinesis: 5 MB at most)
    put_s = time.perf_counter() - t0
    last: dict[str, str] = {}
    for shard_id, seq in placed:
        if shard_id not in last or int(seq) > int(last[shard_id]):
            last[shard_id] = seq
    stream = LoadedStream(endpoint, name, shards, records, record_bytes, tuple(endpoint.shard_ids(name)), last,
                          round(put_s, 3))
    return stream, blobs


def deaggregated(records: list[dict[str, Any]]) -> Iterator[bytes]:
    """The user records' data of a GetRecords reply, de-aggregated by aws-kinesis-agg (the loop's own choice)."""
    from aws_kinesis_agg.deaggregator import iter_deaggregate_records

    for user in iter_deaggregate_records(records, data_format="Boto3"):
        yield user["kinesis"]["data"]


def read_loop(client: Any, stream: str, expected: int, timeout_s: float, aggregated: bool) -> ReadResult:
    return read_boto3_loop(client, stream, expected, LIMIT, timeout_s, unpack=deaggregated if aggregated else None)


def consumers(ctx: BenchContext, stream: LoadedStream, aggregated: bool
              ) -> list[tuple[str, Callable[[], ReadResult]]]:
    url = stream.endpoint.endpoint_url
    timeout = timeout_for(stream.records)
    def loop() -> ReadResult:
        return read_loop(make_client("us-east-1", url), stream.name, stream.records, timeout, aggregated)

    def spout(batch_acks: bool, columns: bool = False) -> Callable[[], ReadResult]:
        def read() -> ReadResult:
            config = spout_config(stream.name, ctx.unique_app("kpl"), ctx.zookeeper_hosts, ZK_PREFIX, url,
                                  limit=LIMIT, checkpoint_interval_s=1.0)
            return read_with_spout(config, stream.records, timeout, client=make_client("us-east-1", url),
                                   last_sequence=stream.last_sequence, batch_acks=batch_acks, columns=columns)
        return read

    return [(LOOP, loop), (SPOUT, spout(False)), (SPOUT_BATCH, spout(True)), (SPOUT_COLUMNS, spout(False, True))]


def decode_rows(ctx: BenchContext, blobs: list[bytes], repeats: int) -> list[dict[str, Any]]:
    """CPU per user record of de-aggregation alone: this project's decoder and aws-kinesis-agg's, same bytes."""
    from aws_kinesis_agg.deaggregator import iter_deaggregate_records

    users = sum(len(deaggregate(b) or ()) for b in blobs)
    boto3_shaped = [{"Data": b, "PartitionKey": "k", "SequenceNumber": str(i), "ApproximateArrivalTimestamp": 0.0}
                    for i, b in enumerate(blobs)]

    def ours() -> int:
        return sum(len(deaggregate(b) or ()) for b in blobs)

    def columns() -> int:
        return sum(len(c.data) if (c := deaggregate_columns(b)) is not None else 0 for b in blobs)

    def theirs() -> int:
        return sum(1 for _ in iter_deaggregate_records(boto3_shaped, data_format="Boto3"))

    rows = []
    for case, decode in ((DECODER, ours), (DECODER_COLUMNS, columns), (DECODER_PEER, theirs)):
        runs = []
        for _ in range(repeats):
            t0 = time.process_time()
            got = decode()
            runs.append((time.process_time() - t0) / got * 1e6)
            if got != users:
                raise ShortRead(f"{case} decoded {got} user records of {users}")
        ctx.progress(f"kpl/decode: {case}: {min(runs):.2f} µs CPU/user record (best of {repeats})")
        rows.append({"case": case, "stream": "aggregated (in memory)", "records": users, "repeats": repeats,
                     "cpu_us_per_user_record": summary(runs)})
    return rows


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    plain = ctx.stream(size["shards"], size["records"], size["record_bytes"], "kinesalite")
    aggregated, blobs = load_aggregated(ctx, size["shards"], size["aggregated"], size["record_bytes"])
    rows: list[dict[str, Any]] = []
    by_case: dict[tuple[str, str], dict[str, Any]] = {}
    for label, stream in (("one by one", plain), ("aggregated", aggregated)):
        results = alternate(ctx, f"kpl/{label}", consumers(ctx, stream, label == "aggregated"), size["repeats"])
        for name, res in results.items():
            row = {"case": name, "stream": label, "emulator": stream.emulator, "shards": stream.shards,
                   "records": stream.records, "record_bytes": stream.record_bytes, "repeats": size["repeats"],
                   "kinesis_records": len(blobs) if label == "aggregated" else stream.records,
                   "user_records_per_s": summary([r.records_per_s for r in res]),
                   "cpu_us_per_user_record": summary([r.cpu_us_per_record for r in res])}
            extras = [r.extra for r in res if r.extra]
            if extras:
                row["checkpoints_at_end"] = all(e.get("checkpoints_at_end", False) for e in extras)
                row["open_s"] = summary([e["open_s"] for e in extras])  # within the timed run
                # the same runs without open() (ZooKeeper session, shard listing, checkpoint reads): what reading
                # itself reaches, a figure for the report beside the timed run's
                row["user_records_per_s_after_open"] = summary(
                    [r.records / (r.wall_s - r.extra["open_s"]) for r in res
                     if r.extra and r.wall_s > r.extra["open_s"]])
            by_case[(name, label)] = row
            rows.append(row)
    for name in (LOOP, SPOUT, SPOUT_BATCH, SPOUT_COLUMNS):
        agg, one = by_case[(name, "aggregated")], by_case[(name, "one by one")]
        agg["speedup_vs_plain"] = ratio(agg["user_records_per_s"], one["user_records_per_s"])
        agg["cpu_ratio_vs_plain"] = ratio(agg["cpu_us_per_user_record"], one["cpu_us_per_user_record"])
    loop = by_case[(LOOP, "aggregated")]
    for name in (SPOUT, SPOUT_BATCH, SPOUT_COLUMNS):  # against the boto3 loop that de-aggregates with aws-kinesis-agg
        agg = by_case[(name, "aggregated")]
        agg["vs_loop"] = ratio(agg["user_records_per_s"], loop["user_records_per_s"])
        agg["cpu_vs_loop"] = ratio(agg["cpu_us_per_user_record"], loop["cpu_us_per_user_record"])
    rows.extend(decode_rows(ctx, blobs, max(3, size["repeats"])))
    return rows


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spout's speed-up on aggregates and the decoder's cost per user record, against the goals."""
    out = []
    for row in rows:
        if row["case"] in (SPOUT, SPOUT_BATCH, SPOUT_COLUMNS) and row.get("speedup_vs_plain") is not None:
            out.append({"figure": f"{row['case']} user records/s, aggregated (100 a record) / one by one",
                        "value": f"{row['speedup_vs_plain']:.1f}x (CPU per user record "
                                 f"{row['cpu_ratio_vs_plain']:.2f}x)",
                        "goal": f">= {GOAL_SPEEDUP:g}x", "met": row["speedup_vs_plain"] >= GOAL_SPEEDUP})
        if row["case"] in (SPOUT_BATCH, SPOUT_COLUMNS) and row.get("vs_loop") is not None:
            out.append({"figure": f"{row['case']} on aggregates / the boto3 loop de-aggregating with "
                                  "aws-kinesis-agg: user records/s (CPU per user record)",
                        "value": f"{row['vs_loop']:.2f}x ({row['cpu_vs_loop']:.2f}x)",
                        "goal": f">= {GOAL_VS_LOOP:g}x (<= {GOAL_CPU_VS_LOOP:g}x)",
                        "met": row["vs_loop"] >= GOAL_VS_LOOP and row["cpu_vs_loop"] <= GOAL_CPU_VS_LOOP})
        if row["case"] == DECODER:
            value = row["cpu_us_per_user_record"]["median"]
            out.append({"figure": "de-aggregation CPU per user record (kinesis_spout decoder)",
                        "value": f"{value:.2f} µs", "goal": f"<= {GOAL_DECODE_US:g} µs",
                        "met": value <= GOAL_DECODE_US})
    return out
