"""Storm's streaming word count on Spark: split sentences read from Kinesis, count the words.

Two ways to feed Spark, same counts:

- ``--engine pipeline`` (default): :class:`~kinesis_spout.spark.SpoutPipeline`, driver-side micro-batches with
  per-record ack/fail. Sentences containing "poison" are failed, so you can watch them retried and then
  dead-lettered.
- ``--engine stream``: ``spark.readStream.format("kinesis_spout")`` with a ``foreachBatch`` sink.

Against your own servers:

    python examples/wordcount.py --stream sentences --zookeeper 127.0.0.1:2181 \\
        --endpoint-url http://127.0.0.1:4566 --seconds 30

With ``--demo`` it starts moto's Kinesis server and a private ZooKeeper, creates a 4-shard stream and produces
sentences while it counts (what ``make demo`` runs). Ctrl-C stops it cleanly: checkpoints are flushed, and the
next run resumes after them.

``--exactly-once redis`` (or ``memcached``) keeps the counts in an OpaqueMap (Trident's opaque state) in Redis
or memcached instead of in memory: a crash and restart never counts a sentence twice. The pipeline engine then
runs SpoutPipeline in exactly-once mode (a transactional spout whose batch log is kept in the same store), and
the stream engine uses foreachBatch's batch id as the txid. In that mode a failed record fails its whole batch,
so poison sentences are skipped rather than failed. ``--state-url`` names your server (``redis://host:port/0``
or ``host:port``); with ``--demo`` a private one is started. Counts are kept under ``--namespace``.

The stream engine keeps Spark's checkpoint in ``--checkpoint-location`` (default: a temporary folder, gone after
the run). With ``--exactly-once`` against your own servers, give it a lasting folder: a query that starts without
its checkpoint numbers its batches from 0 again, and the state refuses it (``StateRunError``) rather than count
anything twice; a new ``--namespace`` starts the counts afresh.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any, Callable

from kinesis_spout import InitialPosition, SpoutConfig
from kinesis_spout.deadletters import LocalDeadLetters

WORDS_COLUMN = "word"


def count_words(df: Any) -> Counter[str]:
    """The Spark part: decode, split, explode, count; the (small) result is collected to the driver."""
    from pyspark.sql import functions as F

    words = df.select(F.explode(F.split(F.decode(F.col("data"), "UTF-8"), " ")).alias("word"))
    return Counter({row["word"]: row["count"] for row in words.groupBy("word").count().collect()})


def words_of(df: Any) -> Any:
    """One row per word of the batch's sentences (column ``word``)."""
    from pyspark.sql import functions as F

    return df.select(F.explode(F.split(F.decode(F.col("data"), "UTF-8"), " ")).alias(WORDS_COLUMN))


class ExactlyOnce:
    """The exactly-once counts: an OpaqueMap over a Redis or memcached backing map (factories only: picklable)."""

    def __init__(self, backend: str, url: str, namespace: str) -> None:
        from kinesis_spout.state import OpaqueMap
        from kinesis_spout.state.memcached import MemcachedBackingMap
        from kinesis_spout.state.redis import RedisBackingMap

        self.where = f"{backend} at {url}, namespace {namespace!r}"
        if backend == "redis":
            self.backing: Any = RedisBackingMap.factory(url, namespace=namespace)
            self.log: Any = RedisBackingMap.factory(url, namespace=f"{namespace}-log")
        else:
            self.backing = MemcachedBackingMap.factory(url, namespace=namespace)
            self.log = MemcachedBackingMap.factory(url, namespace=f"{namespace}-log")
        self.counts = OpaqueMap.factory(self.backing)

    def update(self, words: Any, batch: Any) -> None:
        from kinesis_spout.state import Count, persistent_aggregate

        persistent_aggregate(words, batch, self.counts, group_by=[WORDS_COLUMN], aggregator=Count())

    def read(self, words: list[str]) -> Counter[str]:
        state = self.counts.make_state()
        try:
            return Counter({w: n for w, n in zip(words, state.multi_get([(w,) for w in words])) if n})
        finally:
            state.close()


