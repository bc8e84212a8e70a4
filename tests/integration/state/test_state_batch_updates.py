"""Every update of a batch counts, on every backend (memory, Redis, memcached; with and without the LRU cache):
Storm's StateTest, row-by-row updaters, replays by new map instances, keys two partitions update, runs."""

from __future__ import annotations

import uuid

import pytest

from kinesis_spout.state import (
    CachedMap,
    MemoryBackingMap,
    OpaqueMap,
    OpaqueValue,
    StateError,
    StatePartitionError,
    StateRunError,
    TransactionalMap,
    TransactionalValue,
)
from kinesis_spout.state.maps import new_call_id
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


def test_a_retry_of_the_first_partition_after_the_second_added_counts_once(make) -> None:
    """Partition 0 writes k, partition 1 adds to it, then partition 0's task is retried: k holds both, once."""
    for part, n in ((0, 1), (1, 2), (0, 1)):
        state = OpaqueMap(make())
        state.begin_commit(1, run="query:q", writer=("w1", part))
        state.multi_update([("k",)], [plus(n)])
        state.commit(1)
    assert stored(OpaqueMap, make) == [3]


def test_a_late_task_of_a_superseded_write_is_refused_and_wipes_nothing(make) -> None:
    """A task of an earlier (aborted) write of txid 1 commits after the replay of txid 1 began: it is refused with a
    retriable error instead of taking the replay's write for an earlier attempt to recompute from ``prev``."""
    seed = OpaqueMap(make())
    seed.begin_commit(0, run="query:q", writer=(new_call_id(), 0))
    seed.multi_update([("k",)], [plus(10)])
    seed.commit(0)
    first, replay = new_call_id(), new_call_id()
    late = OpaqueMap(make())
    late.begin_commit(1, run="query:q", writer=(first, 1))
    late.multi_update([("k",)], [plus(2)])  # the earlier write's task read k, then its job was aborted
    r0 = OpaqueMap(make())
    r0.begin_commit(1, run="query:q", writer=(replay, 0))
    r0.multi_update([("k",)], [plus(1)])
    r0.commit(1)
    with pytest.raises(StateError, match="newer write") as refused:
        late.commit(1)
    assert refused.value.retriable
    r1 = OpaqueMap(make())
    r1.begin_commit(1, run="query:q", writer=(replay, 1))
    r1.multi_update([("k",)], [plus(2)])
    r1.commit(1)
    assert stored(OpaqueMap, make) == [13]
    again = OpaqueMap(make())
    again.begin_commit(1, run="query:q", writer=(first, 0))
    with pytest.raises(StateError, match="newer write"):
        again.multi_update([("k",)], [plus(1)])


def test_a_retried_task_of_a_key_only_it_updates_may_see_more_rows(make) -> None:
    """An opaque spout's batch may hold more rows when a task is retried: a key that only this partition of the
    write updated is recomputed from ``prev`` with the retry's rows."""
    for n in (1, 3):
        state = OpaqueMap(make())
        state.begin_commit(1, run="query:q", writer=("w1", 0))
        state.multi_update([("k",)], [plus(n)])
        state.commit(1)
    assert stored(OpaqueMap, make) == [3]


@pytest.mark.parametrize("cls", MAPS)
def test_a_write_without_a_run_keeps_the_run_a_key_holds(cls, make) -> None:
    state = cls(make())
    state.begin_commit(5, run="query:A")
    state.multi_update([("k",)], [plus(1)])
    state.commit(5)
    plain = cls(make())
    plain.begin_commit(6)
    plain.multi_update([("k",)], [plus(1)])
    plain.commit(6)
    other = cls(make())
    other.begin_commit(7, run="query:B")
    with pytest.raises(StateRunError, match="query:A"):
        other.multi_update([("k",)], [plus(1)])
    assert stored(cls, make) == [2]


def test_a_replay_whose_first_partition_recomputes_the_same_value_still_takes_the_key(make) -> None:
    """Write w1 held only partition 0's rows of k; its replay w2 has them in partitions 0 and 1. Partition 0 of w2
    recomputes the value w1 stored, and must still mark k as w2's, or partition 1 would replay it from prev."""
    seed = OpaqueMap(make())
    seed.begin_commit(0, run="query:q", writer=("w0", 0))
    seed.multi_update([("k",)], [plus(10)])
    seed.commit(0)
    for call, part, n in (("w1", 0, 1), ("w2", 0, 1), ("w2", 1, 2)):
        state = OpaqueMap(make())
        state.begin_commit(1, run="query:q", writer=(call, part))
        state.multi_update([("k",)], [plus(n)])
        state.commit(1)
    assert stored(OpaqueMap, make) == [13]


def test_values_compare_by_txid_and_value_alone() -> None:
    assert TransactionalValue(1, 5, "query:a", "w1", (0,)) == TransactionalValue(1, 5)
    assert OpaqueValue(1, 5, 4, "query:a", "w1", (0, 1)) == OpaqueValue(1, 5, 4)
    assert OpaqueValue(1, 5, 4) != OpaqueValue(1, 5, 3)
    assert len({TransactionalValue(1, 5, "query:a"), TransactionalValue(1, 5, "query:b")}) == 1
