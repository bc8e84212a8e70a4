"""A static KinesisSpout consumer (ZooKeeper checkpoints, ``coordination="static"``: it owns every shard, and a
new consumer takes over at once after a SIGKILL): delivers, logs (fsynced), then acks.

    python -m benchmarks.soak.children.spout_consumer --stream S --endpoint-url URL --zookeeper HOSTS \
        --prefix P --app A --log FILE [--session-timeout 4]

Runs until SIGTERM (then closes the spout: checkpoints flushed).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from benchmarks.soak.ledger import append_ids
from kinesis_spout import InitialPosition, KinesisSpout, RetryBackoff, SpoutConfig


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("stream", "endpoint-url", "zookeeper", "prefix", "app", "log"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--session-timeout", type=float, default=4.0)
    args = p.parse_args()
    pid = str(os.getpid())
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         zookeeper_session_timeout_s=args.session_timeout, coordination="static",
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.2,
                         empty_record_backoff_s=0.2, max_records_per_call=100, max_inflight_records=200,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.2))
    with KinesisSpout(config) as spout, open(args.log, "a") as log:
        while not stop:
            batch = spout.next_batch(max_records=100, timeout_s=0.2)
            append_ids(log, (t.message_id for t in batch), pid)
            spout.ack_many(t.message_id for t in batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
