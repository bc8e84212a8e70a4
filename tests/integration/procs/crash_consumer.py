"""A consumer process for the crash tests: reads a stream through KinesisSpout with ZooKeeper checkpoints.

It writes one line per processed record, ``message_id attempt``, to the log file *before* acking it (process,
then ack), fails every record whose data ends in "7" once, and exits cleanly when it has seen ``--total``
distinct records in total across runs and none is in flight, or on SIGTERM. The crash tests SIGKILL it at random
moments. The last run gets ``--until FILE`` (JSON ``{shard: last sequence number}``) and runs until every shard's
safe checkpoint reached it: records seen by a killed run but never checkpointed are read again first.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from kinesis_spout import InitialPosition, KinesisSpout, RetryBackoff, SpoutConfig


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--total", type=int, required=True)
    p.add_argument("--checkpoint-interval", type=float, default=0.2)
    p.add_argument("--until")
    p.add_argument("--app", default="crash")
    p.add_argument("--pause", type=float, default=0.0, help="seconds of 'processing' after each batch")
    p.add_argument("--retrieval", default="polling", help="polling, or fanout (enhanced fan-out)")
    args = p.parse_args()
    until = {shard: int(seq) for shard, seq in json.loads(Path(args.until).read_text()).items()} if args.until else {}

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    seen = set()
    with open(args.log) as log:
        seen.update(line.split()[0] for line in log if line.strip())
    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         coordination="static",  # restarted at once after a SIGKILL (a lease waits out the session)
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=args.checkpoint_interval,
                         empty_record_backoff_s=0.2, max_records_per_call=100, max_inflight_records=200,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.1),
                         retrieval=args.retrieval)
    with KinesisSpout(config) as spout, open(args.log, "a", buffering=1) as log:
        def more() -> bool:
            metrics = spout.metrics()
            if until:  # a checkpoint "SEQ:SUB" stands inside an aggregate: not at the end yet
                return any(":" in (m.checkpoint or "") or int(m.checkpoint or 0) < until[m.shard_id]
                           for m in metrics)
            return len(seen) < args.total or any(m.inflight for m in metrics)

        while not stop and more():
            for tup in spout.next_batch(max_records=50, timeout_s=0.5):
                log.write(f"{tup.message_id} {tup.attempt}\n")
                seen.add(tup.message_id)
                if tup.attempt == 1 and tup.record.data.endswith(b"7"):
                    spout.fail(tup.message_id)
                else:
                    spout.ack(tup.message_id)
            if args.pause:
                time.sleep(args.pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
