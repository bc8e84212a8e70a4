"""Enhanced fan-out (``retrieval="fanout"``) against polling (``retrieval="polling"``), both through KinesisSpout on
kinesis-local (the only emulator here with SubscribeToShard).

Latency rows: records put one at a time into an idle one-shard stream while a spout reads it; the figure is the time
from ``put_record`` returning to the spout handing the record out (p50 and p99). Polling reads at its shortest idle
pause (``empty_record_backoff_s=0.2``) and at its default (1 s). kinesis-local pushes a subscription's events once a
second, so on it fan-out waits about half a second on average: the rows show this machine's emulator, not Kinesis (which
pushes within about 70 ms of a put). Backlog rows: a two-shard stream read from TRIM_HORIZON to its end; records/s, and
CPU of this process per record (the emulator's own CPU is not counted).

Shared-stream rows: three applications (three spouts, each its own app name) read one backlog of a two-shard stream
at once, each to its end; the figure is each application's records/s (the backlog over the time it took that
application, from the moment all three were open). Kinesis allows 5 GetRecords calls a second per shard, shared by
every application reading the shard; the emulators do not, so the polling applications read through a FaultProxy
(``kinesis_spout.testing.faults``) that answers calls beyond that with ProvisionedThroughputExceededException
(counted in the rows; the readers' warnings about them are not shown), and ask for at most 100 records a call
(``max_records_per_call``; Kinesis's 2 MB/s per shard read limit is not emulated). The fan-out applications
subscribe to kinesis-local directly, each through its own consumer: Kinesis gives each consumer its own 2 MB/s per
shard, and no call limit is shared. A one-application polling row behind the same proxy shows what the sharing
costs. Opening (registering a consumer, subscribing) is not timed in these rows; it is in the backlog rows.
"""

from __future__ import annotations

import logging
import os
import statistics
import threading
import time
import uuid
from typing import Any

from benchmarks.context import BenchContext
from benchmarks.stats import ratio, summary
from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.config.groups import ReadingSettings
from kinesis_spout.testing.emulators import KinesisLocalServer
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream

TITLE = ("Enhanced fan-out vs polling: put-to-delivery latency, records/s and CPU on a backlog, and records/s per "
         "application when three read one stream at once (kinesis-local)")

SIZES = {
    "full": {"latency_records": 200, "backlog": 5_000, "repeats": 3, "shared": 6_000},
    "quick": {"latency_records": 100, "backlog": 2_000, "repeats": 2, "shared": 3_000},
    "smoke": {"latency_records": 8, "backlog": 150, "repeats": 1, "shared": 200},
}
RETRIEVALS = ("fanout", "polling")
#: The spout's shortest pause after an empty read (``empty_record_backoff_s``), and its default.
SHORTEST_BACKOFF_S = 0.2
DEFAULT_BACKOFF_S = ReadingSettings().empty_record_backoff_s
#: The latency rows: (case, retrieval, empty_record_backoff_s).
LATENCY_CASES = (("fanout", "fanout", SHORTEST_BACKOFF_S), ("polling", "polling", SHORTEST_BACKOFF_S),
                 ("polling, default backoff", "polling", DEFAULT_BACKOFF_S))
APPS = 3
#: Kinesis's GetRecords calls per second per shard, shared by every application reading the shard.
GETRECORDS_PER_S = 5
#: Records per GetRecords call of the polling applications of the shared-stream rows.
SHARED_LIMIT = 100

COLUMNS = [
    ("case", "case", "{}"),
    ("latency_p50_ms", "p50 ms", "fig0"),
    ("latency_p99_ms", "p99 ms", "fig0"),
    ("records_per_s", "records/s", "fig0"),
    ("cpu_us_per_record", "CPU µs/record", "fig1"),
    ("slowest_app_records_per_s", "slowest app records/s", "fig0"),
    ("throttled", "throttled calls", "{}"),
    ("ratio_vs_polling", "records/s vs polling ×3", "x"),
]


def _config(endpoint: KinesisEndpoint, stream: str, retrieval: str, initial: InitialPosition,
            **more: Any) -> SpoutConfig:
    more.setdefault("empty_record_backoff_s", SHORTEST_BACKOFF_S)
    return SpoutConfig(stream_name=stream, app_name=f"bench-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, retrieval=retrieval, initial_position=initial,
                       checkpoint_interval_s=1.0, **more)


def _stream(endpoint: KinesisEndpoint, shards: int) -> str:
    client = endpoint.client()
    name = f"bench-fanout-{uuid.uuid4().hex[:8]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    wait_for_stream(client, name, timeout_s=60)
    return name


def latencies(endpoint: KinesisEndpoint, retrieval: str, count: int, backoff_s: float = SHORTEST_BACKOFF_S
              ) -> list[float]:
    """Seconds from each put's return to its delivery, for ``count`` records put 0.1 s apart (``backoff_s``: the
    spout's pause after an empty read)."""
    stream = _stream(endpoint, 1)
    client = endpoint.client()
    put_at: dict[str, float] = {}
    seen: dict[str, float] = {}
    lock = threading.Lock()
    config = _config(endpoint, stream, retrieval, InitialPosition.LATEST, empty_record_backoff_s=backoff_s)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
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


