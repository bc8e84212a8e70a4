"""One measured read of a stream by one consumer, in a process of its own; prints one JSON line with the result.

Run by :mod:`benchmarks.bench_peers` as ``python -m benchmarks.peer_worker KIND ...`` from the project root, with
the interpreter of the venv that has the consumer installed (kinesis-python needs a venv of its own). Each worker
measures from the consumer's creation to the last expected record: wall time, and CPU time of the worker and of
its child processes (kinesis-python reads each shard in a child process). Kinds:

``boto3-loop``      the plain GetRecords loop of :mod:`benchmarks.loops` on ``boto3.client("kinesis")``;
``spout``           KinesisSpout acking every record, checkpoints every second in ZooKeeper (``--zookeeper``);
``async-kinesis``   async-kinesis' ``Consumer`` (in-memory checkpointer, string processor, 5 fetches/s/shard);
``kinesis-python``  kinesis-python's ``KinesisConsumer`` (one process per shard, an in-memory state object).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from typing import Any

from benchmarks.loops import ReadResult, ShortRead, read_boto3_loop
from benchmarks.stats import Stopwatch

KINDS = ("boto3-loop", "spout", "async-kinesis", "kinesis-python")
#: The distribution whose version each kind reports.
DISTRIBUTION = {"boto3-loop": "boto3", "spout": "kinesis-spout", "async-kinesis": "async-kinesis",
                "kinesis-python": "kinesis-python"}


def distribution_version(kind: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION[kind])
    except metadata.PackageNotFoundError:
        return None


def children_cpu_s() -> float:
    """CPU seconds of this process's children that have exited and been waited for."""
    times = os.times()
    return times.children_user + times.children_system


def read_async_kinesis(args: argparse.Namespace) -> ReadResult:
    import asyncio

    from kinesis import Consumer, StringProcessor

    async def consume() -> ReadResult:
        watch = Stopwatch().start()
        count = nbytes = 0
        async with Consumer(args.stream, endpoint_url=args.endpoint, region_name="us-east-1",
                            iterator_type="TRIM_HORIZON", record_limit=args.limit, shard_fetch_rate=5,
                            sleep_time_no_records=0.2, idle_timeout=args.timeout,
                            processor=StringProcessor()) as consumer:
            async for item in consumer:
                nbytes += len(item)
                count += 1
                if count >= args.expected:
                    break
            watch.stop()
        return ReadResult(count, nbytes, watch.wall_s, watch.cpu_s)

    return asyncio.run(asyncio.wait_for(consume(), args.timeout + 30))


class MemoryState:
    """kinesis-python's state interface (its own implementation needs DynamoDB): start every shard at
    TRIM_HORIZON, always hold the lock, keep checkpoints in memory."""

    def __init__(self) -> None:
        self.checkpoints: dict[str, str] = {}

    def get_iterator_args(self, shard_id: str) -> dict[str, str]:
        return {"ShardIteratorType": "TRIM_HORIZON"}

    def lock_shard(self, shard_id: str, expires: float) -> bool:
        return True

    def checkpoint(self, shard_id: str, seq: str) -> None:
        self.checkpoints[shard_id] = seq


def read_kinesis_python(args: argparse.Namespace) -> ReadResult:
    # kinesis-python makes its clients with boto3's defaults: point them at the emulator through the environment
    os.environ["AWS_ENDPOINT_URL_KINESIS"] = args.endpoint
    from kinesis.consumer import KinesisConsumer

    children0 = children_cpu_s()
    watch = Stopwatch().start()
    deadline = time.monotonic() + args.timeout
    consumer = KinesisConsumer(args.stream, state=MemoryState(), reader_sleep_time=0.2)
    count = nbytes = 0
    records = iter(consumer)
    try:
        for record in records:
            nbytes += len(record["Data"])
            count += 1
            if count >= args.expected or time.monotonic() > deadline:
                break
        watch.stop()
    finally:
        records.close()  # type: ignore[attr-defined]  # its generator's finally stops the shard processes
    cpu = watch.cpu_s + children_cpu_s() - children0
    if count < args.expected:
        raise ShortRead(f"kinesis-python read {count} of {args.expected} records in {args.timeout:g} s")
    return ReadResult(count, nbytes, watch.wall_s, cpu, extra={"cpu_includes_shard_processes": True})


def read_spout(args: argparse.Namespace) -> ReadResult:
    from benchmarks.context import ZK_PREFIX
    from benchmarks.spout_read import read_with_spout, spout_config
    from kinesis_spout.kinesis.client import make_client

    config = spout_config(args.stream, f"peers-{uuid.uuid4().hex[:10]}", args.zookeeper, ZK_PREFIX, args.endpoint,
                          limit=args.limit, checkpoint_interval_s=1.0)
    return read_with_spout(config, args.expected, args.timeout, client=make_client("us-east-1", args.endpoint))


def read_loop(args: argparse.Namespace) -> ReadResult:
    import boto3

    client = boto3.client("kinesis", endpoint_url=args.endpoint, region_name="us-east-1")
    return read_boto3_loop(client, args.stream, args.expected, args.limit, args.timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peer_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--expected", type=int, required=True)
    parser.add_argument("--limit", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--zookeeper", default="")
    args = parser.parse_args(argv)
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    readers = {"boto3-loop": read_loop, "spout": read_spout, "async-kinesis": read_async_kinesis,
               "kinesis-python": read_kinesis_python}
    try:
        result = readers[args.kind](args)
    except ImportError as exc:
        print(json.dumps({"kind": args.kind, "status": "not installed", "error": str(exc)}))
        return 3
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which records why this peer did not run
        print(json.dumps({"kind": args.kind, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}))
        return 2
    out: dict[str, Any] = {"kind": args.kind, "status": "ok", "version": distribution_version(args.kind),
                           **result.to_dict()}
    if result.records < args.expected:
        out.update(status="failed", error=f"read {result.records} of {args.expected} records")
    print(json.dumps(out))
    return 0 if out["status"] == "ok" else 2


if __name__ == "__main__":
    sys.exit(main())
