"""``readMode=executors`` with tasks of several shards (``shardsPerTask``): a task records its shards' ends in one
node, every attempt yields exactly the records up to them, and a replay groups the shards as the batch's offset says,
whatever the option says now. The stream reader driven as Spark drives it, without a session, on kinesalite and a
real ZooKeeper."""

from __future__ import annotations

import pickle
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable

from kinesis_spout.spark.source import ExecutorStreamReader, ShardsTask
from kinesis_spout.spark.source.executor_batches import PlannedBatch
from kinesis_spout.testing.kinesis import KinesisEndpoint, keys_on

from .support import executor_options, message_ids, read_partition


def put_each(kinesalite: KinesisEndpoint, stream: str, shards: list[str], prefix: str, n: int
             ) -> list[tuple[str, str]]:
    client = kinesalite.client()
    keys = [k for s in shards for k in keys_on(client, stream, s, n)]
    return kinesalite.put(stream, [f"{prefix}-{i}".encode() for i in range(len(keys))], keys)


def test_a_replay_reads_the_tasks_its_offset_planned_whatever_shards_per_task_says_now(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=4)
    shards = kinesalite.shard_ids(stream)
    first = put_each(kinesalite, stream, shards, "first", 3)
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream, shardsPerTask="2"))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert PlannedBatch.parse(end).shards_per_task == 2
    parts = reader.partitions(start, end)
    assert [p.shard_ids for p in parts if isinstance(p, ShardsTask)] == [shards[:2], shards[2:]]
    rows = [read_partition(reader, p) for p in parts]
    assert sorted(m for r in rows for m in r) == sorted(message_ids(first))
    later = put_each(kinesalite, stream, shards, "later", 2)  # every shard has more now
    # a retry of each task (a process with no clients) yields what the first attempt recorded, not the new records
    retry = pickle.loads(pickle.dumps(reader))
    assert [read_partition(retry, p) for p in parts] == rows
    # the query restarts with another shardsPerTask and replays the batch from its offset log: the same two tasks
    restarted = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream, shardsPerTask="4"))
    replayed = restarted.partitions(start, end)
    assert [read_partition(restarted, p) for p in replayed] == rows
    restarted.commit(end)
    following = restarted.latestOffset(end, ReadAllAvailable())
    assert PlannedBatch.parse(following).shards_per_task == 4  # new batches follow the option
    rest = [m for p in restarted.partitions(end, following) for m in read_partition(restarted, p)]
    assert sorted(rest) == sorted(message_ids(later)), "records lost or read twice across the replay"
    for r in (reader, retry, restarted):
        r.stop()
