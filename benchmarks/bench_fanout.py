"""Enhanced fan-out (``retrieval="fanout"``) against polling (``retrieval="polling"``), both through KinesisSpout on
kinesis-local (the only emulator here with SubscribeToShard).

Latency rows: records put one at a time into an idle one-shard stream while a spout reads it; the figure is the time
from ``put_record`` returning to the spout handing the record out (p50 and p99). Polling reads at its shortest idle
pause (``empty_record_backoff_s=0.2``). kinesis-local pushes a subscription's events once a second, so on it fan-out
waits about half a second on average: the rows show this machine's emulator, not Kinesis (which pushes within about
70 ms of a put). Backlog rows: a two-shard stream read from TRIM_HORIZON to its end; records/s, and CPU of this
process per record (the emulator's own CPU is not counted).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from typing import Any

from benchmarks.context import BenchContext
from benchmarks.stats import summary
from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.emulators import KinesisLocalServer
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream

TITLE = "Enhanced fan-out vs polling: put-to-delivery latency, and records/s and CPU on a backlog (kinesis-local)"

SIZES = {
    "full": {"latency_records": 200, "backlog": 5_000, "repeats": 3},
    "quick": {"latency_records": 100, "backlog": 2_000, "repeats": 2},
    "smoke": {"latency_records": 15, "backlog": 300, "repeats": 1},
}
RETRIEVALS = ("fanout", "polling")

COLUMNS = [
    ("case", "case", "{}"),
    ("latency_p50_ms", "p50 ms", "fig0"),
    ("latency_p99_ms", "p99 ms", "fig0"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
]


def _config(endpoint: KinesisEndpoint, stream: str, retrieval: str, initial: InitialPosition) -> SpoutConfig:
    return SpoutConfig(stream_name=stream, app_name=f"bench-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, retrieval=retrieval, initial_position=initial,
                       empty_record_backoff_s=0.2, checkpoint_interval_s=1.0)


def _stream(endpoint: KinesisEndpoint, shards: int) -> str:
    client = endpoint.client()
    name = f"bench-fanout-{uuid.uuid4().hex[:8]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    wait_for_stream(client, name, timeout_s=60)
    return name


def latencies(endpoint: KinesisEndpoint, retrieval: str, count: int) -> list[float]:
    """Seconds from each put's return to its delivery, for ``count`` records put 0.1 s apart."""
    stream = _stream(endpoint, 1)
    client = endpoint.client()
    put_at: dict[str, float] = {}
    seen: dict[str, float] = {}
    lock = threading.Lock()
    with KinesisSpout(_config(endpoint, stream, retrieval, InitialPosition.LATEST), MemoryCheckpointStore()) as spout:
        def produce() -> None:
            for i in range(count):
                seq = client.put_record(StreamName=stream, Data=f"l{i}".encode(), PartitionKey="k")["SequenceNumber"]
                with lock:
                    put_at[seq] = time.monotonic()
                time.sleep(0.1)  # the producer's pace

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        deadline = time.monotonic() + count * 0.1 + 30
        while len(seen) < count and time.monotonic() < deadline:
            for tup in spout.next_batch(max_records=100, timeout_s=0.05):
                seen[tup.record.sequence_number] = time.monotonic()
                spout.ack(tup.message_id)
        producer.join(10)
    if len(seen) < count:
        raise RuntimeError(f"{retrieval}: {len(seen)} of {count} records delivered in time")
    with lock:  # a record can be delivered before its put's return was noted: count it as 0
        return [max(0.0, seen[seq] - put_at[seq]) for seq in seen]


def backlog(endpoint: KinesisEndpoint, retrieval: str, records: int) -> tuple[float, float]:
    """Records/s and CPU µs per record reading ``records`` from TRIM_HORIZON to the end of a two-shard stream."""
    stream = _stream(endpoint, 2)
    put_records(endpoint.client(), stream, [b"x" * 100 for _ in range(records)])
    config = _config(endpoint, stream, retrieval, InitialPosition.TRIM_HORIZON)
    got = 0
    wall0, cpu0 = time.monotonic(), time.process_time()
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        deadline = time.monotonic() + 120
        while got < records and time.monotonic() < deadline:
            batch = spout.next_batch(max_records=1000, timeout_s=0.2)
            for tup in batch:
                spout.ack(tup.message_id)
            got += len(batch)
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    if got < records:
        raise RuntimeError(f"{retrieval}: {got} of {records} records read in time")
    return records / wall, cpu / records * 1e6


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def run(ctx: BenchContext, smoke: bool) -> list[dict[str, Any]]:
    size = SIZES[ctx.profile(smoke)]
    ctx.progress("starting kinesis-local")
    server = KinesisLocalServer().start()
    try:
        for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
            os.environ.setdefault(name, value)  # the emulator accepts any credentials; boto3 needs some
        endpoint = KinesisEndpoint("kinesis-local", server.endpoint_url)
        rows: list[dict[str, Any]] = []
        for retrieval in RETRIEVALS:
            p50s, p99s = [], []
            for _ in range(size["repeats"]):
                lat = latencies(endpoint, retrieval, size["latency_records"])
                p50s.append(_ms(lat, 0.5))
                p99s.append(_ms(lat, 0.99))
            ctx.progress(f"fanout/latency: {retrieval}: p50 {statistics.median(p50s):.0f} ms, "
                         f"p99 {statistics.median(p99s):.0f} ms")
            rows.append({"case": f"{retrieval}: latency", "emulator": "kinesis-local", "shards": 1,
                         "records": size["latency_records"], "repeats": size["repeats"],
                         "latency_p50_ms": summary(p50s), "latency_p99_ms": summary(p99s)})
        for retrieval in RETRIEVALS:
            rates, cpus = [], []
            for _ in range(size["repeats"]):
                rate, cpu = backlog(endpoint, retrieval, size["backlog"])
                rates.append(rate)
                cpus.append(cpu)
            ctx.progress(f"fanout/backlog: {retrieval}: {statistics.median(rates):.0f} records/s, "
                         f"{statistics.median(cpus):.1f} µs CPU/record")
            rows.append({"case": f"{retrieval}: backlog", "emulator": "kinesis-local", "shards": 2,
                         "records": size["backlog"], "record_bytes": 100, "repeats": size["repeats"],
                         "records_per_s": summary(rates), "cpu_us_per_record": summary(cpus)})
        return rows
    finally:
        server.close()


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fan-out's latency and backlog rate beside polling's (no goal: kinesis-local paces fan-out at 1 event/s)."""
    by = {row["case"]: row for row in rows}
    out = []
    fan, poll = by.get("fanout: latency"), by.get("polling: latency")
    if fan and poll:
        out.append({"figure": "put-to-delivery p50, fan-out / polling (kinesis-local)",
                    "value": f"{fan['latency_p50_ms']['median']:.0f} ms / {poll['latency_p50_ms']['median']:.0f} ms",
                    "goal": "-", "met": None})
    fan, poll = by.get("fanout: backlog"), by.get("polling: backlog")
    if fan and poll:
        out.append({"figure": "backlog records/s, fan-out / polling (kinesis-local)",
                    "value": f"{fan['records_per_s']['median']:.0f} / {poll['records_per_s']['median']:.0f}",
                    "goal": "-", "met": None})
    return out
