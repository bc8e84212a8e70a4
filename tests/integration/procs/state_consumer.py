"""A Spark driver for the exactly-once crash test: a word count into Redis and memcached, two ways at once.

In one local Spark session it runs a ``readStream`` query (foreachBatch: batch_id is the txid) and a
SpoutPipeline in exactly-once mode (its batch log in Redis) over the same stream, under two app names. Each
batch's words, plus one ``#records`` key per record, are counted into several maps, each in its namespace
``{ns}-{engine}-{map}``: readStream into TransactionalMap and OpaqueMap on Redis and on memcached, the pipeline
into OpaqueMap on both; each also into a NonTransactionalMap (written first). The pipeline fails the records
whose data ends in "7" on a batch's first attempt, so those batches are processed twice under one txid.
Progress goes to the log file, one flushed line per step: ``{engine} {txid} begin|wrote {map}|end``, which
the test uses to SIGKILL the process during and after state writes. It exits with code 0 once both engines
counted ``--records`` records in each of their exactly-once maps.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from pyspark.sql import functions as F

from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.spark.source import KinesisSpoutDataSource
from kinesis_spout.state import Count, NonTransactionalMap, OpaqueMap, TransactionalMap, persistent_aggregate, tx_batch
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap
from kinesis_spout.testing.spark import local_spark_session

MAPS = {  # engine -> (name, map kind, backend), in the order they are written
    "stream": [("nt-redis", NonTransactionalMap, "redis"), ("tx-redis", TransactionalMap, "redis"),
               ("op-redis", OpaqueMap, "redis"), ("tx-mc", TransactionalMap, "mc"), ("op-mc", OpaqueMap, "mc")],
    "pipeline": [("nt-redis", NonTransactionalMap, "redis"), ("op-redis", OpaqueMap, "redis"),
                 ("op-mc", OpaqueMap, "mc")],
}


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("stream", "endpoint-url", "zookeeper", "prefix", "redis", "memcached", "ns", "checkpoint-location",
                 "log"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--records", type=int, required=True)
    args = p.parse_args()

    def backing(kind: str, namespace: str) -> Any:
        if kind == "redis":
            return RedisBackingMap.factory(args.redis, namespace=namespace)
        return MemcachedBackingMap.factory(args.memcached, namespace=namespace)

    factories = {engine: [(name, cls.factory(backing(kind, f"{args.ns}-{engine}-{name}")))
                          for name, cls, kind in maps] for engine, maps in MAPS.items()}
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            log.write(line + "\n")
            log.flush()

    def count_words(engine: str, df: Any, batch: Any) -> None:
        txid = tx_batch(batch).txid
        words = df.select(F.explode(F.split(F.col("data").cast("string"), " ")).alias("word"))
        keys = words.unionByName(df.select(F.lit("#records").alias("word")))
        say(f"{engine} {txid} begin {time.monotonic():.2f}")
        for name, factory in factories[engine]:
            persistent_aggregate(keys, batch, factory, group_by=["word"], aggregator=Count(), partitions=1)
            say(f"{engine} {txid} wrote {name}")
        say(f"{engine} {txid} end")

    def counted(engine: str) -> int:
        """The fewest records any exactly-once map of ``engine`` counted."""
        least = args.records
        for name, factory in factories[engine]:
            if name.startswith("nt-"):
                continue
            state = factory.make_state()
            try:
                least = min(least, state.multi_get([("#records",)])[0] or 0)
            finally:
                state.close()
        return least

    spark = local_spark_session("kinesis-spout-state-crash")
    spark.dataSource.register(KinesisSpoutDataSource)
    df = (spark.readStream.format("kinesis_spout")
          .option("streamName", args.stream).option("appName", "state-crash-stream")
          .option("zookeeper", args.zookeeper).option("zookeeperPrefix", args.prefix)
          .option("endpointUrl", args.endpoint_url).option("region", "us-east-1")
          .option("initialPosition", "TRIM_HORIZON").option("emptyRecordBackoffS", "0.2")
          .option("maxRecordsPerTrigger", "200").load())
    query = (df.writeStream.foreachBatch(lambda frame, batch_id: count_words("stream", frame, batch_id))
             .option("checkpointLocation", args.checkpoint_location).start())

    def process(frame: Any, batch: Any) -> list[str]:
        count_words("pipeline", frame, batch)
        if batch.attempt > 1:
            return []
        rows = frame.select("message_id", "data").collect()
        return [r.message_id for r in rows if bytes(r.data).endswith(b"7")]

    config = SpoutConfig(stream_name=args.stream, app_name="state-crash-pipeline", zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.2,
                         empty_record_backoff_s=0.2, retry_backoff=RetryBackoff(initial_s=0.01, max_s=0.05))
    pipeline = SpoutPipeline(spark, config, process, trigger_interval_s=0.0, max_batch_records=200,
                             exactly_once=RedisBackingMap.factory(args.redis, namespace=f"{args.ns}-pipeline-log"))

    def done() -> bool:
        if query.exception() is not None:
            raise RuntimeError(f"the readStream query failed: {query.exception()}")
        return counted("pipeline") >= args.records and counted("stream") >= args.records

    try:
        pipeline.run(until=done)
    finally:
        query.stop()
        log.close()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
