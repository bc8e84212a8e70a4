"""Tasks of several shards in ``readMode=executors``: how a planned batch groups its shards (a pure function of its
offset) and the ends a batch node holds (a task's several, or one shard's)."""

from __future__ import annotations

import pytest

from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import TRIM_HORIZON, Position, after
from kinesis_spout.spark.source.executor_batches import PlannedBatch, ShardEnd, encode_ends, recorded_ends


def planned(shards: int, per_task: int, **more: object) -> PlannedBatch:
    starts = {f"shardId-{i:012d}": TRIM_HORIZON for i in range(shards)}
    return PlannedBatch("q", 3, starts, shards_per_task=per_task, **more)  # type: ignore[arg-type]


def test_shards_are_cut_in_order_into_the_fewest_tasks_of_even_sizes() -> None:
    groups = planned(70, 32).task_groups()
    assert [len(members) for _, members in groups] == [24, 23, 23]
    assert [node for node, _ in groups] == ["task-0", "task-1", "task-2"]
    assert [s for _, members in groups for s in members] == planned(70, 32).tasks()
    assert [len(m) for _, m in planned(4, 32).task_groups()] == [4]
    assert planned(0, 32).task_groups() == []


def test_one_shard_per_task_names_each_node_after_its_shard_and_idle_or_ended_shards_get_no_task() -> None:
    batch = planned(3, 1, idle=frozenset({"shardId-000000000001"}))
    assert batch.task_groups() == [("shardId-000000000000", ["shardId-000000000000"]),
                                   ("shardId-000000000002", ["shardId-000000000002"])]
    ended = PlannedBatch("q", 0, {"a": TRIM_HORIZON.finished(), "b": TRIM_HORIZON}, shards_per_task=8)
    assert ended.task_groups() == [("task-0", ["b"])]


def test_the_grouping_travels_in_the_offset_and_an_offset_without_it_is_a_task_per_shard() -> None:
    batch = planned(5, 2)
    again = PlannedBatch.parse(batch.encode())
    assert again.shards_per_task == 2 and again.task_groups() == batch.task_groups()
    old = batch.encode()
    del old["shardsPerTask"]
    assert PlannedBatch.parse(old).shards_per_task == 1
    assert "shardsPerTask" not in planned(5, 1).encode()
    with pytest.raises(CheckpointError, match="shardsPerTask 0 is below 1"):
        PlannedBatch.parse({**batch.encode(), "shardsPerTask": 0})


def test_a_node_holds_a_task_s_several_ends_or_the_one_end_of_the_shard_it_is_named_after() -> None:
    ends = {"a": ShardEnd(after("100"), 2, at_tip=True), "b": ShardEnd(TRIM_HORIZON)}
    assert recorded_ends("task-0", encode_ends(ends), "/batches/q/3/task-0") == ends
    one = ShardEnd(Position.parse(after("7").encode()), 1)
    assert recorded_ends("a", one.to_json(), "/batches/q/3/a") == {"a": one}
    with pytest.raises(CheckpointError, match="unreadable batch end at ZooKeeper node /batches/q/3/task-1"):
        recorded_ends("task-1", b'{"ends": {"a": {"records": 1}}}', "/batches/q/3/task-1")