def shared(endpoint: KinesisEndpoint, retrieval: str, apps: int, records: int) -> tuple[list[float], int]:
    """Each application's records/s when ``apps`` applications read the same backlog of ``records`` (two shards)
    at once, and the GetRecords calls throttled. Polling reads through a FaultProxy enforcing
    ``GETRECORDS_PER_S`` calls per shard across the applications; fan-out subscribes directly."""
    stream = _stream(endpoint, 2)
    put_records(endpoint.client(), stream, [b"x" * 100 for _ in range(records)])
    proxy = FaultProxy(endpoint.endpoint_url).start() if retrieval == "polling" else None
    readers = logging.getLogger("kinesis_spout.kinesis")
    level = readers.level
    if proxy is not None:
        readers.setLevel(logging.ERROR)  # a warning per throttled call: counted in the row instead
    try:
        if proxy is not None:
            proxy.limit_rate("GetRecords", GETRECORDS_PER_S)
            through = KinesisEndpoint("kinesis-local+limit", proxy.endpoint_url, region=endpoint.region)
            more: dict[str, Any] = {"max_records_per_call": SHARED_LIMIT}
        else:
            through, more = endpoint, {}
        opened = threading.Barrier(apps)
        rates: list[float] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def app() -> None:
            config = _config(through, stream, retrieval, InitialPosition.TRIM_HORIZON, **more)
            try:
                with KinesisSpout(config, MemoryCheckpointStore()) as spout:
                    opened.wait(120)
                    got, t0 = 0, time.monotonic()
                    deadline = t0 + 180
                    while got < records and time.monotonic() < deadline:
                        batch = spout.next_batch(max_records=1000, timeout_s=0.2)
                        spout.ack_many(t.message_id for t in batch)
                        got += len(batch)
                    if got < records:
                        raise RuntimeError(f"{retrieval}: an application read {got} of {records} records in time")
                    with lock:
                        rates.append(records / (time.monotonic() - t0))
            except BaseException as exc:  # noqa: BLE001 - raised on the benchmark's thread below
                opened.abort()
                with lock:
                    errors.append(exc)

        threads = [threading.Thread(target=app, name=f"bench-app-{i}", daemon=True) for i in range(apps)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        if errors:
            raise errors[0]
        if len(rates) < apps:
            raise RuntimeError(f"{retrieval}: {apps - len(rates)} of {apps} applications did not finish in time")
        throttled = proxy.injected["GetRecords:ProvisionedThroughputExceededException"] if proxy is not None else 0
        return rates, throttled
    finally:
        if proxy is not None:
            proxy.close()
        readers.setLevel(level)


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
        for case, retrieval, backoff_s in LATENCY_CASES:
            p50s, p99s = [], []
            for _ in range(size["repeats"]):
                lat = latencies(endpoint, retrieval, size["latency_records"], backoff_s)
                p50s.append(_ms(lat, 0.5))
                p99s.append(_ms(lat, 0.99))
            ctx.progress(f"fanout/latency: {case}: p50 {statistics.median(p50s):.0f} ms, "
                         f"p99 {statistics.median(p99s):.0f} ms")
            rows.append({"case": f"{case}: latency", "emulator": "kinesis-local", "shards": 1,
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
        rows += shared_rows(ctx, endpoint, size)
        return rows
    finally:
        server.close()


def shared_rows(ctx: BenchContext, endpoint: KinesisEndpoint, size: dict[str, int]) -> list[dict[str, Any]]:
    """The shared-stream rows (see the module docstring): polling by one application, polling by three, fan-out
    by three; each row's records/s per application, its slowest application, and its ratio to polling by three."""
    rows: list[dict[str, Any]] = []
    for retrieval, apps in (("polling", 1), ("polling", APPS), ("fanout", APPS)):
        rates: list[float] = []
        slowest: list[float] = []
        throttled = 0
        for _ in range(size["repeats"]):
            run_rates, run_throttled = shared(endpoint, retrieval, apps, size["shared"])
            rates += run_rates
            slowest.append(min(run_rates))
            throttled += run_throttled
        case = f"{retrieval}: {apps} app{'s' if apps > 1 else ''} on one stream"
        ctx.progress(f"fanout/shared: {case}: {statistics.median(rates):.0f} records/s per app, slowest "
                     f"{statistics.median(slowest):.0f}, {throttled} GetRecords calls throttled")
        rows.append({"case": case, "emulator": "kinesis-local", "shards": 2, "apps": apps,
                     "records": size["shared"], "record_bytes": 100, "repeats": size["repeats"],
                     "getrecords_limit": SHARED_LIMIT if retrieval == "polling" else None,
                     "getrecords_per_s_per_shard": GETRECORDS_PER_S if retrieval == "polling" else None,
                     "records_per_s": summary(rates), "slowest_app_records_per_s": summary(slowest),
                     "throttled": throttled})
    base = rows[1]
    for row in rows:
        row["ratio_vs_polling"] = ratio(row["records_per_s"], base["records_per_s"])
    return rows


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
    fan, poll = by.get(f"fanout: {APPS} apps on one stream"), by.get(f"polling: {APPS} apps on one stream")
    if fan and poll:
        out.append({"figure": f"records/s per application, {APPS} on one stream, fan-out / polling (5 GetRecords/s "
                              f"per shard shared)",
                    "value": f"{fan['records_per_s']['median']:.0f} / {poll['records_per_s']['median']:.0f} "
                             f"({fan['ratio_vs_polling']:.2f}x)", "goal": "-", "met": None})
    return out
