"""Aggregating write tasks of one process share the stream's shard map: the first task lists the shards, the next
ones start from the map it ended with (no listing); after a split the next task, holding the old map, lists again
once and every user record still ends up in a shard that serves it."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.spark.sink import parse_sink_options
from kinesis_spout.spark.sink.columns import Columns
from kinesis_spout.spark.sink.task import write_task
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream

from .support import user_records_in_range

COLUMNS = Columns("data", True, "partitionKey", None)


def rows(first: int, n: int) -> pa.RecordBatch:
    ids = [str(i) for i in range(first, first + n)]
    return pa.RecordBatch.from_arrays([pa.array([f"pk-{i}" for i in ids]), pa.array(ids)],
                                      names=["partitionKey", "data"])


def test_tasks_of_a_process_list_a_streams_shards_once_and_again_only_after_a_reshard(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        options = parse_sink_options({"streamName": stream, "endpointUrl": proxy.endpoint_url,
                                      "aggregate": "true"})
        client = make_client("us-east-1", proxy.endpoint_url)
        for task in range(3):
            counts = write_task([rows(task * 100, 100)], options, COLUMNS, client, f"task {task}")
            assert counts.user_records == 100 and counts.map_refreshes == 0
        assert proxy.calls["ListShards"] == 1, "the first task listed the shards, the next ones reused its map"

        admin = kinesalite.client()
        admin.split_shard(StreamName=stream, ShardToSplit=kinesalite.shard_ids(stream)[0],
                          NewStartingHashKey=str(2 ** 126))
        wait_for_stream(admin, stream)
        counts = write_task([rows(300, 200)], options, COLUMNS, client, "task 3")
        assert counts.user_records == 200 and counts.map_refreshes == 1
        counts = write_task([rows(500, 100)], options, COLUMNS, client, "task 4")
        assert counts.map_refreshes == 0, "the next task starts from the fresh map"
        assert proxy.calls["ListShards"] == 2
    delivered = Counter(u.data.decode() for _, u in user_records_in_range(kinesalite, stream))
    assert delivered == Counter(str(i) for i in range(600)), "every user record once in a shard that serves it"