def run_pipeline(spark: Any, config: SpoutConfig, totals: Counter[str], processed: list[int],
                 done: Callable[[], bool], exactly: ExactlyOnce | None = None) -> None:
    from pyspark.sql import functions as F

    from kinesis_spout.spark import SpoutPipeline

    if exactly is not None:
        def process_exactly_once(df: Any, batch: Any) -> None:
            good = df.where(~F.decode(F.col("data"), "UTF-8").contains("poison"))  # skipped, not failed
            words = words_of(good)
            exactly.update(words, batch)
            if batch.attempt == 1:
                totals.update({row[WORDS_COLUMN]: 0 for row in words.distinct().collect()})  # the words seen
                processed[0] += batch.records

        SpoutPipeline(spark, config, process_exactly_once, trigger_interval_s=0.5,
                      exactly_once=exactly.log).run(until=done)
        return

    def process(df: Any, batch: Any) -> Any:
        is_poison = F.decode(F.col("data"), "UTF-8").contains("poison")
        totals.update(count_words(df.where(~is_poison)))
        poison = df.where(is_poison).select("message_id", "attempt").collect()
        processed[0] += batch.records - batch.retries  # new records (retries were counted before)
        POISON["failed"] += sum(1 for row in poison if row.attempt == 1)
        return [row.message_id for row in poison]  # these records fail: retried, then dead-lettered

    pipeline = SpoutPipeline(spark, config, process, trigger_interval_s=0.5)

    def dead_lettered_and_done() -> bool:
        POISON["dead_lettered"] = pipeline.metrics.dead_lettered  # written to the dead-letter file
        return done()

    pipeline.run(until=dead_lettered_and_done)


def run_stream(spark: Any, config: SpoutConfig, totals: Counter[str], processed: list[int],
               done: Callable[[], bool], exactly: ExactlyOnce | None = None,
               checkpoint_location: str | None = None) -> None:
    from kinesis_spout.spark import KinesisSpoutDataSource

    spark.dataSource.register(KinesisSpoutDataSource)
    options = {"streamName": config.stream_name, "appName": config.app_name, "zookeeper": config.zookeeper,
               "initialPosition": config.initial_position.value, "region": config.region or "us-east-1"}
    if config.endpoint_url:
        options["endpointUrl"] = config.endpoint_url

    def sink(batch_df: Any, batch_id: int) -> None:
        rows = batch_df.count()
        if exactly is not None:
            words = words_of(batch_df)
            exactly.update(words, batch_id)  # batch_id is a transactional txid
            totals.update({row[WORDS_COLUMN]: 0 for row in words.distinct().collect()})
        else:
            totals.update(count_words(batch_df))
        processed[0] += rows
        logging.getLogger("wordcount").info("stream batch %d: %d records", batch_id, rows)

    with contextlib.ExitStack() as stack:
        spark_checkpoint = checkpoint_location or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="wordcount-checkpoint-"))
        query = (spark.readStream.format("kinesis_spout").options(**options).load()
                 .writeStream.foreachBatch(sink).option("checkpointLocation", spark_checkpoint)
                 .trigger(processingTime="500 milliseconds").start())
        try:
            while query.isActive and not done():
                query.awaitTermination(0.2)
        finally:
            query.stop()


