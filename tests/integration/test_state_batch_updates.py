"""Every update of a batch counts, on every backend (memory, Redis, memcached; with and without the LRU cache):
Storm's StateTest, row-by-row updaters, replays by new map instances, keys two partitions update, runs."""

from __future__ import annotations

import uuid

import pytest

from kinesis_spout.state import (
    CachedMap,
    MemoryBackingMap,
    OpaqueMap,
    StatePartitionError,
    StateRunError,
    TransactionalMap,
)
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap

MAPS = [TransactionalMap, OpaqueMap]


@pytest.fixture(params=["memory", "redis", "memcached", "memory+cache", "redis+cache", "memcached+cache"])
def make(request: pytest.FixtureRequest):
    """A function making backing maps of one fresh namespace on the backend of the parameter."""
    backend, _, cache = request.param.partition("+")
    namespace = f"t-{uuid.uuid4().hex[:12]}"
    made = []

    def make():
        if backend == "memory":
            backing = MemoryBackingMap(namespace)
        elif backend == "redis":
            backing = RedisBackingMap(request.getfixturevalue("redis").url, namespace=namespace)
        else:
            backing = MemcachedBackingMap(request.getfixturevalue("memcached").server, namespace=namespace)
        made.append(backing)
        return CachedMap(backing, 8) if cache else backing

    yield make
    for backing in made:
        backing.close()
    MemoryBackingMap.drop(namespace)


def plus(n):
    return lambda stored: (stored or 0) + n


def stored(cls, make, *keys):
    return cls(make()).multi_get([(k,) for k in keys or ("k",)])


@pytest.mark.parametrize("cls", MAPS)
def test_storm_state_test_two_updates_in_one_txid_hold_their_sum(cls, make) -> None:
    state = cls(make())
    state.begin_commit(1)
    state.multi_update([("k",)], [plus(1)])
    assert state.multi_update([("k",)], [plus(2)]) == [3]
    state.commit(1)
    assert stored(cls, make) == [3]
    state.begin_commit(2)
    state.multi_update([("k",)], [plus(4)])
    state.commit(2)
    assert stored(cls, make) == [7]


@pytest.mark.parametrize("cls", MAPS)
def test_row_by_row_updates_and_their_replay_by_a_new_instance_count_once(cls, make) -> None:
    """Rows a, a, a, b updated row by row; then the same batch by a retried task (a new map instance)."""
    for _ in range(2):
        state = cls(make())
        state.begin_commit(1)
        for word in "aaab":
            state.multi_update([(word,)], [plus(1)])
        state.commit(1)
        assert stored(cls, make, "a", "b") == [3, 1]


@pytest.mark.parametrize("cls", MAPS)
def test_a_task_that_dies_before_its_commit_leaves_nothing_to_skip(cls, make) -> None:
    state = cls(make())
    state.begin_commit(1)
    state.multi_update([("k",), ("k",)], [plus(1), plus(2)])
    state.close()  # the task dies before its commit
    assert stored(cls, make) == [None]
    retry = cls(make())
    retry.begin_commit(1)
    retry.multi_update([("k",), ("k",)], [plus(1), plus(2)])
    retry.commit(1)
    assert stored(cls, make) == [3]


def test_two_partitions_of_one_write_opaque_adds_transactional_refuses(make) -> None:
    for part in (0, 1):
        state = OpaqueMap(make())
        state.begin_commit(1, writer=("w1", part))
        state.multi_update([("k",)], [plus(1 + part)])
        state.commit(1)
    assert stored(OpaqueMap, make) == [3]
    first = TransactionalMap(make())
    first.begin_commit(1, writer=("w1", 0))
    first.multi_update([("t",)], [plus(1)])
    first.commit(1)
    second = TransactionalMap(make())
    second.begin_commit(1, writer=("w1", 1))
    with pytest.raises(StatePartitionError, match="partitions 0 and 1"):
        second.multi_update([("t",)], [plus(2)])


@pytest.mark.parametrize("cls", MAPS)
def test_another_runs_equal_txid_is_refused(cls, make) -> None:
    state = cls(make())
    state.begin_commit(0, run="query:A")
    state.multi_update([("k",)], [plus(1)])
    state.commit(0)
    other = cls(make())
    other.begin_commit(0, run="query:B")
    with pytest.raises(StateRunError, match="checkpointLocation"):
        other.multi_update([("k",)], [plus(1)])
    assert stored(cls, make) == [1]
