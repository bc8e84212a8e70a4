"""The demo: Storm's streaming word count, read from Kinesis through the spout, on embedded servers.

``make demo`` (or ``kinesis-spout demo``) starts moto's Kinesis server and a private ZooKeeper unless the
environment points at real ones, creates a 4-shard stream, produces sentences while the spout reads them, counts
words, acks every record, prints progress each second (records/s and each shard's checkpoint) and the top words
at the end. It stops on its own after ``--duration`` seconds, or on Ctrl-C.

Environment (or flags): ``KINESIS_SPOUT_ENDPOINT_URL``, ``KINESIS_SPOUT_ZOOKEEPER``, ``KINESIS_SPOUT_STREAM``.
With an endpoint of your own (an emulator, LocalStack) and no AWS credentials configured, the demo uses dummy
ones: emulators accept any.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from typing import Iterator

from kinesis_spout.config import InitialPosition, SpoutConfig
from kinesis_spout.schemes import TextScheme
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.testing.kinesis import kinesis_client, put_records, wait_for_stream

SENTENCES = (
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
)
#: A sentence pipelines may treat as a poison record, to show retries and dead letters.
POISON = "this poison sentence always fails"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="kinesis-spout demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=float(env("KINESIS_SPOUT_DEMO_SECONDS", "15")),
                   help="seconds to produce and read (default 15)")
    p.add_argument("--rate", type=int, default=2000, help="sentences produced per second (default 2000)")
    p.add_argument("--shards", type=int, default=4, help="shards of the stream when it is created (default 4)")
    p.add_argument("--stream", default=env("KINESIS_SPOUT_STREAM", "sentences"))
    p.add_argument("--app", default=env("KINESIS_SPOUT_APP", "wordcount"))
    p.add_argument("--endpoint-url", default=env("KINESIS_SPOUT_ENDPOINT_URL"),
                   help="Kinesis endpoint; default: start moto's server embedded")
    p.add_argument("--region", default=env("AWS_DEFAULT_REGION", "us-east-1"))
    p.add_argument("--zookeeper", default=env("KINESIS_SPOUT_ZOOKEEPER"),
                   help="ZooKeeper connect string; default: start a private server embedded")
    return p.parse_args(argv)


DUMMY_AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


def use_dummy_credentials_if_none() -> bool:
    """Set dummy AWS credentials in this process's environment when boto3 finds none; returns whether it did.

    Who calls: :func:`embedded_servers`, for an endpoint given by the user. An emulator accepts any credentials
    but boto3 signs every request and refuses to without some; credentials that are configured (environment,
    profile, role) are left alone, so a real AWS endpoint still gets the real ones.
    """
    import botocore.session

    if botocore.session.get_session().get_credentials() is not None:
        return False
    os.environ.update(DUMMY_AWS_ENV)
    return True


#: The loggers of moto's web server: werkzeug logs each request moto fails (a 500) with its whole traceback.
MOTO_SERVER_LOGGERS = ("werkzeug", "moto", "flask")


def silence_moto_server_logs() -> None:
    """Silence the loggers of moto's web server for the rest of the process. Who calls: :func:`embedded_servers`,
    once moto's server started (the demo is a process of its own). moto's request log is not the demo's business:
    the spout's own lines say what a failed request did to it ("retrying ..."), and werkzeug logs a request that
    moto fails after its reply is sent, so a silence that ended with the server would miss the last ones."""
    for name in MOTO_SERVER_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextlib.contextmanager
def embedded_servers(endpoint_url: str | None, zookeeper: str | None) -> Iterator[tuple[str, str]]:
    """Yield (endpoint_url, zookeeper hosts), starting embedded servers for whatever was not given.

    For an ``endpoint_url`` of the user's, dummy AWS credentials are set when none are configured (see
    :func:`use_dummy_credentials_if_none`). The embedded moto server's request log is silenced (see
    :func:`silence_moto_server_logs`).
    """
    with contextlib.ExitStack() as stack:
        endpoint = endpoint_url
        if endpoint:
            if use_dummy_credentials_if_none():
                print(f"[demo] no AWS credentials configured: using dummy ones for {endpoint} (emulators accept "
                      f"any; a real AWS endpoint needs real ones)", flush=True)
        else:
            from kinesis_spout.testing.moto_server import MotoKinesisServer

            for name, value in DUMMY_AWS_ENV.items():
                os.environ.setdefault(name, value)
            endpoint = stack.enter_context(MotoKinesisServer()).endpoint_url
            silence_moto_server_logs()  # after start(), which sets werkzeug's level
            print(f"[demo] embedded Kinesis (moto server) at {endpoint}", flush=True)
        zk = zookeeper
        if not zk:
            from kinesis_spout.testing.zookeeper import ZooKeeperServer

            zk = stack.enter_context(ZooKeeperServer()).hosts
            print(f"[demo] embedded ZooKeeper at {zk}", flush=True)
        yield endpoint, zk


class Producer:
    """Puts ``rate`` sentences per second (batches of 100) into a stream on a background thread.

    One sentence in ``poison_every`` is a poison sentence (a pipeline may fail it to show retries and dead
    letters); 0 turns them off. ``create_stream()`` creates the stream if it is missing; ``stop()`` is idempotent.
    """

    def __init__(self, endpoint_url: str | None, region: str, stream: str, *, rate: int = 2000, shards: int = 4,
                 poison_every: int = 0) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.stream = stream
        self.rate = rate
        self.shards = shards
        self.poison_every = poison_every
        self.produced = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: object = None

    def client(self) -> object:
        if self._client is None:
            self._client = kinesis_client(self.endpoint_url, self.region)
        return self._client

    def create_stream(self) -> None:
        client = self.client()
        try:
            client.create_stream(StreamName=self.stream, ShardCount=self.shards)  # type: ignore[attr-defined]
            print(f"[demo] created stream {self.stream!r} with {self.shards} shards", flush=True)
        except client.exceptions.ResourceInUseException:  # type: ignore[attr-defined]
            print(f"[demo] using existing stream {self.stream!r}", flush=True)
        wait_for_stream(client, self.stream)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        rng = random.Random(42)
        interval = 100 / max(self.rate, 1)
        next_at = time.monotonic()
        while not self._stop.is_set():
            batch = [rng.choice(SENTENCES) for _ in range(100)]
            if self.poison_every and rng.randrange(self.poison_every) < 100:
                batch[0] = POISON
            keys = [f"pk-{rng.randrange(1 << 30)}" for _ in batch]
            put_records(self.client(), self.stream, batch, keys)
            self.produced += len(batch)
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        """Stop producing (waits for the batch being put). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def short(seq: str | None) -> str:
    return "-" if seq is None else (seq if len(seq) <= 12 else f"…{seq[-8:]}")


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        print(f"\n[demo] {signal.Signals(signum).name}: stopping cleanly")
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with embedded_servers(args.endpoint_url, args.zookeeper) as (endpoint, zk):
        producer = Producer(endpoint, args.region, args.stream, rate=args.rate, shards=args.shards)
        producer.create_stream()
        config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=zk, endpoint_url=endpoint,
                             region=args.region, initial_position=InitialPosition.TRIM_HORIZON,
                             scheme=TextScheme(), checkpoint_interval_s=1.0, empty_record_backoff_s=0.2)
        counts: Counter[str] = Counter()
        consumed = 0
        started = time.monotonic()
        with KinesisSpout(config) as spout:
            producer.start()
            last_report, last_consumed = started, 0
            while not stop.is_set():
                now = time.monotonic()
                if now - started >= args.duration:
                    producer.stop()
                if now - started >= args.duration and consumed >= producer.produced:
                    break
                for tup in spout.next_batch(max_records=1000, timeout_s=0.25):
                    counts.update(tup.values[1].split())
                    spout.ack(tup.message_id)
                    consumed += 1
                if now - last_report >= 1.0:
                    rate = (consumed - last_consumed) / (now - last_report)
                    cps = " ".join(f"{m.shard_id[-3:]}={short(m.checkpoint)}" for m in spout.metrics())
                    print(f"[demo] t={now - started:5.1f}s produced={producer.produced:>7} read={consumed:>7} "
                          f"({rate:7.0f} rec/s)  checkpoints: {cps}", flush=True)
                    last_report, last_consumed = now, consumed
            producer.stop()
            spout.flush_checkpoints()
            elapsed = time.monotonic() - started
            print(f"[demo] read {consumed} of {producer.produced} sentences in {elapsed:.1f} s "
                  f"({consumed / max(elapsed, 1e-9):.0f} rec/s); checkpoints stored in ZooKeeper at "
                  f"{config.checkpoint_path}")
        print("[demo] top words:")
        for word, n in counts.most_common(10):
            print(f"[demo]   {word:<10} {n}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
