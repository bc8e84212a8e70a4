"""The pure state core: Trident's own examples, the serializer's format and errors, the map kinds and pairs."""

from __future__ import annotations

import json

import pytest

from kinesis_spout.state import (
    CachedMap,
    Count,
    JsonSerializer,
    MapKind,
    MemoryBackingMap,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    SnapshottableMap,
    SpoutKind,
    StateDecodeError,
    StateError,
    StateOrderError,
    StatePairError,
    Sum,
    TransactionalMap,
    TransactionalValue,
    TxBatch,
    check_pair,
    tx_batch,
)


@pytest.fixture
def backing(request: pytest.FixtureRequest):
    name = f"unit-{request.node.name}"
    MemoryBackingMap.drop(name)
    yield MemoryBackingMap(name)
    MemoryBackingMap.drop(name)


def plus(n):
    return lambda stored: (stored or 0) + n


def test_trident_transactional_example_man_dog_apple(backing) -> None:
    backing.multi_put([("man",), ("dog",), ("apple",)],
                      [TransactionalValue(1, 3), TransactionalValue(3, 4), TransactionalValue(2, 10)])
    state = TransactionalMap(backing)
    state.begin_commit(3)  # batch 3 = ["man"], ["man"], ["dog"]
    assert state.multi_update([("man",), ("dog",)], [plus(2), plus(1)]) == [5, 4]
    state.commit(3)
    assert backing.multi_get([("man",), ("dog",), ("apple",)]) == [
        TransactionalValue(3, 5), TransactionalValue(3, 4), TransactionalValue(2, 10)]


def test_trident_opaque_example_prev_value(backing) -> None:
    backing.multi_put([("w",)], [OpaqueValue(txid=2, curr=4, prev=1)])
    state = OpaqueMap(backing)
    state.begin_commit(3)  # a new txid: prev = value, then add the partial count 2
    assert state.multi_update([("w",)], [plus(2)]) == [6]
    state.commit(3)
    assert backing.multi_get([("w",)]) == [OpaqueValue(3, 6, 4)]
    backing.multi_put([("w",)], [OpaqueValue(txid=2, curr=4, prev=1)])
    state.begin_commit(2)  # the same txid again: recompute from prev (the batch may have changed)
    assert state.multi_update([("w",)], [plus(2)]) == [3]
    state.commit(2)
    assert backing.multi_get([("w",)]) == [OpaqueValue(2, 3, 1)]


def test_a_lower_txid_than_stored_is_refused_naming_the_key(backing) -> None:
    for cls, stored in ((TransactionalMap, TransactionalValue(5, 1)), (OpaqueMap, OpaqueValue(5, 1, 0))):
        backing.multi_put([("k",)], [stored])
        state = cls(backing)
        state.begin_commit(4)
        with pytest.raises(StateOrderError, match=r"\('k',\).*batch 5.*\(4\)"):
            state.multi_update([("k",)], [plus(1)])


def test_non_transactional_map_applies_a_replay_again(backing) -> None:
    state = NonTransactionalMap(backing)
    for _ in range(2):
        state.begin_commit(1)
        state.multi_update([("a",)], [plus(3)])
        state.commit(1)
    assert state.multi_get([("a",)]) == [6]


def test_a_map_refuses_values_of_another_kind(backing) -> None:
    backing.multi_put([("k",)], [OpaqueValue(1, 1, None)])
    state = TransactionalMap(backing)
    state.begin_commit(2)
    with pytest.raises(StateError, match="written by an OpaqueMap.*own namespace"):
        state.multi_update([("k",)], [plus(1)])


def test_update_before_begin_commit_is_an_error(backing) -> None:
    with pytest.raises(Exception, match="begin_commit"):
        OpaqueMap(backing).multi_update([("k",)], [plus(1)])


def test_serializer_format_is_versioned_json() -> None:
    ser = JsonSerializer()
    assert json.loads(ser.dumps(OpaqueValue(3, 6, 4))) == {"v": 1, "t": "opaque", "txid": 3, "curr": 6, "prev": 4}
    assert json.loads(ser.dumps(TransactionalValue(3, 5))) == {"v": 1, "t": "transactional", "txid": 3, "val": 5}
    assert json.loads(ser.dumps([1, "x"])) == {"v": 1, "t": "plain", "val": [1, "x"]}
    for value in (OpaqueValue(3, 6, None), TransactionalValue(0, {"a": 1}), 7, None, "s"):
        assert ser.loads(ser.dumps(value), "k") == value


@pytest.mark.parametrize("raw, why", [
    (b"\xff\xfe", "not kinesis_spout state JSON"),
    (b"42", "no 'v' and 't'"),
    (b'{"v": 2, "t": "opaque", "txid": 1, "curr": 1, "prev": 0}', "format version 2"),
    (b'{"v": 1, "t": "opaque", "curr": 1}', "malformed"),
    (b'{"v": 1, "t": "opaque", "txid": -1, "curr": 1, "prev": 0}', "malformed"),
    (b'{"v": 1, "t": "other", "val": 1}', "unknown type"),
])
def test_an_undecodable_value_is_an_error_naming_the_key(backing, raw: bytes, why: str) -> None:
    backing.corrupt(("the",), raw)
    with pytest.raises(StateDecodeError, match=why) as info:
        OpaqueMap(backing).multi_get([("the",)])
    assert '["the"]' in str(info.value) and info.value.key.endswith('["the"]')


def test_values_that_are_not_json_are_a_clear_type_error(backing) -> None:
    state = NonTransactionalMap(backing)
    state.begin_commit(1)
    state.multi_put([("k",)], [object()])
    with pytest.raises(TypeError, match="JSON-encodable"):
        state.commit(1)


