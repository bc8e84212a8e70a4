"""The lease assignment rule, exactly: the extra shards go to the workers holding the most, the free ones to the
worker furthest below its quota, and a plan's ``wait`` lists only this worker's shards. Written against mutants the
other tests let survive (see benchmarks/results/mutation.md)."""

from __future__ import annotations

from kinesis_spout.coordination.assignment import Plan, assign, plan

SHARDS = [f"shardId-{i:012d}" for i in range(4)]


def test_an_uneven_split_keeps_every_shard_where_it_is() -> None:
    owners = {SHARDS[0]: "a", SHARDS[1]: "z", SHARDS[2]: "z"}
    assert assign(SHARDS[:3], ["a", "z"], owners) == owners  # z holds two: the extra shard is z's


def test_the_extra_shards_go_to_the_workers_holding_the_most_ties_by_id() -> None:
    owners = {SHARDS[0]: "z", SHARDS[1]: "z", SHARDS[2]: "m", SHARDS[3]: "m"}
    target = assign(SHARDS, ["a", "m", "z"], owners)
    # 4 shards, 3 workers: one has 2; m and z hold 2 each, the tie goes to m; z gives its second shard to a
    assert target == {SHARDS[0]: "z", SHARDS[1]: "a", SHARDS[2]: "m", SHARDS[3]: "m"}


def test_free_shards_fill_the_worker_furthest_below_its_quota_first() -> None:
    owners = {SHARDS[0]: "z"}
    target = assign(SHARDS, ["b", "z"], owners)
    assert target == {SHARDS[0]: "z", SHARDS[1]: "b", SHARDS[2]: "b", SHARDS[3]: "z"}


def test_with_nothing_held_the_extra_shard_goes_to_the_first_worker_by_id() -> None:
    assert assign(SHARDS[:3], ["b", "a"], {}) == {SHARDS[0]: "a", SHARDS[1]: "a", SHARDS[2]: "b"}


def test_wait_lists_the_shards_assigned_here_that_a_live_worker_still_owns() -> None:
    owners = {SHARDS[0]: "a", SHARDS[1]: "a", SHARDS[2]: "a"}
    step = plan("b", SHARDS, ["a", "b"], owners, held=[])
    assert step == Plan(take=[SHARDS[3]], release=[], wait=[SHARDS[2]])
    assert plan("a", SHARDS, ["a", "b"], owners, held=SHARDS[:3]) == Plan(take=[], release=[SHARDS[2]], wait=[])
