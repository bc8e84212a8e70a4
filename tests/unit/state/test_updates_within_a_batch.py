"""Several updates of one key in one batch (Storm's StateTest), replays of a batch by a new map instance, keys
that two partitions of one batch update, and the run identity that tells a replay from a new run's batch."""

from __future__ import annotations

import pytest

from kinesis_spout.state import (
    MemoryBackingMap,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    StatePartitionError,
    StateRunError,
    TransactionalMap,
    TransactionalValue,
)

MAPS = [TransactionalMap, OpaqueMap]


@pytest.fixture
def name(request: pytest.FixtureRequest):
    name = f"unit-wb-{request.node.name}"
    MemoryBackingMap.drop(name)
    yield name
    MemoryBackingMap.drop(name)


def plus(n):
    return lambda stored: (stored or 0) + n


def value(cls, name, key=("k",)):
    return cls(MemoryBackingMap(name)).multi_get([key])[0]


@pytest.mark.parametrize("cls", MAPS)
def test_two_updates_of_one_key_in_one_txid_both_count(cls, name) -> None:
    """Storm's StateTest: +1 then +2 for the same key within txid 1 holds 3."""
    state = cls(MemoryBackingMap(name))
    state.begin_commit(1)
    assert state.multi_update([("k",)], [plus(1)]) == [1]
    assert state.multi_update([("k",)], [plus(2)]) == [3]
    # a read during the batch: Storm's TransactionalMap reads what its updates wrote, its OpaqueMap the value
    # before the batch
    assert state.multi_get([("k",)]) == [3 if cls is TransactionalMap else None]
    state.commit(1)
    assert value(cls, name) == 3


@pytest.mark.parametrize("cls", MAPS)
def test_updates_row_by_row_and_a_key_twice_in_one_call_all_count(cls, name) -> None:
    state = cls(MemoryBackingMap(name))
    state.begin_commit(1)
    for _ in range(3):  # an updater that updates row by row: rows a, a, a
        state.multi_update([("a",)], [plus(1)])
    assert state.multi_update([("b",), ("a",), ("b",)], [plus(1), plus(10), plus(5)]) == [1, 13, 6]
    state.commit(1)
    assert cls(MemoryBackingMap(name)).multi_get([("a",), ("b",)]) == [13, 6]


@pytest.mark.parametrize("cls", MAPS)
def test_a_replay_by_a_new_instance_after_the_commit_counts_once(cls, name) -> None:
    """A Spark task retried after it wrote its keys: a new map instance, the same txid, the same rows."""
    for _ in range(2):
        state = cls(MemoryBackingMap(name))
        state.begin_commit(1)
        for n in (1, 2):
            state.multi_update([("k",)], [plus(n)])
        state.commit(1)
    assert value(cls, name) == 3
    state = cls(MemoryBackingMap(name))
    state.begin_commit(2)
    state.multi_update([("k",)], [plus(4)])
    state.commit(2)
    assert value(cls, name) == 7


@pytest.mark.parametrize("cls", MAPS)
def test_an_attempt_cut_short_before_its_commit_writes_nothing(cls, name) -> None:
    """Updates are written at commit(), one bulk write: a task that dies between two updates of a key leaves
    the key as it was, and its retry (a new instance) applies every update once."""
    state = cls(MemoryBackingMap(name))
    state.begin_commit(1)
    state.multi_update([("k",)], [plus(1)])
    state.multi_update([("k",)], [plus(2)])  # ... and the task dies here, before commit
    assert value(cls, name) is None
    retry = cls(MemoryBackingMap(name))
    retry.begin_commit(1)
    for n in (1, 2, 3):
        retry.multi_update([("k",)], [plus(n)])
    retry.commit(1)
    assert value(cls, name) == 6


def test_opaque_map_keeps_the_value_before_the_txid_as_prev(name) -> None:
    backing = MemoryBackingMap(name)
    backing.multi_put([("k",)], [OpaqueValue(1, 5, 2)])
    state = OpaqueMap(backing)
    state.begin_commit(2)
    state.multi_update([("k",)], [plus(1)])
    state.multi_update([("k",)], [plus(2)])
    state.commit(2)
    assert backing.multi_get([("k",)]) == [OpaqueValue(2, 8, 5)]
    replay = OpaqueMap(MemoryBackingMap(name))  # txid 2 again, with other records: recomputed from prev = 5
    replay.begin_commit(2)
    replay.multi_update([("k",)], [plus(10)])
    replay.multi_update([("k",)], [plus(20)])
    replay.commit(2)
    assert backing.multi_get([("k",)])[0].curr == 35


