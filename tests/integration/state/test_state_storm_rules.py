"""Where Storm's Trident is the reference, on every backend (memory, and the real Redis and memcached servers):
what a map state's reads return during a batch (Storm's ``OpaqueMap.multiGet``/``OpaqueValue.get(txid)`` and
``TransactionalMap.multiGet``), what ``TransactionalMap.multi_put`` writes on a replayed txid, and keys given as
lists (Storm's ``List<Object>``)."""

from __future__ import annotations

import uuid

import pytest

from kinesis_spout.state import (
    CachedMap,
    MemoryBackingMap,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    SnapshottableMap,
    StateOrderError,
    StateRunError,
    TransactionalMap,
    TransactionalValue,
)
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap


@pytest.fixture(params=["memory", "redis", "memcached"])
def make_backing(request: pytest.FixtureRequest):
    """A function making backing maps of one fresh namespace on the backend of the parameter."""
    namespace = f"storm-{uuid.uuid4().hex[:12]}"
    made: list = []
    if request.param == "redis":
        url = request.getfixturevalue("redis").url

        def new():
            return RedisBackingMap(url, namespace=namespace)
    elif request.param == "memcached":
        server = request.getfixturevalue("memcached").server

        def new():
            return MemcachedBackingMap(server, namespace=namespace)
    else:
        def new():
            return MemoryBackingMap(namespace)

    def make():
        made.append(new())
        return made[-1]

    yield make
    for backing in made:
        backing.close()
    MemoryBackingMap.drop(namespace)


def plus(n):
    return lambda stored: (stored or 0) + n


# -- item: reads of the current batch -------------------------------------------------------------------------
def test_opaque_reads_during_a_batch_follow_storm(make_backing) -> None:
    """Storm's OpaqueValue(8, v1, v0): read during batch 8 -> v0 (the value before the batch), during batch 9 ->
    v1, outside a batch -> v1, during batch 7 -> refused (the stored batch is newer than the reader's)."""
    make_backing().multi_put([("k",)], [OpaqueValue(8, "v1", "v0")])
    state = OpaqueMap(make_backing())
    assert state.multi_get([("k",), ("none",)]) == ["v1", None]
    state.begin_commit(8)
    assert state.multi_get([("k",), ("none",)]) == ["v0", None]
    state.begin_commit(9)
    assert state.multi_get([("k",)]) == ["v1"]
    state.begin_commit(7)
    with pytest.raises(StateOrderError, match=r"\('k',\).*batch 8.*\(7\)"):
        state.multi_get([("k",)])


def test_opaque_read_on_a_replay_sees_the_value_before_the_batch_not_its_earlier_attempt(make_backing) -> None:
    """Storm: batch 1 sets a key to 3 and commits; a replay of batch 1 reads None (what was there before batch 1),
    never the earlier attempt's 3; a read after the batch's own update, before its commit, is the same."""
    first = OpaqueMap(make_backing())
    first.begin_commit(1)
    assert first.multi_update([("k",)], [plus(3)]) == [3]
    assert first.multi_get([("k",)]) == [None]
    first.commit(1)
    replay = OpaqueMap(make_backing())
    replay.begin_commit(1)
    assert replay.multi_get([("k",)]) == [None]
    assert replay.multi_update([("k",)], [plus(2)]) == [2]  # recomputed from the value before batch 1
    replay.commit(1)
    nxt = OpaqueMap(make_backing())
    nxt.begin_commit(2)
    assert nxt.multi_update([("k",)], [plus(1)]) == [3]
    assert nxt.multi_get([("k",)]) == [2]
    nxt.commit(2)
    assert nxt.multi_get([("k",)]) == [3]  # outside a batch: the latest value


def test_every_update_of_the_batch_still_counts_when_reads_see_the_value_before_it(make_backing) -> None:
    state = OpaqueMap(make_backing())
    state.begin_commit(1)
    state.multi_update([("k",)], [plus(1)])
    assert state.multi_get([("k",)]) == [None]
    assert state.multi_update([("k",), ("k",)], [plus(2), plus(4)]) == [3, 7]
    state.commit(1)
    assert make_backing().multi_get([("k",)]) == [OpaqueValue(1, 7, None)]


