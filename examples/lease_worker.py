"""Two workers share a stream through ZooKeeper leases: each reads the shards whose lease it holds.

A worker is a KinesisSpout with ``coordination="leases"`` and a ``worker_id`` of its own; the workers of one app
(``--app``) meet in ZooKeeper, split the shards between them evenly and take over the shards of a worker that
leaves or dies. Run one per machine (or terminal) against your servers:

    python examples/lease_worker.py --worker a --stream sentences --zookeeper 127.0.0.1:2181 \\
        --endpoint-url http://127.0.0.1:4567 --seconds 60
    python examples/lease_worker.py --worker b ...   # the same, in another terminal: the shards are split

With ``--demo`` it starts moto's Kinesis server and a private ZooKeeper, creates a 4-shard stream, produces records
for half of ``--seconds`` (longer, up to 2 s before the end, until both workers have read some), and runs two
workers as child processes (``b`` starts a moment after ``a``: watch ``a`` take all four leases, then give two back
to ``b``, and ``b`` take over ``a``'s when ``a`` stops first). At the end it checks that every record produced was
read by one of them. Each worker logs the lease moves (INFO lines of ``kinesis_spout.coordination``) and prints
what it read; Ctrl-C or SIGTERM stops a worker cleanly (checkpoints written, leases given back).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig


def run_worker(args: argparse.Namespace) -> int:
    """One worker: read and ack until ``--seconds`` passed (or SIGTERM/Ctrl-C), writing each record's data to
    ``--log`` (one line each) when given; print what it read."""
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s [worker {args.worker}] %(levelname)s "
                                                      f"%(name)s: %(message)s")
    logging.getLogger("kinesis_spout.coordination").setLevel(logging.INFO)  # lease moves: took, gave back
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         endpoint_url=args.endpoint_url, region=args.region, coordination="leases",
                         worker_id=args.worker, initial_position=InitialPosition.TRIM_HORIZON,
                         checkpoint_interval_s=0.5, shard_sync_interval_s=1.0, empty_record_backoff_s=0.2)
    read: Counter[str] = Counter()
    deadline = time.monotonic() + args.seconds
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(args.log, "a", buffering=1)) if args.log else None
        spout = stack.enter_context(KinesisSpout(config))
        while not stop.is_set() and time.monotonic() < deadline:
            batch = spout.next_batch(max_records=200, timeout_s=0.5)
            for tup in batch:
                read[tup.record.shard_id] += 1
                if out is not None:
                    out.write(tup.record.data.decode() + "\n")  # the effect, before the ack
            spout.ack_many(t.message_id for t in batch)
        held = sorted(spout.lease_epochs())
    by_shard = ", ".join(f"{shard} {n}" for shard, n in sorted(read.items())) or "none"
    print(f"[worker {args.worker}] read {sum(read.values())} records (by shard: {by_shard}); held at the end: "
          f"{', '.join(held) or 'none'}", flush=True)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    """Embedded servers, a producer, and two workers as child processes of this script; check that every record
    produced was read."""
    from kinesis_spout.demo import embedded_servers
    from kinesis_spout.testing.kinesis import kinesis_client, put_records, wait_for_stream

    with embedded_servers(args.endpoint_url, args.zookeeper) as (endpoint, zookeeper), \
            tempfile.TemporaryDirectory(prefix="lease-demo-") as folder:
        client = kinesis_client(endpoint, args.region)
        with contextlib.suppress(client.exceptions.ResourceInUseException):
            client.create_stream(StreamName=args.stream, ShardCount=4)
        wait_for_stream(client, args.stream)
        produced: list[str] = []
        logs = {name: Path(folder) / f"{name}.log" for name in ("a", "b")}

        def both_read() -> bool:
            return all(log.exists() and log.stat().st_size > 0 for log in logs.values())

        def produce() -> None:  # 20 records every 0.1 s for half of the run, longer until both workers read some
            started = time.monotonic()
            while True:
                elapsed = time.monotonic() - started
                if elapsed >= max(args.seconds - 2, args.seconds / 2) or (elapsed >= args.seconds / 2
                                                                          and both_read()):
                    break
                batch = [f"record-{len(produced) + i}" for i in range(20)]
                put_records(client, args.stream, batch, [f"key-{text}" for text in batch])
                produced.extend(batch)
                time.sleep(0.1)

        producer = threading.Thread(target=produce, name="lease-demo-producer")
        producer.start()
        workers = {}
        for name in ("a", "b"):
            argv = [sys.executable, __file__, "--worker", name, "--stream", args.stream, "--app", args.app,
                    "--zookeeper", zookeeper, "--endpoint-url", endpoint, "--region", args.region,
                    "--seconds", str(args.seconds), "--log", str(logs[name])]
            workers[name] = subprocess.Popen(argv, env={**os.environ})
            time.sleep(1.0)  # b joins a moment later: a takes every lease first, then gives half back
        producer.join()
        codes = {name: proc.wait(args.seconds + 60) for name, proc in workers.items()}
        read = {name: logs[name].read_text().split() if logs[name].exists() else [] for name in workers}
    seen = set(read["a"]) | set(read["b"])
    missing = [text for text in produced if text not in seen]
    counts = ", ".join(f"{name}: {len(texts)}" for name, texts in read.items())
    print(f"[lease-demo] {len(produced)} records produced; read {counts}; "
          f"{'every record read' if not missing else f'{len(missing)} NOT read'}"
          f"{'' if all(code == 0 for code in codes.values()) else f'; worker exit codes {codes}'}", flush=True)
    return 0 if not missing and all(code == 0 for code in codes.values()) else 1


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help="this worker's id (unique among the app's workers)")
    parser.add_argument("--demo", action="store_true", help="embedded servers, a producer and two workers")
    parser.add_argument("--stream", default=env("KINESIS_SPOUT_STREAM", "sentences"))
    parser.add_argument("--app", default="lease-example")
    parser.add_argument("--zookeeper", default=env("KINESIS_SPOUT_ZOOKEEPER"))
    parser.add_argument("--endpoint-url", default=env("KINESIS_SPOUT_ENDPOINT_URL"), help="omit for AWS")
    parser.add_argument("--region", default=env("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each worker reads")
    parser.add_argument("--log", help="a file each record's data is appended to (one line each)")
    args = parser.parse_args(argv)
    if args.demo:
        return run_demo(args)
    if not args.worker or not args.zookeeper:
        parser.error("a worker needs --worker and --zookeeper (or run --demo)")
    return run_worker(args)


if __name__ == "__main__":
    sys.exit(main())