def test_two_partitions_of_one_write_update_a_key_opaque_counts_both(name) -> None:
    """partition_persist without partition_by: rows of key k in partitions 0 and 1 of the same write."""
    for part, n in ((0, 1), (1, 2)):
        state = OpaqueMap(MemoryBackingMap(name))
        state.begin_commit(1, writer=("call-1", part))
        state.multi_update([("k",)], [plus(n)])
        state.commit(1)
    retried = OpaqueMap(MemoryBackingMap(name))  # partition 1's task retried: its rows already count
    retried.begin_commit(1, writer=("call-1", 1))
    assert retried.multi_update([("k",)], [plus(2)]) == [3]
    retried.commit(1)
    assert value(OpaqueMap, name) == 3
    # the batch replayed by a later write (another call): recomputed from the value before txid 1
    for part, n in ((1, 2), (0, 1)):
        state = OpaqueMap(MemoryBackingMap(name))
        state.begin_commit(1, writer=("call-2", part))
        state.multi_update([("k",)], [plus(n)])
        state.commit(1)
    assert value(OpaqueMap, name) == 3


def test_two_partitions_of_one_write_update_a_key_transactional_is_refused(name) -> None:
    first = TransactionalMap(MemoryBackingMap(name))
    first.begin_commit(1, writer=("call-1", 0))
    first.multi_update([("k",)], [plus(1)])
    first.commit(1)
    second = TransactionalMap(MemoryBackingMap(name))
    second.begin_commit(1, writer=("call-1", 1))
    with pytest.raises(StatePartitionError, match=r"\('k',\).*partitions 0 and 1.*partition_by.*OpaqueMap"):
        second.multi_update([("k",)], [plus(2)])


@pytest.mark.parametrize("cls", MAPS)
def test_a_stored_txid_of_another_run_is_refused_not_taken_for_a_replay(cls, name) -> None:
    state = cls(MemoryBackingMap(name))
    state.begin_commit(0, run="query-A")
    state.multi_update([("k",)], [plus(1)])
    state.commit(0)
    replay = cls(MemoryBackingMap(name))  # the same run's replay of batch 0: counted once
    replay.begin_commit(0, run="query-A")
    replay.multi_update([("k",)], [plus(1)])
    replay.commit(0)
    assert value(cls, name) == 1
    for txid in (0, 1):
        other = cls(MemoryBackingMap(name))
        other.begin_commit(txid, run="query-B")
        with pytest.raises(StateRunError, match=r"\('k',\).*query-A.*query-B.*checkpointLocation.*namespace"):
            other.multi_update([("k",)], [plus(1)])
    assert value(cls, name) == 1


@pytest.mark.parametrize("cls, old", [(TransactionalMap, TransactionalValue(3, 5)),
                                      (OpaqueMap, OpaqueValue(3, 5, 4))])
def test_values_written_without_a_run_follow_the_txid_rules_and_take_the_run(cls, old, name) -> None:
    backing = MemoryBackingMap(name)
    backing.multi_put([("k",)], [old])
    state = cls(backing)
    state.begin_commit(3, run="query-A")  # the same txid: a replay, as before runs were stored
    state.multi_update([("k",)], [plus(1)])
    state.commit(3)
    state.begin_commit(4, run="query-A")
    state.multi_update([("k",)], [plus(1)])
    state.commit(4)
    assert state.multi_get([("k",)]) == [6]
    other = cls(MemoryBackingMap(name))
    other.begin_commit(5, run="query-B")
    with pytest.raises(StateRunError):
        other.multi_update([("k",)], [plus(1)])
    unknown = cls(MemoryBackingMap(name))  # a batch of no known run: the txid rules alone
    unknown.begin_commit(5)
    unknown.multi_update([("k",)], [plus(1)])
    unknown.commit(5)
    assert unknown.multi_get([("k",)]) == [7]


def test_non_transactional_map_accumulates_and_writes_at_commit(name) -> None:
    state = NonTransactionalMap(MemoryBackingMap(name))
    state.begin_commit(1)
    state.multi_update([("k",)], [plus(1)])
    state.multi_update([("k",)], [plus(2)])
    assert value(NonTransactionalMap, name) is None
    state.commit(1)
    assert value(NonTransactionalMap, name) == 3


