"""Two workers share a stream through ZooKeeper leases: each reads the shards whose lease it holds.

A worker is a KinesisSpout with ``coordination="leases"`` and a ``worker_id`` of its own; the workers of one app
(``--app``) meet in ZooKeeper, split the shards between them evenly and take over the shards of a worker that
leaves or dies. Run one per machine (or terminal) against your servers:

    python examples/lease_worker.py --worker a --stream sentences --zookeeper 127.0.0.1:2181 \\
        --endpoint-url http://127.0.0.1:4567 --seconds 60
    python examples/lease_worker.py --worker b ...   # the same, in another terminal: the shards are split

With ``--demo`` it starts moto's Kinesis server and a private ZooKeeper, creates a 4-shard stream, runs a producer
and two workers as child processes: ``a`` first, and ``b`` once ``a`` holds all four leases (watch ``a`` give two
back to ``b``); both read for ``--seconds``, then ``a`` stops first and the last records, put after it stopped, are
read by ``b``, which takes over ``a``'s shards. At the end it checks that every record produced was read by one of
them. Each worker logs the lease moves (INFO lines of ``kinesis_spout.coordination``) and prints what it read;
Ctrl-C or SIGTERM stops a worker cleanly (checkpoints written, leases given back).
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

#: How long the demo waits for each of its steps (a worker process started and reading, the last records read):
#: seconds on a quiet machine, far more on a loaded one; the bound only stops a demo that went wrong.
WORKER_START_TIMEOUT_S = 120.0


def run_worker(args: argparse.Namespace) -> int:
    """One worker: read and ack until ``--seconds`` passed (or SIGTERM/Ctrl-C), writing each record's shard and
    data to ``--log`` (one line each) when given; print what it read."""
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
                    out.write(f"{tup.record.shard_id} {tup.record.data.decode()}\n")  # the effect, before the ack
            spout.ack_many(t.message_id for t in batch)
        held = sorted(spout.lease_epochs())
    by_shard = ", ".join(f"{shard} {n}" for shard, n in sorted(read.items())) or "none"
    print(f"[worker {args.worker}] read {sum(read.values())} records (by shard: {by_shard}); held at the end: "
          f"{', '.join(held) or 'none'}", flush=True)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    """Embedded servers, a producer, and two workers as child processes of this script; check that every record
    produced was read.

    Each step waits for what it needs, not for a time: b starts once a has read from all four shards (it holds
    every lease), a stops once b has read some of its own (a gave two back) and both read for ``--seconds``; the
    last records are put after a stopped, so only b can read them (it took a's shards over)."""
    from kinesis_spout.demo import embedded_servers
    from kinesis_spout.testing.kinesis import kinesis_client, put_records, wait_for_stream
    from kinesis_spout.testing.process import wait_until

    with embedded_servers(args.endpoint_url, args.zookeeper) as (endpoint, zookeeper), \
            tempfile.TemporaryDirectory(prefix="lease-demo-") as folder:
        client = kinesis_client(endpoint, args.region)
        with contextlib.suppress(client.exceptions.ResourceInUseException):
            client.create_stream(StreamName=args.stream, ShardCount=4)
        wait_for_stream(client, args.stream)
        produced: list[str] = []
        logs = {name: Path(folder) / f"{name}.log" for name in ("a", "b")}
        stop_producing = threading.Event()

        def read_by(name: str) -> list[tuple[str, str]]:  # (shard, data) of each record the worker read
            text = logs[name].read_text() if logs[name].exists() else ""
            return [(shard, data) for shard, _, data in (line.partition(" ") for line in text.splitlines())]

        def put(count: int) -> None:
            batch = [f"record-{len(produced) + i}" for i in range(count)]
            put_records(client, args.stream, batch, [f"key-{text}" for text in batch])
            produced.extend(batch)

        def produce() -> None:  # 20 records every 0.1 s (random keys: every shard gets some) until told to stop
            while not stop_producing.wait(0.1):  # pacing, not synchronisation
                put(20)

        def everything_read() -> bool:
            seen = {data for name in logs for _, data in read_by(name)}
            return all(text in seen for text in produced)

        def start(name: str) -> subprocess.Popen[bytes]:  # runs until SIGTERM (--seconds bounds a lost demo)
            argv = [sys.executable, __file__, "--worker", name, "--stream", args.stream, "--app", args.app,
                    "--zookeeper", zookeeper, "--endpoint-url", endpoint, "--region", args.region,
                    "--seconds", str(args.seconds + WORKER_START_TIMEOUT_S * 4), "--log", str(logs[name])]
            return subprocess.Popen(argv, env={**os.environ})

        producer = threading.Thread(target=produce, name="lease-demo-producer")
        producer.start()
        workers: dict[str, subprocess.Popen[bytes]] = {}
        codes: dict[str, int | None] = {}
        try:
            workers["a"] = start("a")
            steps = [wait_until(lambda: len({shard for shard, _ in read_by("a")}) == 4, WORKER_START_TIMEOUT_S)]
            workers["b"] = start("b")  # a holds every lease: it gives two back to b
            steps.append(wait_until(lambda: bool(read_by("b")), WORKER_START_TIMEOUT_S))
            time.sleep(args.seconds)  # both workers read for --seconds, each its own shards (the demo's length)
            stop_producing.set()
            producer.join()
            workers["a"].send_signal(signal.SIGTERM)  # a stops first: checkpoints written, leases given back
            codes["a"] = workers["a"].wait(WORKER_START_TIMEOUT_S)
            put(40)  # after a stopped: only b can read these, once it has taken a's shards over
            steps.append(wait_until(everything_read, WORKER_START_TIMEOUT_S))
            workers["b"].send_signal(signal.SIGTERM)
            codes["b"] = workers["b"].wait(WORKER_START_TIMEOUT_S)
        finally:
            stop_producing.set()
            for proc in workers.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        read = {name: [data for _, data in read_by(name)] for name in workers}
    seen = set(read["a"]) | set(read["b"])
    missing = [text for text in produced if text not in seen]
    counts = ", ".join(f"{name}: {len(texts)}" for name, texts in read.items())
    late = [what for what, ok in zip(("a to read all four shards", "b to read", "every record to be read"), steps)
            if not ok]
    print(f"[lease-demo] {len(produced)} records produced; read {counts}; "
          f"{'every record read' if not missing else f'{len(missing)} NOT read'}"
          f"{'' if all(code == 0 for code in codes.values()) else f'; worker exit codes {codes}'}"
          f"{'; waited in vain for ' + ', '.join(late) if late else ''}", flush=True)
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
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="how long a worker reads (--demo: how long both read side by side)")
    parser.add_argument("--log", help="a file each record's data is appended to (one line each)")
    args = parser.parse_args(argv)
    if args.demo:
        return run_demo(args)
    if not args.worker or not args.zookeeper:
        parser.error("a worker needs --worker and --zookeeper (or run --demo)")
    return run_worker(args)


if __name__ == "__main__":
    sys.exit(main())
