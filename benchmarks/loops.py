"""The baseline every read figure is compared with: a plain boto3 GetRecords loop over all shards of a stream.

Standard library and boto3 only (no kinesis_spout import), so that :mod:`benchmarks.peer_worker` can run it in any
of the benchmark venvs.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from benchmarks.stats import Stopwatch


@dataclass
class ReadResult:
    """What one consumer run read, and how long it took (wall) and cost (process CPU)."""

    records: int
    bytes: int
    wall_s: float
    cpu_s: float
    calls: int = 0
    extra: dict[str, Any] | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / self.records * 1e6 if self.records else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ShortRead(Exception):
    """A consumer stopped before it read every record it should have; the message says how many it got."""


def read_boto3_loop(client: Any, stream: str, expected: int, limit: int, timeout_s: float,
                    unpack: Callable[[list[dict[str, Any]]], Iterable[bytes]] | None = None) -> ReadResult:
    """Read ``stream`` from TRIM_HORIZON until ``expected`` records were read: list the shards, take one iterator
    per shard, then call GetRecords on each shard in turn (``Limit=limit``) with no pause between calls.

    Who calls: the read, peers, scaling and KPL benchmarks (directly, or in a worker process). The clock runs from
    the shard listing to the last record; each record's data is touched, as a consumer would. ``unpack`` turns a
    reply's records into the data of the records the consumer counts (the KPL benchmark de-aggregates there);
    by default each Kinesis record counts. Raises :class:`ShortRead` when ``timeout_s`` passes first.
    """
    watch = Stopwatch().start()
    deadline = time.monotonic() + timeout_s
    shard_ids = [s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"]]
    iterators: dict[str, str | None] = {
        sid: client.get_shard_iterator(StreamName=stream, ShardId=sid,
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for sid in shard_ids}
    count = nbytes = calls = 0
    while count < expected:
        if time.monotonic() > deadline:
            raise ShortRead(f"boto3 loop read {count} of {expected} records of {stream!r} in {timeout_s:g} s")
        for sid in shard_ids:
            iterator = iterators[sid]
            if iterator is None:
                continue
            reply = client.get_records(ShardIterator=iterator, Limit=limit)
            calls += 1
            if unpack is None:
                for record in reply["Records"]:
                    nbytes += len(record["Data"])
                count += len(reply["Records"])
            else:
                for data in unpack(reply["Records"]):
                    nbytes += len(data)
                    count += 1
            iterators[sid] = reply.get("NextShardIterator")
    watch.stop()
    return ReadResult(count, nbytes, watch.wall_s, watch.cpu_s, calls)