#: Poison sentences failed on their first attempt, and those dead-lettered since (the pipeline's count of letters
#: written to the dead-letter file).
POISON = {"failed": 0, "dead_lettered": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["pipeline", "stream"], default="pipeline")
    parser.add_argument("--stream", default=os.environ.get("KINESIS_SPOUT_STREAM", "sentences"))
    parser.add_argument("--app", default="wordcount")
    parser.add_argument("--zookeeper", default=os.environ.get("KINESIS_SPOUT_ZOOKEEPER"))
    parser.add_argument("--endpoint-url", default=os.environ.get("KINESIS_SPOUT_ENDPOINT_URL"),
                        help="omit for AWS")
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--seconds", type=float, default=15.0, help="how long to run (with --demo: to produce)")
    parser.add_argument("--demo", action="store_true", help="embedded servers and a producer")
    parser.add_argument("--rate", type=int, default=2000, help="--demo: sentences produced per second")
    parser.add_argument("--exactly-once", choices=["redis", "memcached"],
                        help="keep the counts in an OpaqueMap in Redis or memcached (exactly-once)")
    parser.add_argument("--state-url", help="--exactly-once: redis://host:port/0 or host:port of memcached "
                                            "(with --demo a private server is started when omitted)")
    parser.add_argument("--namespace", default="wordcount", help="--exactly-once: the keys' prefix")
    parser.add_argument("--checkpoint-location", help="--engine stream: Spark's checkpoint folder (default: a "
                        "temporary one); keep one across runs with --exactly-once")
    parser.add_argument("--verbose", action="store_true", help="DEBUG lines of the spout and of this example (each "
                                                               "retried read, each shard's lag per batch)")
    args = parser.parse_args(argv)
    if args.exactly_once and not args.state_url and not args.demo:
        parser.error("--exactly-once needs --state-url (or --demo, which starts a private server)")
    # warnings from everything; the pipeline's batch lines and this example's at INFO; --verbose: DEBUG of both
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("kinesis_spout.spark", "wordcount"):
        logging.getLogger(name).setLevel(logging.INFO)
    if args.verbose:
        for name in ("kinesis_spout", "wordcount"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from kinesis_spout.demo import Producer, embedded_servers, use_dummy_credentials_if_none
    from kinesis_spout.testing.spark import local_spark_session

    if args.endpoint_url and not args.demo:
        use_dummy_credentials_if_none()  # an emulator takes any credentials; set before Spark starts its workers

    with contextlib.ExitStack() as stack:
        endpoint, zookeeper = args.endpoint_url, args.zookeeper or "127.0.0.1:2181"
        producer = None
        if args.demo:
            endpoint, zookeeper = stack.enter_context(embedded_servers(args.endpoint_url, args.zookeeper))
            producer = Producer(endpoint, args.region, args.stream, rate=args.rate, shards=4, poison_every=500)
            producer.create_stream()
        config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=zookeeper, endpoint_url=endpoint,
                             region=args.region, initial_position=InitialPosition.TRIM_HORIZON,
                             dead_letter=LocalDeadLetters(), retry_limit=2)
        exactly = None
        if args.exactly_once:
            url = args.state_url
            if url is None:
                from kinesis_spout.testing.memcached import MemcachedServer
                from kinesis_spout.testing.redis import RedisServer

                if args.exactly_once == "redis":
                    url = stack.enter_context(RedisServer()).url
                else:
                    url = stack.enter_context(MemcachedServer()).server
            exactly = ExactlyOnce(args.exactly_once, url, args.namespace)
        print(f"[wordcount] starting Spark (local[2]); engine: {args.engine}"
              f"{'; exactly-once counts in ' + exactly.where if exactly else ''}", flush=True)
        spark = local_spark_session("wordcount")
        stack.callback(spark.stop)
        totals: Counter[str] = Counter()
        processed = [0]
        started = time.monotonic()
        stop = threading.Event()

        def done() -> bool:
            if stop.is_set():
                return True
            if time.monotonic() - started < args.seconds:
                return False
            if producer is None:
                return True
            producer.stop()  # produced for long enough: finish once everything produced was read, and every
            # poison sentence failed so far went through its retries to the dead-letter handler
            return processed[0] >= producer.produced and POISON["dead_lettered"] >= POISON["failed"]

        if producer is not None:
            producer.start()
            stack.callback(producer.stop)
        try:
            if args.engine == "pipeline":
                run_pipeline(spark, config, totals, processed, done, exactly)
            else:
                run_stream(spark, config, totals, processed, done, exactly, args.checkpoint_location)
        except KeyboardInterrupt:
            print("\n[wordcount] interrupted: stopping cleanly")
        elapsed = time.monotonic() - started
        produced = f" of {producer.produced} produced" if producer is not None else ""
        print(f"[wordcount] {processed[0]} sentences{produced} in {elapsed:.1f} s; checkpoints in ZooKeeper at "
              f"{config.checkpoint_path}")
        if exactly is not None:
            totals = exactly.read(sorted(totals))
            print(f"[wordcount] exactly-once counts read back from {exactly.where}")
        if POISON["failed"]:
            letters = LocalDeadLetters().path(config)
            print(f"[wordcount] {POISON['failed']} poison sentences failed, retried {config.retry_limit} times, "
                  f"dead-lettered: {POISON['dead_lettered']}, kept in {letters} (see them: kinesis-spout "
                  f"dead-letters list {letters})")
        print("[wordcount] top words:")
        for word, n in totals.most_common(10):
            print(f"[wordcount]   {word:<10} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
