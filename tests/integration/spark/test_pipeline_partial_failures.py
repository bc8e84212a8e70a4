"""SpoutPipeline on a batch whose process() fails some of its records by name: exactly those come back (at attempt
2), every other record of the batch is acked with it and never delivered again, and the checkpoints reach the end.

Real servers: moto's Kinesis, ZooKeeper, the shared local[2] SparkSession.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.spark import Batch, SpoutPipeline
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until


def stored_checkpoints(config: SpoutConfig) -> dict[str, str | None]:
    """The checkpoints in ZooKeeper, read through a store of our own."""
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        return {s: cp.sequence_number for s, cp in store.list().items()}
    finally:
        store.close()


def test_a_batch_with_failed_records_fails_exactly_those_and_acks_the_rest(
        spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    """One shard and one PutRecords: the first batch holds all twelve records, the two that process() fails among
    them. Those two, and only those, are delivered again (attempt 2, then acked); the ten others are acked with the
    first batch."""
    stream = moto_kinesis.create_stream(shards=1)
    texts = [f"record-{i}" for i in range(12)]
    placed = moto_kinesis.put(stream, texts)
    bad = {f"{shard}:{seq}" for (shard, seq), text in zip(placed, texts) if text in ("record-3", "record-8")}
    config = SpoutConfig(stream_name=stream, app_name="partial-failures", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=moto_kinesis.endpoint_url,
                         region=moto_kinesis.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, retry_limit=3,
                         retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    deliveries: dict[str, list[int]] = defaultdict(list)
    batches: list[int] = []
    lock = threading.Lock()

    def process(df: Any, batch: Batch) -> list[str]:
        rows = df.select("message_id", "attempt").collect()
        with lock:
            batches.append(len(rows))
            for row in rows:
                deliveries[row.message_id].append(row.attempt)
        return [row.message_id for row in rows if row.message_id in bad and row.attempt == 1]

    def done() -> bool:
        with lock:
            return len(deliveries) == 12 and all(len(deliveries[mid]) == 2 for mid in bad)

    metrics = SpoutPipeline(spark, config, process, trigger_interval_s=0.0).run(until=done, timeout_s=45)

    assert batches[0] == 12, "the first batch holds every record put"
    assert {mid: a for mid, a in deliveries.items() if mid in bad} == {mid: [1, 2] for mid in bad}
    assert all(a == [1] for mid, a in deliveries.items() if mid not in bad), "a record acked came back"
    assert (metrics.records, metrics.failed, metrics.acked, metrics.dead_lettered) == (14, 2, 12, 0)
    last = {shard: seq for shard, seq in placed if int(seq) == max(int(s) for _, s in placed)}
    assert wait_until(lambda: stored_checkpoints(config) == last, 30)
