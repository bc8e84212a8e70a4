"""A Spark driver for the pipeline crash test: a SpoutPipeline with ZooKeeper checkpoints on a local[2] session.

process() appends one line per record, ``message_id attempt batch_id pid``, to the log file and flushes it
before returning (so before the records are acked), and fails every record whose data ends in "7" on its first
attempt, by returning their message ids. The driver exits cleanly once every shard's safe checkpoint reached the
sequence number given in ``--expect`` (a JSON object shard -> last sequence number), or on SIGINT/SIGTERM.
The crash test SIGKILLs it at random moments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig
from kinesis_spout.spark import Batch, SpoutPipeline
from kinesis_spout.testing.spark import local_spark_session


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--expect", required=True, help="JSON: shard id -> last sequence number")
    args = p.parse_args()
    expect: dict[str, str] = json.loads(args.expect)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    spark = local_spark_session("kinesis-spout-crash")
    pid = os.getpid()
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process

    def record_and_fail_sevens(df: Any, batch: Batch) -> list[str]:
        rows = df.select("message_id", "attempt", "data").collect()  # one Spark job per batch
        log.write("".join(f"{r.message_id} {r.attempt} {batch.id} {pid}\n" for r in rows))
        log.flush()
        return [r.message_id for r in rows if r.attempt == 1 and bytes(r.data).endswith(b"7")]

    config = SpoutConfig(stream_name=args.stream, app_name="spark-crash", zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         coordination="static",  # restarted at once after a SIGKILL (a lease waits out the session)
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.2,
                         empty_record_backoff_s=0.2, max_records_per_call=50,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.1))
    pipeline = SpoutPipeline(spark, config, record_and_fail_sevens, trigger_interval_s=0.1, max_batch_records=50)

    def caught_up() -> bool:
        shards = pipeline.metrics.shards
        return bool(shards) and all(s.checkpoint == expect.get(s.shard_id) and not s.inflight for s in shards)

    try:
        pipeline.run(until=caught_up)
    finally:
        log.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
