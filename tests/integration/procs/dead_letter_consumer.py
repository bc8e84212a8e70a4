"""A consumer process for the dead-letter crash test: reads a stream through KinesisSpout (ZooKeeper checkpoints,
JSON scheme) and dead-letters into another Kinesis stream (usually through a fault-injecting proxy) or, with
``--dlq-file``, into a JSON Lines file.

Records that are not JSON are poison records; records whose JSON has "fail" are failed on every attempt, so their
retries run out. Every other record is written to the log file (``message_id attempt``) and then acked. The test
SIGKILLs it at random moments. The last run gets ``--until FILE`` (JSON ``{shard: last sequence number}``) and exits
once every shard's safe checkpoint reached it, which needs every dead letter before it written.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, RetryBackoff, SpoutConfig
from kinesis_spout.deadletters import JsonLinesDeadLetters, KinesisDeadLetters


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--dlq")
    p.add_argument("--dlq-endpoint-url")
    p.add_argument("--dlq-file")
    p.add_argument("--until")
    args = p.parse_args()
    until = {shard: int(seq) for shard, seq in json.loads(Path(args.until).read_text()).items()} if args.until else {}

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    config = SpoutConfig(stream_name=args.stream, app_name="dead-letter-crash", zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         coordination="static",  # restarted at once after a SIGKILL (a lease waits out the session)
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.1,
                         empty_record_backoff_s=0.2, max_records_per_call=100, max_inflight_records=200,
                         scheme=JsonScheme(), retry_limit=1, message_timeout_s=None,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05),
                         dead_letter=JsonLinesDeadLetters(args.dlq_file) if args.dlq_file else
                         KinesisDeadLetters(args.dlq, endpoint_url=args.dlq_endpoint_url, put_attempts=1),
                         dead_letter_deadline_s=3600.0)
    with KinesisSpout(config) as spout, open(args.log, "a", buffering=1) as log:
        def more() -> bool:
            if not until:
                return True  # killed by the test
            return any(int(m.checkpoint or 0) < until[m.shard_id] for m in spout.metrics()) or \
                len(spout.metrics()) < len(until)

        while not stop and more():
            for tup in spout.next_batch(max_records=50, timeout_s=0.2):
                values = tup.values[1]
                if isinstance(values, dict) and values.get("fail"):
                    spout.fail(tup.message_id)
                else:
                    log.write(f"{tup.message_id} {tup.attempt}\n")
                    spout.ack(tup.message_id)
        spout.flush_checkpoints()
    return 0


if __name__ == "__main__":
    sys.exit(main())
