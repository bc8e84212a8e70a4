"""Storm's streaming word count with the plain spout (no Spark): read, check, count, ack.

Run against `kinesis-spout dev-servers` (its exports set the defaults below), the demo's servers or your own:

    python examples/spout_wordcount.py --stream sentences --zookeeper 127.0.0.1:2181 \
        --endpoint-url http://127.0.0.1:4567 --seconds 30

Sentences that are blank or contain the word "poison" are bad: they are failed, retried ``--retry-limit`` times,
then dead-lettered, and never counted. The order is the point: a record is checked *before* anything is counted
for it, and acked right after its words are counted. Counting first and failing afterwards would count a bad
record once per attempt (``retry_limit + 1`` times), because a failed record comes back. A sink that outlives the
process (a database) should also write keyed by ``message_id``, so that a record delivered again after a crash
(between the write and the ack) is not counted twice; here the counts live in memory and die with the process.

Ctrl-C or SIGTERM stops it cleanly: the checkpoints are flushed, and the next run resumes after them.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from collections import Counter

from kinesis_spout import InitialPosition, KinesisSpout, Record, SpoutConfig, TextScheme


def is_bad(sentence: str) -> bool:
    """The check a record must pass before anything is counted for it."""
    words = sentence.split()
    return not words or "poison" in words


def main() -> None:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", default=env("KINESIS_SPOUT_STREAM", "sentences"))
    parser.add_argument("--app", default="wordcount-example")
    parser.add_argument("--zookeeper", default=env("KINESIS_SPOUT_ZOOKEEPER", "127.0.0.1:2181"))
    parser.add_argument("--endpoint-url", default=env("KINESIS_SPOUT_ENDPOINT_URL"), help="omit for AWS")
    parser.add_argument("--region", default=env("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--retry-limit", type=int, default=3, help="retries of a bad record before its dead letter")
    parser.add_argument("--top", type=int, default=10, help="how many of the most frequent words to print")
    parser.add_argument("--verbose", action="store_true", help="the spout's DEBUG lines too (each dead letter...)")
    args = parser.parse_args()
    # the spout says what it reads and what went wrong through logging: warnings from everything, the spout's INFO
    # lines (opened, shards finished, closed) too, or its DEBUG lines with --verbose
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kinesis_spout").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("kinesis_spout.kazoo").setLevel(logging.WARNING)  # ZooKeeper's client: each connection

    dead: list[str] = []

    def dead_letter(record: Record, reason: str) -> None:
        dead.append(record.message_id)
        print(f"dead letter {record.message_id} {record.data[:40]!r}: {reason}", flush=True)

    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         endpoint_url=args.endpoint_url, region=args.region, retry_limit=args.retry_limit,
                         initial_position=InitialPosition.TRIM_HORIZON, scheme=TextScheme(), dead_letter=dead_letter)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + args.seconds
    with KinesisSpout(config) as spout:
        while not stop.is_set() and time.monotonic() < deadline:
            for tup in spout.next_batch(max_records=500, timeout_s=1.0):
                _partition_key, sentence = tup.values
                if is_bad(sentence):           # 1. check: a bad record is failed before it touches the counts
                    spout.fail(tup.message_id)
                    continue
                counts.update(sentence.split())  # 2. write
                spout.ack(tup.message_id)        # 3. ack: may advance the shard's checkpoint
    print(f"dead-lettered: {len(dead)}")
    for word, n in counts.most_common(args.top):
        print(f"{word:<12} {n}")


if __name__ == "__main__":
    main()
