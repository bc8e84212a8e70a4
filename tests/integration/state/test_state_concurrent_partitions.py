"""Two partitions of one write update the same key at once (partition_persist without partition_by): both read the
key before either commits, on every backend, with and without the LRU cache in front; neither update is lost."""

from __future__ import annotations

import uuid

import pytest

from kinesis_spout.state import CachedMap, MemoryBackingMap, NonTransactionalMap, OpaqueMap, OpaqueValue
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap


@pytest.fixture(params=["memory", "redis", "memcached"])
def backing_factory(request: pytest.FixtureRequest):
    """A backing map factory of one fresh namespace on the real server of the parameter."""
    namespace = f"t-{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        yield MemoryBackingMap.factory(namespace)
        MemoryBackingMap.drop(namespace)
    elif request.param == "redis":
        yield RedisBackingMap.factory(request.getfixturevalue("redis").url, namespace=namespace)
    else:
        yield MemcachedBackingMap.factory(request.getfixturevalue("memcached").server, namespace=namespace)


def plus(n):
    return lambda stored: (stored or 0) + n


@pytest.mark.parametrize("cache_size", [None, 1000])
@pytest.mark.parametrize("cls", [OpaqueMap, NonTransactionalMap])
def test_two_partitions_that_both_read_before_either_commits_lose_nothing(cls, cache_size, backing_factory) -> None:
    factory = cls.factory(backing_factory, cache_size=cache_size)
    p0, p1 = factory.make_state(0, 2), factory.make_state(1, 2)
    try:
        for part, state in enumerate((p0, p1)):
            state.begin_commit(1, run="query:q", writer=("w1", part))
        assert p0.multi_update([("k",)], [plus(1)]) == [1]  # both tasks read k (absent) ...
        assert p1.multi_update([("k",)], [plus(2)]) == [2]
        p0.commit(1)  # ... before either writes
        p1.commit(1)
    finally:
        p0.close()
        p1.close()
    reader = factory.make_state()
    try:
        assert reader.multi_get([("k",)]) == [3]
    finally:
        reader.close()


def test_the_cache_drops_an_entry_another_writer_changed(backing_factory) -> None:
    """A cached value another process overwrote is not served to a conditional write twice: the lost write drops
    the entry, the map reads the key again and recomputes."""
    cached = CachedMap(backing_factory.make_backing_map(), 10)
    other = backing_factory.make_backing_map()
    try:
        state = OpaqueMap(cached)
        state.begin_commit(1)
        state.multi_update([("k",)], [plus(1)])
        state.commit(1)
        other.multi_put([("k",)], [OpaqueValue(2, 5, 1)])  # another writer, behind the cache's back
        state.begin_commit(3)
        assert state.multi_update([("k",)], [plus(1)]) in ([2], [6])  # read from the cache or the store
        state.commit(3)
        assert other.multi_get([("k",)]) == [OpaqueValue(3, 6, 5)]
    finally:
        cached.close()
        other.close()
