"""A worker process for the lease tests: a KinesisSpout with coordination="leases" that logs each delivery.

It writes one line per delivered record, ``message_id worker epoch``, before acking it (the epoch is the lease's
at delivery), and one line ``LEASE_LOST shard`` for each checkpoint write refused because the lease moved on.
SIGTERM closes it gracefully (checkpoints written, leases given back); the tests also SIGKILL and SIGSTOP it.
"""

from __future__ import annotations

import argparse
import signal
import sys

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig
from kinesis_spout.errors import LeaseLost


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--session-timeout", type=float, default=4.0)
    args = p.parse_args()

    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    config = SpoutConfig(stream_name=args.stream, app_name="lease-workers", zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         coordination="leases", worker_id=args.worker, zookeeper_session_timeout_s=args.session_timeout,
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.2,
                         empty_record_backoff_s=0.2, shard_sync_interval_s=2.0, max_records_per_call=200)
    with open(args.log, "a", buffering=1) as log:
        def on_conflict(conflict: Exception) -> None:
            if isinstance(conflict, LeaseLost):
                log.write(f"LEASE_LOST {conflict.shard_id}\n")

        with KinesisSpout(config, on_checkpoint_conflict=on_conflict) as spout:
            while not stop:
                batch = spout.next_batch(max_records=100, timeout_s=0.2)
                epochs = spout.lease_epochs()
                for tup in batch:
                    log.write(f"{tup.message_id} {args.worker} {epochs.get(tup.record.shard_id, -1)}\n")
                spout.ack_many(t.message_id for t in batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
