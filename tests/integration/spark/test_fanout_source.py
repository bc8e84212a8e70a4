"""The Structured Streaming source reading through enhanced fan-out (option retrieval=fanout) on kinesis-local, in
both read modes: every record once, a replay of a batch (read again with GetRecords between its exact offsets) the
same, batches cut inside KPL aggregates, a task whose shard is still held by another subscription, and Spark
queries under Trigger.AvailableNow."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.consumers import list_consumers
from kinesis_spout.kinesis.retrieval.fanout import Subscription
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.spark.source import ExecutorStreamReader, KinesisSpoutStreamReader
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream

from ..support import aggregate
from .support import (
    APP,
    collecting_sink,
    drive,
    executor_options,
    last_by_shard,
    load,
    message_ids,
    read_partition,
    run_batches,
    source_options,
    stored_checkpoints,
)


def test_fan_out_batches_cover_every_record_once_and_a_replay_reads_the_same(kinesis_local: KinesisEndpoint,
                                                                             zookeeper: Any) -> None:
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"r{i}".encode() for i in range(120)])
    reader = KinesisSpoutStreamReader(source_options(kinesis_local, zookeeper, stream, retrieval="fanout",
                                                     maxRecordsPerTrigger="50"))
    assert reader.getDefaultReadLimit() == ReadMaxRows(50)
    reader.prepareForTriggerAvailableNow()
    try:
        batches, final = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    finally:
        reader.stop()
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    assert final == last_by_shard(placed)
    consumers = list_consumers(make_client(kinesis_local.region, kinesis_local.endpoint_url), stream)
    assert [c.name for c in consumers] == [APP]  # read through the app's consumer
    fresh = pickle.loads(pickle.dumps(reader))
    for start, end, _, ids in batches:
        assert [mid for p in fresh.partitions(start, end) for mid in read_partition(fresh, p)] == ids


def test_fan_out_tasks_on_the_executors_cover_every_record_once_and_replays_read_the_same(
        kinesis_local: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"e{i}".encode() for i in range(60)])
    reader = ExecutorStreamReader(executor_options(kinesis_local, zookeeper, stream, retrieval="fanout",
                                                   maxRecordsPerTrigger="40"))
    reader.prepareForTriggerAvailableNow()
    try:
        batches, final = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    finally:
        reader.stop()
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    assert all(len(ids) <= 40 for *_, ids in batches) and len(batches) >= 2
    assert {s: d["sequence_number"] for s, d in stored_checkpoints(zookeeper, stream).items()} == \
        last_by_shard(placed)
    consumers = list_consumers(make_client(kinesis_local.region, kinesis_local.endpoint_url), stream)
    assert [c.name for c in consumers] == [APP]
    fresh = pickle.loads(pickle.dumps(reader))  # a new process: the tasks find their recorded ends
    try:
        for start, end, ids in batches:
            assert [mid for p in fresh.partitions(start, end) for mid in read_partition(fresh, p)] == ids
    finally:
        fresh.stop()


def test_fan_out_tasks_cut_batches_inside_kpl_aggregates_and_resume_after_the_user_record(
        kinesis_local: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesis_local.create_stream(shards=1)
    users = [(f"user-{i % 5}", f"event {i}".encode()) for i in range(45)]
    placed = kinesis_local.put(stream, [aggregate(users[:20])[1], aggregate(users[20:])[1]],
                               partition_keys=["same"] * 2)
    reader = ExecutorStreamReader(executor_options(kinesis_local, zookeeper, stream, retrieval="fanout",
                                                   maxRecordsPerTrigger="15"))
    reader.prepareForTriggerAvailableNow()
    try:
        batches, _ = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    finally:
        reader.stop()
    shard, (first, second) = placed[0][0], [seq for _, seq in placed]
    expected = [f"{shard}:{first}"] + [f"{shard}:{first}:{i}" for i in range(1, 20)] + \
        [f"{shard}:{second}"] + [f"{shard}:{second}:{i}" for i in range(1, 25)]
    assert [mid for *_, ids in batches for mid in ids] == expected  # every user record once, in order
    assert [len(ids) for *_, ids in batches] == [15, 15, 15]  # the limit counts user records, cut inside both


def test_fan_out_tasks_read_a_split_shard_to_its_end_before_its_children(kinesis_local: KinesisEndpoint,
                                                                         zookeeper: Any) -> None:
    """kinesis-local sends no ChildShards: a task of the closed parent finds its end with GetRecords once caught
    up, and the children are read after it."""
    stream = kinesis_local.create_stream(shards=1)
    client = kinesis_local.client()
    parent = kinesis_local.shard_ids(stream)[0]
    before = kinesis_local.put(stream, [f"p{i}".encode() for i in range(20)])
    reader = ExecutorStreamReader(executor_options(kinesis_local, zookeeper, stream, retrieval="fanout",
                                                   shardSyncIntervalS="0.2"))
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    after = kinesis_local.put(stream, [f"c{i}".encode() for i in range(20)])
    reader.prepareForTriggerAvailableNow()
    try:
        batches, _ = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit(), max_batches=20)
    finally:
        reader.stop()
    order = [mid for *_, ids in batches for mid in ids]
    assert sorted(order) == sorted(message_ids(before + after)) and len(order) == len(set(order))
    last_parent = max(i for i, mid in enumerate(order) if mid.startswith(parent + ":"))
    first_child = min(i for i, mid in enumerate(order) if not mid.startswith(parent + ":"))
    assert last_parent < first_child
    assert stored_checkpoints(zookeeper, stream)[parent]["shard_end"] is True


REFUSED = "another subscription of this consumer still reads the shard"


class ReleaseOnRefusal(logging.Handler):
    """Closes ``holder`` when the task logs that its subscription was refused (the task then tries again)."""

    def __init__(self, holder: Subscription) -> None:
        super().__init__(logging.DEBUG)  # the first refusals of a run are logged at DEBUG
        self.holder = holder
        self.refusals = 0

    def emit(self, record: logging.LogRecord) -> None:
        if REFUSED in record.getMessage():
            self.refusals += 1
            self.holder.close()


def test_a_fan_out_task_waits_for_a_subscription_that_still_holds_its_shard(kinesis_local: KinesisEndpoint,
                                                                           zookeeper: Any,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """Another subscription of the app's consumer holds the shard (a speculative copy, the previous batch's task
    not yet gone): the task's subscribe is refused with ResourceInUseException and tried again until it passes.
    Only a shard that was behind its tip subscribes: the first batch of a new query reads with GetRecords."""
    caplog.set_level(logging.DEBUG, logger="kinesis_spout.kinesis")
    stream = kinesis_local.create_stream(shards=1)
    placed = kinesis_local.put(stream, [f"h{i}".encode() for i in range(20)])
    reader = ExecutorStreamReader(executor_options(kinesis_local, zookeeper, stream, retrieval="fanout",
                                                  maxRecordsPerTrigger="5"))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    first = reader.latestOffset(start, reader.getDefaultReadLimit())
    (task,) = reader.partitions(start, first)
    assert task.parts[0].consumer_arn is None  # a new query's first batch: every shard looked idle, one GetRecords each
    ids = read_partition(reader, task)
    reader.commit(first)
    end = reader.latestOffset(first, reader.getDefaultReadLimit())
    (task,) = reader.partitions(first, end)
    (part,) = task.parts
    assert part.consumer_arn is not None  # stopped at the limit last time: behind its tip, it subscribes
    client = make_client(kinesis_local.region, kinesis_local.endpoint_url)
    holder = Subscription(client, part.consumer_arn, part.shard_id, TRIM_HORIZON, renew_s=60.0,
                          on_pending=lambda: None)
    holder.open()
    refused = ReleaseOnRefusal(holder)  # the holder lets go once the task was refused, not after some time
    logging.getLogger("kinesis_spout.kinesis").addHandler(refused)
    try:
        ids += read_partition(reader, task)
    finally:
        logging.getLogger("kinesis_spout.kinesis").removeHandler(refused)
        holder.close()
        reader.stop()
    assert ids == message_ids(placed)[:10]
    assert refused.refusals >= 1 and REFUSED in caplog.text  # it was refused first


@pytest.mark.slow
@pytest.mark.parametrize("read_mode", ["driver", "executors"])
def test_a_spark_query_reads_through_fan_out(spark: Any, kinesis_local: KinesisEndpoint, zookeeper: Any,
                                            tmp_path: Path, read_mode: str) -> None:
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"spark-{i}".encode() for i in range(60)])
    batches: dict[int, list[dict[str, Any]]] = {}
    df = load(spark, source_options(kinesis_local, zookeeper, stream, retrieval="fanout", readMode=read_mode))
    query = (df.writeStream.foreachBatch(collecting_sink(batches)).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    assert query.awaitTermination(120), "the AvailableNow query did not stop"
    assert query.exception() is None
    rows = [row for batch in batches.values() for row in batch]
    assert sorted(r["message_id"] for r in rows) == sorted(message_ids(placed))
    stored = stored_checkpoints(zookeeper, stream)
    assert {s: d["sequence_number"] for s, d in stored.items()} == last_by_shard(placed)


@pytest.mark.parametrize("read_mode", ["driver", "executors"])
def test_the_connectors_fan_out_options_read_through_the_consumer_they_name(read_mode: str,
                                                                           kinesis_local: KinesisEndpoint,
                                                                           zookeeper: Any) -> None:
    """Users of the AWS connector keep their options: kinesis.consumerType=SubscribeToShard with
    kinesis.consumerName reads through enhanced fan-out, by the consumer of that name, in both read modes."""
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"c{i}".encode() for i in range(30)])
    options = source_options(kinesis_local, zookeeper, stream, readMode=read_mode,
                             **{"kinesis.consumerType": "SubscribeToShard", "kinesis.consumerName": "billing-efo"})
    reader: Any = (KinesisSpoutStreamReader if read_mode == "driver" else ExecutorStreamReader)(options)
    reader.prepareForTriggerAvailableNow()
    try:
        if read_mode == "driver":
            batches, _ = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit())
            got = [mid for *_, ids in batches for mid in ids]
        else:
            steps, _ = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit())
            got = [mid for *_, ids in steps for mid in ids]
    finally:
        reader.stop()
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    consumers = list_consumers(make_client(kinesis_local.region, kinesis_local.endpoint_url), stream)
    assert [c.name for c in consumers] == ["billing-efo"]