def test_pairs_follow_tridents_table() -> None:
    ok = {(MapKind.TRANSACTIONAL, SpoutKind.TRANSACTIONAL), (MapKind.OPAQUE, SpoutKind.TRANSACTIONAL),
          (MapKind.OPAQUE, SpoutKind.OPAQUE)}
    for m in MapKind:
        for s in SpoutKind:
            if m is MapKind.NON_TRANSACTIONAL or (m, s) in ok:
                check_pair(m, s)
            else:
                with pytest.raises(StatePairError):
                    check_pair(m, s)
    with pytest.raises(StatePairError, match="use an OpaqueMap"):
        check_pair(MapKind.TRANSACTIONAL, SpoutKind.OPAQUE)


def test_tx_batch_reads_ints_pipeline_batches_and_refuses_the_rest() -> None:
    class PlainBatch:
        id = 4

    class Kinded:
        id = 5
        kind = "opaque"

    assert tx_batch(3) == TxBatch(3, SpoutKind.TRANSACTIONAL)
    assert tx_batch(PlainBatch()) == TxBatch(4, SpoutKind.NON_TRANSACTIONAL)
    assert tx_batch(Kinded()) == TxBatch(5, SpoutKind.OPAQUE)
    for bad in (True, "3", -1, None):
        with pytest.raises(ValueError):
            tx_batch(bad)


def test_cached_map_serves_hits_and_writes_through(backing) -> None:
    cached = CachedMap(backing, size=2)
    state = OpaqueMap(cached)
    state.begin_commit(1)
    state.multi_update([("a",), ("b",), ("c",)], [plus(1)] * 3)
    state.commit(1)
    trips = backing.round_trips
    assert state.multi_get([("b",), ("c",)]) == [1, 1] and backing.round_trips == trips  # cached
    assert state.multi_get([("a",)]) == [1] and backing.round_trips == trips + 1       # evicted: read
    assert (cached.hits, cached.misses) == (2, 4)


def test_snapshottable_map_keeps_a_global_value(backing) -> None:
    total = SnapshottableMap(OpaqueMap(backing))
    total.begin_commit(1)
    assert total.update(plus(5)) == 5
    total.commit(1)
    total.begin_commit(1)  # a replay of txid 1 with another partial
    assert total.update(plus(7)) == 7
    total.set(9)
    assert total.get() is None  # an opaque read during batch 1: the value before batch 1 (Storm's rule)
    total.commit(1)
    assert total.get() == 9


def test_conditional_writes_retry_the_keys_another_writer_changed(backing) -> None:
    """Two writers of one key between read and write: compare-and-set makes the first read again at its commit
    and recompute its update."""
    first, second = NonTransactionalMap(backing), NonTransactionalMap(MemoryBackingMap(backing.name))
    first.begin_commit(1)
    second.begin_commit(1)
    assert first.multi_update([("k",)], [plus(1)]) == [1]   # first reads k (absent)
    second.multi_update([("k",)], [plus(10)])
    second.commit(1)                                         # second writes k in between
    first.commit(1)
    assert NonTransactionalMap(MemoryBackingMap(backing.name)).multi_get([("k",)]) == [11]


def test_aggregators() -> None:
    assert Count().combine(Count().zero(), Count().init({"x": 1})) == 1
    assert Sum("n").init({"n": None}) == 0 and Sum("n").combine(2, Sum("n").init({"n": 3})) == 5
    with pytest.raises(ValueError):
        Sum("")


def test_pipeline_exactly_once_mode_refuses_what_breaks_txid_order() -> None:
    from kinesis_spout import SpoutConfig
    from kinesis_spout.errors import ConfigError
    from kinesis_spout.spark.pipeline import SpoutPipeline

    log = MemoryBackingMap.factory("unit-log")
    base = {"stream_name": "s", "app_name": "a"}
    for extra, why in (({"coordination": "leases"}, "one pipeline per app"), ({"task_count": 2}, "task_count=1"),
                       ({"reliable": False}, "reliable=True")):
        with pytest.raises(ConfigError, match=why):
            SpoutPipeline(None, SpoutConfig(**base, **extra), lambda df, b: None, exactly_once=log)
    with pytest.raises(ConfigError, match="backing map factory"):
        SpoutPipeline(None, SpoutConfig(**base), lambda df, b: None, exactly_once="redis://x")
    assert SpoutPipeline(None, SpoutConfig(**base), lambda df, b: None, exactly_once=log).exactly_once is log


def test_state_factories_pickle_without_connecting() -> None:
    """Factories travel to Spark's executors: configuration only, no client (and no I/O) until a map is made."""
    import pickle

    from kinesis_spout.state.memcached import MemcachedBackingMap
    from kinesis_spout.state.redis import RedisBackingMap

    for factory in (OpaqueMap.factory(RedisBackingMap.factory("redis://127.0.0.1:1/0", namespace="wc")),
                    TransactionalMap.factory(MemcachedBackingMap.factory("127.0.0.1:1", namespace="wc"),
                                             cache_size=10)):
        copy = pickle.loads(pickle.dumps(factory))
        assert copy == factory
        state = copy.make_state(0, 1)
        state.close()  # never connected: nothing to close, and closing twice is fine
        state.close()
    with pytest.raises(ValueError, match="redis://"):
        RedisBackingMap.factory("127.0.0.1:6379", namespace="wc")
    with pytest.raises(ValueError, match="host:port"):
        MemcachedBackingMap.factory("nowhere", namespace="wc")
    with pytest.raises(ValueError, match="without spaces"):
        MemcachedBackingMap.factory("127.0.0.1:11211", namespace="word count")
