"""``readMode=executors`` probes idle shards off the planning path, each on its idle schedule: a batch's planning
never waits on an idle shard's probe, an idle shard is probed no more often than its pauses allow, and a record put
on a long-idle shard is still read, once.

The stream reader is driven as Spark drives it (latestOffset, partitions, read, commit), without a session, on
kinesalite behind the project's Kinesis proxy, which sees every GetRecords call (of the driver's probes and of the
tasks) and can hold those of one shard.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable

from kinesis_spout.spark.source import ExecutorStreamReader
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.http_proxy import UpstreamRequest
from kinesis_spout.testing.kinesis import KinesisEndpoint, keys_on
from kinesis_spout.testing.process import wait_until

from .support import executor_options, message_ids, read_partition

FIRST_PAUSE_S = 0.2  # emptyRecordBackoffS of the source's options
BATCH_TIMEOUT_S = 20.0


class WatchingProxy(FaultProxy):
    """Forwards Kinesis calls, noting when each shard's GetRecords calls came, and holds those of ``hold_shard``
    until ``release`` is set. Shared with the handler threads: under ``lock``, and the events."""

    def __init__(self, upstream_url: str) -> None:
        super().__init__(upstream_url)
        self.lock = threading.Lock()
        self.get_records: dict[str | None, list[float]] = defaultdict(list)  # under lock
        self.hold_shard: str | None = None
        self.holding = threading.Event()
        self.release = threading.Event()

    def forward(self, request: UpstreamRequest) -> tuple[int, str, list[tuple[str, str]], bytes]:
        target = next((v for k, v in request.headers if k.lower() == "x-amz-target"), "")
        if target.endswith(".GetRecords"):
            shard = self.shard_of("GetRecords", request.body)
            with self.lock:
                self.get_records[shard].append(time.monotonic())
            if shard is not None and shard == self.hold_shard:
                self.holding.set()
                self.release.wait(60)
        return super().forward(request)


def one_batch(reader: ExecutorStreamReader, start: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """Plan, read and commit one batch (nothing to plan: start, no rows); its end, rows and the shards tasked."""
    end = reader.latestOffset(start, ReadAllAvailable())
    if end == start:
        return start, [], []
    parts = list(reader.partitions(start, end))
    ids = [mid for part in parts for mid in read_partition(reader, part)]
    reader.commit(end)
    return end, ids, [s for p in parts for s in p.shard_ids]


def in_time(reader: ExecutorStreamReader, start: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """``one_batch`` on a thread of its own, which must be done within ``BATCH_TIMEOUT_S``."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(one_batch(reader, start)), daemon=True)
    thread.start()
    thread.join(BATCH_TIMEOUT_S)
    assert out, f"a batch was not planned and read within {BATCH_TIMEOUT_S:.0f} s: its planning waited on a probe"
    return out[0]


def test_planning_never_waits_on_an_idle_shard_and_a_record_on_a_long_idle_shard_is_read_once(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=4)
    client = kinesalite.client()
    shard_ids = sorted(s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"])
    busy, held, idle = shard_ids[0], shard_ids[-1], shard_ids[1:-1]
    keys = keys_on(client, stream, busy, 40)
    with WatchingProxy(kinesalite.endpoint_url) as proxy:
        through = KinesisEndpoint("kinesalite+watch", proxy.endpoint_url, region=kinesalite.region)
        reader = ExecutorStreamReader(executor_options(through, zookeeper, stream, checkpointIntervalS="1"))
        try:
            start = reader.initialOffset()
            placed = kinesalite.put(stream, [b"first"], keys[:1])
            start, ids, _ = in_time(reader, start)
            assert ids == message_ids(placed)
            # an idle shard's probe hangs from now on; batches of the busy shard go on, each read in time
            proxy.hold_shard = held
            read: list[str] = []
            put: list[tuple[str, str]] = []
            after_hold = 0
            for n in range(1, len(keys)):
                if proxy.holding.is_set():
                    after_hold += 1
                    if after_hold > 2:
                        break
                put += kinesalite.put(stream, [f"r{n}".encode()], keys[n:n + 1])
                start, ids, tasked = in_time(reader, start)
                read += ids
                assert held not in tasked
            assert proxy.holding.is_set(), "the idle shard was never probed while the busy one was read"
            proxy.release.set()

            def all_read() -> bool:
                nonlocal start
                start, ids, _ = in_time(reader, start)
                read.extend(ids)
                return len(read) >= len(put)

            assert wait_until(all_read, 30) and sorted(read) == sorted(message_ids(put))
            # a record on the shard whose probes hung, idle since the query started: read once
            woken = kinesalite.put(stream, [b"wake"], keys_on(client, stream, held, 1))
            late: list[str] = []

            def woken_read() -> bool:
                nonlocal start
                start, ids, _ = in_time(reader, start)
                late.extend(ids)
                return bool(late)

            assert wait_until(woken_read, 30), "the record on the long-idle shard was never read"
            assert late == message_ids(woken)
        finally:
            proxy.release.set()
            reader.stop()
        with proxy.lock:
            calls = {s: list(times) for s, times in proxy.get_records.items()}
    for shard in idle:  # never read by a task: every call is a probe, each after its shard's pause at least
        gaps = [b - a for a, b in zip(calls[shard], calls[shard][1:])]
        assert gaps and min(gaps) >= FIRST_PAUSE_S * 0.9, f"{shard}'s probes came {gaps} s apart"
