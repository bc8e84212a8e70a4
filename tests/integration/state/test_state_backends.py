"""The Redis and memcached backing maps on real servers (the plugin's ``redis`` and ``memcached`` fixtures)."""

from __future__ import annotations

import threading
import uuid

import pytest

from kinesis_spout.errors import ServerStartError
from kinesis_spout.state import (
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    StateDecodeError,
    StateError,
    TransactionalMap,
    TransactionalValue,
)
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap
from kinesis_spout.testing.memcached import MemcachedServer
from kinesis_spout.testing.redis import RedisServer


@pytest.fixture(params=["redis", "memcached"])
def make_backing(request: pytest.FixtureRequest):
    """A function making backing maps of one fresh namespace on the real server of the parameter."""
    namespace = f"t-{uuid.uuid4().hex[:12]}"
    made = []
    if request.param == "redis":
        server = request.getfixturevalue("redis")

        def make():
            made.append(RedisBackingMap(server.url, namespace=namespace))
            return made[-1]
    else:
        server = request.getfixturevalue("memcached")

        def make():
            made.append(MemcachedBackingMap(server.server, namespace=namespace))
            return made[-1]
    make.kind = request.param
    yield make
    for backing in made:
        backing.close()


def plus(n):
    return lambda stored: (stored or 0) + n


def test_trident_examples_on_the_real_store(make_backing) -> None:
    backing = make_backing()
    backing.multi_put([("man",), ("dog",), ("apple",)],
                      [TransactionalValue(1, 3), TransactionalValue(3, 4), TransactionalValue(2, 10)])
    state = TransactionalMap(backing)
    state.begin_commit(3)
    assert state.multi_update([("man",), ("dog",)], [plus(2), plus(1)]) == [5, 4]
    state.commit(3)
    assert make_backing().multi_get([("man",), ("dog",), ("apple",), ("cat",)]) == [
        TransactionalValue(3, 5), TransactionalValue(3, 4), TransactionalValue(2, 10), None]
    backing.multi_put([("w",)], [OpaqueValue(2, 4, 1)])
    opaque = OpaqueMap(backing)
    opaque.begin_commit(3)
    assert opaque.multi_update([("w",)], [plus(2)]) == [6]
    opaque.commit(3)
    opaque.begin_commit(3)
    assert opaque.multi_update([("w",)], [plus(5)]) == [9]  # a replay of txid 3, recomputed from prev = 4
    opaque.commit(3)
    assert backing.multi_get([("w",)]) == [OpaqueValue(3, 9, 4)]


def test_one_update_is_two_round_trips_whatever_the_number_of_keys(make_backing) -> None:
    backing = make_backing()
    state = OpaqueMap(backing)
    state.begin_commit(1)
    keys = [(f"word-{i}", i) for i in range(2_000)]
    state.multi_update(keys, [plus(1)] * len(keys))
    state.commit(1)
    assert backing.round_trips == 2
    assert state.multi_get(keys[:3] + [("nope", 0)]) == [1, 1, 1, None]


def test_concurrent_writers_of_the_same_keys_lose_no_update(make_backing) -> None:
    """Four threads, each with its own connection, add 1 to the same 50 keys 25 times: every update counts."""
    keys = [(f"k{i}",) for i in range(50)]
    errors = []

    def writer() -> None:
        try:
            state = NonTransactionalMap(make_backing())
            for txid in range(25):
                state.begin_commit(txid)
                state.multi_update(keys, [plus(1)] * len(keys))
                state.commit(txid)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert NonTransactionalMap(make_backing()).multi_get(keys) == [100] * len(keys)


def test_two_writers_of_one_new_key_the_second_create_is_refused(make_backing) -> None:
    """Both writers read the key as absent; the first creates it; the second's create must be refused (and its
    update recomputed by the map), never reported as written over or beside the first. Forced order, no timing."""
    first, second = make_backing(), make_backing()
    key = ("new",)
    assert [v.token for v in first.multi_get_versioned([key]) + second.multi_get_versioned([key])] == [None, None]
    assert first.multi_put_if([key], [OpaqueValue(1, 1, None)], [None]) == [True]
    assert second.multi_put_if([key], [OpaqueValue(1, 10, None)], [None]) == [False]
    assert make_backing().multi_get([key]) == [OpaqueValue(1, 1, None)]
    # a stale token of an existing key is refused too
    [read] = first.multi_get_versioned([key])
    assert second.multi_put_if([key], [OpaqueValue(2, 2, 1)], [read.token]) == [True]
    assert first.multi_put_if([key], [OpaqueValue(2, 20, 1)], [read.token]) == [False]
    # through two map states: both read the new key before either commits, and both updates count
    a, b = NonTransactionalMap(make_backing()), NonTransactionalMap(make_backing())
    a.begin_commit(1)
    b.begin_commit(1)
    assert a.multi_update([("k",)], [plus(1)]) == [1] and b.multi_update([("k",)], [plus(10)]) == [10]
    a.commit(1)
    b.commit(1)
    assert NonTransactionalMap(make_backing()).multi_get([("k",)]) == [11]


def test_a_value_another_program_wrote_is_an_error_naming_the_key(make_backing, request) -> None:
    backing = make_backing()
    backing.multi_put([("the",)], [OpaqueValue(1, 1, None)])
    if make_backing.kind == "redis":
        import redis as redis_py

        name = f'{backing.namespace}:["the"]'
        client = redis_py.Redis.from_url(request.getfixturevalue("redis").url)
        client.set(name, b"not json")
        client.close()
    else:
        from kinesis_spout.state.serializer import hashed_key

        name = hashed_key(backing.namespace, ("the",))
        from pymemcache.client.base import Client

        host, _, port = request.getfixturevalue("memcached").server.rpartition(":")
        client = Client((host, int(port)))
        client.set(name, b"not json", noreply=False)  # stored before the read below, not sent and forgotten
        client.close()
    with pytest.raises(StateDecodeError, match="not kinesis_spout state JSON") as info:
        OpaqueMap(make_backing()).multi_get([("the",)])
    assert info.value.key == name and name in str(info.value)


def test_an_unreachable_server_is_a_retriable_state_error_naming_it() -> None:
    from kinesis_spout.testing.process import free_port

    port = free_port()
    for backing, where in ((RedisBackingMap(f"redis://127.0.0.1:{port}/0", namespace="x"), f"127.0.0.1:{port}"),
                           (MemcachedBackingMap(f"127.0.0.1:{port}", namespace="x"), f"127.0.0.1:{port}")):
        with pytest.raises(StateError, match=where) as info:
            backing.multi_get([("a",)])
        assert info.value.retriable
        backing.close()
        backing.close()


def test_a_redis_password_never_shows_in_errors() -> None:
    from kinesis_spout.testing.process import free_port

    backing = RedisBackingMap(f"redis://user:s3cret@127.0.0.1:{free_port()}/0", namespace="x")
    with pytest.raises(StateError) as info:
        backing.multi_get([("a",)])
    assert "s3cret" not in str(info.value) and "user:***@" in str(info.value)


@pytest.mark.parametrize("server, env", [(RedisServer, "KINESIS_SPOUT_REDIS_SERVER"),
                                         (MemcachedServer, "KINESIS_SPOUT_MEMCACHED")])
def test_a_missing_binary_is_a_clear_error(server, env, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(env, str(tmp_path / "nowhere"))
    with pytest.raises(ServerStartError, match="not installed.*apt-get install"):
        server().start()
