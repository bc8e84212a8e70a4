"""What the exactly-once ownership tests share: a stream of words counted into a TransactionalMap on Redis beside
its batch log (:class:`Fixture`), and a pipeline run in a thread of its own (:class:`Runner`). Who calls:
test_exactly_once_ownership.py and test_exactly_once_takeover.py."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.state import Count, TransactionalMap, persistent_aggregate
from kinesis_spout.state.redis import RedisBackingMap
from kinesis_spout.testing.zkproxy import ZooKeeperFaultProxy

RECORDS = 120
WORDS = [f"w{i % 5}" for i in range(RECORDS)]
EXPECTED = dict(Counter(WORDS))


class Fixture:
    """One stream with RECORDS words, a TransactionalMap of counts and a batch log, both on Redis."""

    def __init__(self, kinesalite: Any, zookeeper: Any, redis: Any) -> None:
        self.stream = kinesalite.create_stream(shards=2)
        kinesalite.put(self.stream, [w.encode() for w in WORDS])
        self.kinesalite = kinesalite
        self.zookeeper = zookeeper
        self.redis_url = redis.url
        self.ns = f"own-{uuid.uuid4().hex[:10]}"
        self.counts = TransactionalMap.factory(RedisBackingMap.factory(redis.url, namespace=self.ns))
        self.log_map = RedisBackingMap.factory(redis.url, namespace=f"{self.ns}-log")

    def config(self, **overrides: Any) -> SpoutConfig:
        options: dict[str, Any] = dict(
            stream_name=self.stream, app_name="owned", zookeeper=self.zookeeper.hosts,
            zookeeper_prefix=self.zookeeper.prefix, endpoint_url=self.kinesalite.endpoint_url, region="us-east-1",
            initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.1,
            zookeeper_session_timeout_s=2.0, retry_backoff=RetryBackoff(initial_s=0.01, max_s=0.05))
        options.update(overrides)
        return SpoutConfig(**options)

    @property
    def owner_node(self) -> str:
        """The exactly-once pipeline's ownership node of this stream."""
        return f"{self.zookeeper.prefix}/owned/{self.stream}/exactly_once_owner"

    def behind(self, spark: Any, proxy: ZooKeeperFaultProxy, process: Any, **overrides: Any
               ) -> tuple[ZooKeeperCheckpointStore, SpoutPipeline]:
        """An exactly-once pipeline (batches of 20) whose ZooKeeper goes through ``proxy`` (deadline 5 s), with the
        checkpoint store it runs on, to watch its session."""
        cfg = self.config(zookeeper=proxy.hosts, zookeeper_deadline_s=5.0, **overrides)
        store = ZooKeeperCheckpointStore.from_config(cfg)
        return store, SpoutPipeline(spark, cfg, process, trigger_interval_s=0.0, max_batch_records=20,
                                    exactly_once=self.log_map, checkpoint_store=store)

    def restart_counts_everything(self, spark: Any) -> None:
        """A new pipeline of the app resumes the batch log (replaying an open txid) and counts every record once."""
        restarted = SpoutPipeline(spark, self.config(), self.count, trigger_interval_s=0.0, max_batch_records=20,
                                  exactly_once=self.log_map)
        restarted.run(until=self.all_counted, timeout_s=90)
        assert self.counted() == EXPECTED

    def count(self, df: Any, batch: Any) -> None:
        from pyspark.sql import functions as F

        persistent_aggregate(df.select(F.col("data").cast("string").alias("word")), batch, self.counts,
                             group_by=["word"], aggregator=Count(), partitions=1)

    def counted(self) -> dict[str, int]:
        state = self.counts.make_state()
        try:
            values = state.multi_get([(w,) for w in sorted(EXPECTED)])
        finally:
            state.close()
        return {w: n for w, n in zip(sorted(EXPECTED), values) if n}

    def all_counted(self) -> bool:
        return sum(self.counted().values()) >= RECORDS

    def stored(self) -> dict[bytes, bytes]:
        """Every key and value of the counts and of the batch log, as Redis holds them."""
        import redis

        client = redis.Redis.from_url(self.redis_url)
        try:
            return {k: client.get(k) for k in client.scan_iter(match=f"{self.ns}*")}
        finally:
            client.close()


class Runner(threading.Thread):
    """``pipeline.run(**kwargs)`` in a thread; keeps what it returned or raised."""

    def __init__(self, pipeline: SpoutPipeline, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.pipeline = pipeline
        self.kwargs = kwargs
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.pipeline.run(**self.kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def result(self, timeout_s: float) -> BaseException | None:
        self.join(timeout_s)
        assert not self.is_alive(), f"run() did not end within {timeout_s} s"
        return self.error
