"""``kinesis-spout status`` shows how far each shard's checkpoint is behind the shard's newest record: one
``GetRecords(Limit=1)`` at the checkpoint (moto computes MillisBehindLatest from its records' arrival times)."""

from __future__ import annotations

import time
from typing import Any

from kinesis_spout import Checkpoint, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.cli import main
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until


def test_status_shows_millis_behind_latest_at_each_checkpoint(moto_kinesis: KinesisEndpoint, zookeeper: Any,
                                                              capsys: Any) -> None:
    client = moto_kinesis.client()
    stream = moto_kinesis.create_stream(shards=3)
    lagging, caught_up, unread = moto_kinesis.shard_ids(stream)
    key = {s["ShardId"]: s["HashKeyRange"]["StartingHashKey"] for s in client.list_shards(StreamName=stream)["Shards"]}

    def put(shard: str) -> str:
        return str(client.put_record(StreamName=stream, Data=b"x", PartitionKey="pk",
                                     ExplicitHashKey=key[shard])["SequenceNumber"])

    done = put(lagging)
    put(lagging)  # the first record after the checkpoint
    began = time.time()
    assert wait_until(lambda: time.time() - began >= 0.3, 5, interval_s=0.01)  # the newest record arrives later
    put(lagging)
    store = ZooKeeperCheckpointStore.from_config(SpoutConfig(stream_name=stream, app_name="etl",
                                                             zookeeper=zookeeper.hosts,
                                                             zookeeper_prefix=zookeeper.prefix))
    store.open()
    try:
        store.save(Checkpoint(lagging, done))  # the next record arrived 0.3 s before the newest
        store.save(Checkpoint(caught_up, put(caught_up)))  # at its newest record
    finally:
        store.close()
    assert main(["status", "--stream", stream, "--app", "etl", "--zookeeper", zookeeper.hosts, "--prefix",
                 zookeeper.prefix, "--endpoint-url", moto_kinesis.endpoint_url, "--region", moto_kinesis.region]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("shardId")}
    millis = int(rows[lagging].split()[-2])
    assert 300 <= millis < 60_000 and rows[lagging].endswith(" ms"), rows[lagging]
    assert rows[caught_up].endswith("  0 ms") and rows[unread].endswith("  -"), rows
