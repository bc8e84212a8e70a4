"""A Spark driver running one SpoutPipeline with the default coordination, for the test of two pipeline processes
of one app on one stream.

process() appends one line per record, ``message_id batch_id worker_id``, to ``--log`` and flushes it before
returning (so before the records are acked). The driver stops once the file ``--stop`` exists (or after
``--timeout`` seconds).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from kinesis_spout import InitialPosition, SpoutConfig
from kinesis_spout.spark import Batch, SpoutPipeline
from kinesis_spout.testing.spark import local_spark_session


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--app", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    spark = local_spark_session("kinesis-spout-pipeline-worker", cores=1)
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process

    # the configuration both processes run: nothing says how they share the stream
    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         initial_position=InitialPosition.TRIM_HORIZON, zookeeper_session_timeout_s=4.0,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.2)

    def record(df: Any, batch: Batch) -> None:
        log.write("".join(f"{r.message_id} {batch.id} {config.worker_id}\n" for r in df.select("message_id").collect()))
        log.flush()

    pipeline = SpoutPipeline(spark, config, record, trigger_interval_s=0.1, max_batch_records=20)
    pipeline.run(until=lambda: os.path.exists(args.stop), timeout_s=args.timeout)
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
