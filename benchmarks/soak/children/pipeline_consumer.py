"""A Spark driver running a SpoutPipeline (ZooKeeper checkpoints) on a ``local[2,4]`` session.

    python -m benchmarks.soak.children.pipeline_consumer --stream S --endpoint-url URL --zookeeper HOSTS \
        --prefix P --app A --log FILE [--session-timeout 4] [--redis URL --namespace NS]

``process(df, batch)`` collects the batch's message ids through a Python worker (``df.rdd.map``, so killing a
Python worker fails a task, which ``local[2,4]`` retries up to 4 times) and appends them to the log, fsynced,
before it returns (so before the records are acked). With ``--redis`` the pipeline runs in exactly-once mode (its
batch log in Redis, namespace ``NS-log``) and also counts each record's key (the second word of its data) into an
OpaqueMap on Redis (namespace ``NS``). Runs until SIGTERM (the pipeline finishes its batch and stops).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from benchmarks.soak.ledger import append_ids
from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig
from kinesis_spout.spark import SpoutPipeline

#: local[2] never retries a failed task; local[2,4] tries each task up to 4 times, as a cluster does
MASTER = "local[2,4]"


def session(app: str) -> Any:
    """A small, quiet Spark session (no UI) that retries failed tasks."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(MASTER).appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def state_factory(redis: str, namespace: str) -> Any:
    """The OpaqueMap on Redis that counts the records of each key (the harness reads it with the same call)."""
    from kinesis_spout.state import OpaqueMap
    from kinesis_spout.state.redis import RedisBackingMap

    return OpaqueMap.factory(RedisBackingMap.factory(redis, namespace=namespace))


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("stream", "endpoint-url", "zookeeper", "prefix", "app", "log"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--session-timeout", type=float, default=4.0)
    p.add_argument("--redis")
    p.add_argument("--namespace", default="soak")
    args = p.parse_args()
    spark = session(args.app)
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process
    pid = str(os.getpid())
    counts = state_factory(args.redis, args.namespace) if args.redis else None

    def process(df: Any, batch: Any) -> list[str]:
        ids = df.select("message_id").rdd.map(lambda r: r.message_id).collect()
        append_ids(log, ids, pid)
        if counts is not None:
            from pyspark.sql import functions as F

            from kinesis_spout.state import Count, persistent_aggregate

            keys = df.select(F.split(F.col("data").cast("string"), " ").getItem(1).alias("key"))
            persistent_aggregate(keys, batch, counts, group_by=["key"], aggregator=Count(), partitions=1)
        return []

    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         zookeeper_session_timeout_s=args.session_timeout,
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.2,
                         empty_record_backoff_s=0.2, max_records_per_call=100,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.2))
    exactly_once = None
    if args.redis:
        from kinesis_spout.state.redis import RedisBackingMap

        exactly_once = RedisBackingMap.factory(args.redis, namespace=f"{args.namespace}-log")
    pipeline = SpoutPipeline(spark, config, process, trigger_interval_s=0.2, max_batch_records=1000,
                             exactly_once=exactly_once)
    try:
        pipeline.run()
    finally:
        log.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
