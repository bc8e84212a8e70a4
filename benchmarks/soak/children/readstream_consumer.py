"""A Spark driver running a ``kinesis_spout`` readStream query with a Spark checkpoint location.

    python -m benchmarks.soak.children.readstream_consumer --master M --read-mode driver|executors \
        --stream S --endpoint-url URL --zookeeper HOSTS --prefix P --app A --log FILE --checkpoint-location DIR

Its foreachBatch sink collects the batch's message ids through Python workers (``df.rdd.map``) and appends them to
the log, fsynced, before the batch ends (so before Spark commits it). On a standalone master (``spark://...``) the
executors get small, quick-starting JVMs. Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from benchmarks.soak.ledger import append_ids

CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.executorEnv.AWS_ACCESS_KEY_ID": "test", "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "test",
                "spark.executorEnv.AWS_DEFAULT_REGION": "us-east-1",
                "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("master", "read-mode", "stream", "endpoint-url", "zookeeper", "prefix", "app", "log",
                 "checkpoint-location"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--session-timeout", default="4")
    p.add_argument("--conf", action="append", default=[], help="KEY=VALUE: one more Spark setting (repeatable)")
    args = p.parse_args()
    from pyspark.sql import SparkSession

    from kinesis_spout.spark.source import KinesisSpoutDataSource

    builder = (SparkSession.builder.master(args.master).appName(args.app)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"))
    if args.master.startswith("spark://"):
        for key, value in CLUSTER_CONF.items():
            builder = builder.config(key, value)
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KinesisSpoutDataSource)
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process
    pid = str(os.getpid())

    def sink(df: Any, batch_id: int) -> None:
        ids = df.select("message_id").rdd.map(lambda r: r.message_id).collect()
        append_ids(log, ids, str(batch_id), pid)

    df = (spark.readStream.format("kinesis_spout")
          .option("streamName", args.stream).option("appName", args.app)
          .option("zookeeper", args.zookeeper).option("zookeeperPrefix", args.prefix)
          .option("zookeeperSessionTimeoutS", args.session_timeout)
          .option("endpointUrl", args.endpoint_url).option("region", "us-east-1")
          .option("initialPosition", "TRIM_HORIZON").option("emptyRecordBackoffS", "0.2")
          .option("maxRecordsPerTrigger", "400").option("readMode", args.read_mode).load())
    query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", args.checkpoint_location)
             .trigger(processingTime="500 milliseconds").start())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set():
            if query.awaitTermination(1):  # raises when the query failed
                break
    finally:
        query.stop()
        log.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
