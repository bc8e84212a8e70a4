"""A Spark driver for the source's crash test: a ``kinesis_spout`` streaming query with a Spark checkpoint location.

Its foreachBatch sink appends one line per record, ``message_id batch_id pid``, to the log file and flushes it
before the batch ends (so before Spark commits the batch). The query runs with ``Trigger.AvailableNow`` and small
batches: it reads every record present when it starts, then exits with code 0. The crash test SIGKILLs it
mid-run and starts it again with the same checkpoint location.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from kinesis_spout.spark.source import KinesisSpoutDataSource
from kinesis_spout.testing.spark import local_spark_session


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--app", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--checkpoint-location", required=True)
    p.add_argument("--max-records-per-trigger", default="25")
    p.add_argument("--read-mode", default="driver")
    args = p.parse_args()

    spark = local_spark_session("kinesis-spout-source-crash")
    spark.dataSource.register(KinesisSpoutDataSource)
    pid = os.getpid()
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process

    def append_ids(df: Any, batch_id: int) -> None:
        rows = df.select("message_id").collect()
        log.write("".join(f"{r.message_id} {batch_id} {pid}\n" for r in rows))
        log.flush()

    df = (spark.readStream.format("kinesis_spout")
          .option("streamName", args.stream).option("appName", args.app)
          .option("zookeeper", args.zookeeper).option("zookeeperPrefix", args.prefix)
          .option("endpointUrl", args.endpoint_url).option("region", "us-east-1")
          .option("initialPosition", "TRIM_HORIZON").option("checkpointIntervalS", "0")
          .option("emptyRecordBackoffS", "0.2")
          .option("maxRecordsPerTrigger", args.max_records_per_trigger)
          .option("readMode", args.read_mode)
          .load())
    query = (df.writeStream.foreachBatch(append_ids)
             .option("checkpointLocation", args.checkpoint_location)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    log.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