def test_an_opaque_snapshot_reads_the_value_before_the_batch(make_backing) -> None:
    total = SnapshottableMap(OpaqueMap(make_backing()))
    total.begin_commit(1)
    total.update(plus(5))
    total.commit(1)
    total.begin_commit(2)
    total.update(plus(1))
    assert total.get() == 5
    total.commit(2)
    assert total.get() == 6


def test_an_opaque_read_during_a_batch_of_another_run_is_refused(make_backing) -> None:
    state = OpaqueMap(make_backing())
    state.begin_commit(1, run="query:a")
    state.multi_update([("k",)], [plus(1)])
    state.commit(1)
    state.begin_commit(1, run="query:b")
    with pytest.raises(StateRunError, match="query:a"):
        state.multi_get([("k",)])


def test_transactional_reads_return_the_stored_value_as_storm_does(make_backing) -> None:
    """Storm's TransactionalMap.multiGet returns the stored value whatever the batch: with updates written at once,
    a read after an update of the batch sees it; a replayed key (left as it is) reads its stored value."""
    make_backing().multi_put([("k",)], [TransactionalValue(8, "v1")])
    state = TransactionalMap(make_backing())
    for txid in (7, 8, 9):
        state.begin_commit(txid)
        assert state.multi_get([("k",)]) == ["v1"]
    state.begin_commit(9)
    state.multi_put([("n",)], [4])
    assert state.multi_get([("n",)]) == [4]


# -- item: TransactionalMap.multi_put on a replayed txid ------------------------------------------------------
@pytest.mark.parametrize("cls", [TransactionalMap, OpaqueMap])
def test_a_put_on_a_replayed_txid_writes_the_new_value(cls, make_backing) -> None:
    """Storm: put 5 in batch 1, replay batch 1 and put 7: the key holds 7 (a put does not depend on what was
    stored, so it is written whatever the stored txid)."""
    first = cls(make_backing())
    first.begin_commit(1)
    first.multi_put([("k",)], [5])
    first.commit(1)
    replay = cls(make_backing())
    replay.begin_commit(1)
    replay.multi_put([("k",)], [7])
    replay.commit(1)
    assert cls(make_backing()).multi_get([("k",)]) == [7]
    again = cls(make_backing())
    again.begin_commit(1)
    again.multi_update([("k",)], [plus(100)])  # a replayed update: skipped (transactional) or recomputed (opaque)
    again.multi_put([("k",)], [9])
    assert again.multi_update([("k",)], [plus(1)]) == [10]  # an update after the put counts on top of it
    again.commit(1)
    assert cls(make_backing()).multi_get([("k",)]) == [10]


# -- item: keys given as lists --------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [TransactionalMap, OpaqueMap, NonTransactionalMap])
@pytest.mark.parametrize("cached", [False, True])
def test_keys_given_as_lists_are_the_keys_of_those_tuples(cls, cached, make_backing) -> None:
    def new():
        backing = make_backing()
        return cls(CachedMap(backing, 16) if cached else backing)

    state = new()
    state.begin_commit(1)
    assert state.multi_update([["a", 1], ["b", 2], ["a", 1]], [plus(1), plus(2), plus(4)]) == [1, 2, 5]
    state.multi_put([["c", 3]], [9])
    state.commit(1)
    assert new().multi_get([["a", 1], ("b", 2), ["c", 3]]) == [5, 2, 9]


@pytest.mark.parametrize("key", ["a", 7, None, ("a", ["nested"])])
def test_a_key_that_is_not_a_tuple_or_list_of_scalars_is_refused_at_the_call(key, make_backing) -> None:
    state = OpaqueMap(make_backing())
    state.begin_commit(1)
    for call in (lambda: state.multi_update([key], [plus(1)]), lambda: state.multi_get([key]),
                 lambda: state.multi_put([key], [1])):
        with pytest.raises(TypeError, match=r"tuple.*\('a',\)"):
            call()