def test_a_pipeline_batch_gives_its_run_by_run_id() -> None:
    from kinesis_spout.errors import ConfigError
    from kinesis_spout.state import SpoutKind, TxBatch, tx_batch

    class Batch:
        id = 4
        kind = "transactional"
        run_id = "pipeline-run-1"

    class Older:  # a batch without run_id: no run known
        id = 4
        kind = "transactional"

    assert tx_batch(Batch()) == TxBatch(4, SpoutKind.TRANSACTIONAL, "pipeline-run-1")
    assert tx_batch(Older()).run is None and tx_batch(4).run is None
    Batch.run_id = ""
    with pytest.raises(ConfigError, match="run must be a non-empty string"):
        tx_batch(Batch())


class PlainBackingMap:
    """A user's backing map without compare-and-set (multi_get/multi_put only) over the memory store."""

    def __init__(self, name: str) -> None:
        self.namespace = name
        self.store = MemoryBackingMap(name)

    def multi_get(self, keys):
        return self.store.multi_get(keys)

    def multi_put(self, keys, values):
        self.store.multi_put(keys, values)

    def close(self):
        self.store.close()


class PlainFactory:
    def __init__(self, name: str) -> None:
        self.name = name

    def make_backing_map(self):
        return PlainBackingMap(self.name)


def test_a_namespace_belongs_to_the_first_run_that_claims_it(name) -> None:
    from kinesis_spout.state import CachedMap

    class Plain:  # a backing map factory without compare-and-set, behind the cache
        def make_backing_map(self):
            return CachedMap(PlainBackingMap(name), 4)

    for factory in (OpaqueMap.factory(MemoryBackingMap.factory(name)), TransactionalMap.factory(Plain())):
        MemoryBackingMap.drop(name)
        factory.claim_run("query:A")
        factory.claim_run("query:A")
        with pytest.raises(StateRunError, match=r"namespace 'unit-wb-[^']*' belongs to run 'query:A'.*query:B"
                                                r".*checkpointLocation"):
            factory.claim_run("query:B")
        assert factory.make_state().multi_get([("k",)]) == [None]  # the claim is no group key's value


def test_stored_values_of_the_earlier_format_read_and_the_writer_fields_round_trip() -> None:
    from kinesis_spout.state import JsonSerializer, StateDecodeError

    ser = JsonSerializer()
    assert ser.loads(b'{"v":1,"t":"transactional","txid":3,"val":5}', "k") == TransactionalValue(3, 5)
    assert ser.loads(b'{"v":1,"t":"opaque","txid":3,"curr":6,"prev":4}', "k") == OpaqueValue(3, 6, 4)
    assert ser.dumps(TransactionalValue(3, 5)) == b'{"v":1,"t":"transactional","txid":3,"val":5}'
    for value in (TransactionalValue(3, 5, "query:q", "c1", (0, 2)), OpaqueValue(3, 6, 4, "run-7", None, ())):
        assert ser.loads(ser.dumps(value), "k") == value
    with pytest.raises(StateDecodeError, match="run 7 is not a string"):
        ser.loads(b'{"v":1,"t":"opaque","txid":3,"curr":6,"prev":4,"run":7}', "k")
    with pytest.raises(StateDecodeError, match="parts"):
        ser.loads(b'{"v":1,"t":"opaque","txid":3,"curr":6,"prev":4,"call":"c","parts":["x"]}', "k")


@pytest.mark.parametrize("cache_size", [None, 4])
@pytest.mark.parametrize("cls", [OpaqueMap, NonTransactionalMap])
def test_partition_persist_without_partition_by_needs_compare_and_set(cls, cache_size, name) -> None:
    """Rows of one key may sit in several partitions, whose tasks would overwrite each other over a store without
    compare-and-set: refused on the driver, before anything is read or written."""
    from kinesis_spout.errors import ConfigError
    from kinesis_spout.state import SpoutKind, TxBatch, partition_persist

    class Updater:
        def update_state(self, state, rows):
            state.multi_update([("k",)] * len(rows), [plus(1)] * len(rows))

    batch = TxBatch(1, SpoutKind.TRANSACTIONAL, "query:q")
    factory = cls.factory(PlainFactory(name), cache_size=cache_size)
    with pytest.raises(ConfigError, match=r"partition_by.*compare-and-set.*multi_get_versioned"):
        partition_persist(None, batch, factory, Updater())
    assert MemoryBackingMap(name).raw() == {}
