"""Value types and the checkpoint's stored form."""

from __future__ import annotations

import pytest

from kinesis_spout import Checkpoint, CheckpointError, MemoryCheckpointStore, SequenceKey
from kinesis_spout.errors import CheckpointConflict
from kinesis_spout.records import Record, message_id, parse_message_id, parse_message_id_rank
from kinesis_spout.spark.batch_store import batch_store_for

BIG = "49590338271490256608559692538361571095921575989136588898"


def test_sequence_keys_compare_as_integers_not_strings() -> None:
    assert SequenceKey.parse("9") < SequenceKey.parse("10")
    assert SequenceKey.parse(BIG) < SequenceKey.parse(str(int(BIG) + 1))
    assert SequenceKey.parse(BIG, 2) > SequenceKey.parse(BIG, 1) > SequenceKey.parse(BIG)
    with pytest.raises(ValueError, match="decimal digits"):
        SequenceKey.parse("12a")


def test_message_ids_round_trip() -> None:
    key = SequenceKey(int(BIG))
    assert message_id("shardId-000000000001", key) == f"shardId-000000000001:{BIG}"
    assert parse_message_id(f"shardId-000000000001:{BIG}") == ("shardId-000000000001", key)
    assert parse_message_id(f"s:{BIG}:3") == ("s", SequenceKey(int(BIG), 3))
    for bad in ("", "shard", "shard:", ":12", "s:1:2:3", "s:x"):
        with pytest.raises(ValueError, match="malformed message id"):
            parse_message_id(bad)


@pytest.mark.parametrize("sub, aggregated", [(None, 0), (0, 3), (1, 3), (2, 3)])
def test_a_record_s_message_id_is_its_key_s_and_parses_back_to_its_key(sub: int | None, aggregated: int) -> None:
    key = SequenceKey(int(BIG), sub or 0)
    record = Record("shardId-000000000007", BIG, sub, "pk", b"x", None, key, aggregated)
    assert record.message_id == message_id("shardId-000000000007", key)
    assert parse_message_id(record.message_id) == ("shardId-000000000007", key)
    assert parse_message_id_rank(record.message_id) == ("shardId-000000000007", record.rank)


def test_a_record_is_immutable_hashable_and_pickles_and_the_readers_fast_build_equals_the_constructor() -> None:
    import pickle

    key = SequenceKey(int(BIG), 2)
    record = Record("shardId-000000000007", BIG, 2, "pk", b"data", None, key, 3)
    with pytest.raises(AttributeError):
        record.data = b"changed"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(record)) == record and hash(record) == hash(pickle.loads(pickle.dumps(record)))
    fast = tuple.__new__(Record, ("shardId-000000000007", BIG, 2, "pk", b"data", None,
                                  tuple.__new__(SequenceKey, (int(BIG), 2)), 3))
    assert type(fast) is Record and fast == record and fast.key == key and type(fast.key) is SequenceKey
    assert (fast.size, fast.rank, fast.message_id) == (6, key.rank, f"shardId-000000000007:{BIG}:2")
    plain = Record("s", "5", None, "pk", b"x", None, SequenceKey(5))
    assert plain.aggregated == 0 and plain._replace(data=b"y").data == b"y" and plain.data == b"x"


def test_checkpoint_json_round_trip() -> None:
    cp = Checkpoint("shardId-0", BIG, None, shard_end=True).stamped("host:1")
    back = Checkpoint.from_json("shardId-0", cp.to_json(), "here")
    assert back == cp


@pytest.mark.parametrize("raw, message", [
    (b"\xff", "not valid UTF-8 JSON"),
    (b"{", "not valid UTF-8 JSON"),
    (b'{"version": 2, "sequence_number": "1"}', "has version 2"),
    (b'{"version": 1, "sequence_number": "12x"}', "non-numeric sequence_number"),
    (b'{"version": 1, "sequence_number": 12}', "non-numeric sequence_number"),
    (b'{"version": 1}', "has no sequence_number"),
    (b'{"version": 1, "sequence_number": "1", "shard_end": "yes"}', "non-boolean shard_end"),
    (b'{"version": 1, "sequence_number": "1", "sub_sequence_number": -1}', "bad sub_sequence_number"),
    (b'{"version": 1, "sequence_number": null, "reset_to": "EARLIEST"}', "bad reset_to"),
    (b'{"version": 1, "sequence_number": "5", "reset_to": "LATEST"}', "bad reset_to"),
])
def test_unreadable_checkpoints_are_errors_naming_where(raw: bytes, message: str) -> None:
    with pytest.raises(CheckpointError, match=f"checkpoint at /zk/path.*{message}|{message}") as info:
        Checkpoint.from_json("s", raw, "/zk/path")
    assert "/zk/path" in str(info.value)


def test_reset_checkpoints_round_trip_and_are_behind_any_sequence() -> None:
    reset = Checkpoint("shardId-0", None, reset_to="TRIM_HORIZON").stamped("cli")
    back = Checkpoint.from_json("shardId-0", reset.to_json(), "here")
    assert back == reset and back.key is None
    assert reset.is_behind(Checkpoint("shardId-0", "1"))
    assert not Checkpoint("shardId-0", "1").is_behind(reset)
    assert b"reset_to" not in Checkpoint("shardId-0", "1").to_json()  # plain checkpoints keep the v1 layout


def test_memory_store_reset_overrides_and_a_batch_id_is_taken_once() -> None:
    store = MemoryCheckpointStore()
    store.save(Checkpoint("s", "100"))
    store.save(Checkpoint("s", "7"), force=True)
    assert store.load("s").sequence_number == "7"
    assert batch_store_for(store).load_batch_id() == 0
    batch_store_for(store).save_batch_id(5)
    for taken in (5, 4):  # two pipelines on one app and stream never share an id
        with pytest.raises(CheckpointConflict, match=f"batch id is 5; {taken} is taken"):
            batch_store_for(store).save_batch_id(taken)
    assert batch_store_for(store).load_batch_id() == 5


def test_memory_store_never_moves_backwards() -> None:
    store = MemoryCheckpointStore()
    store.save(Checkpoint("s", "100"))
    store.save(Checkpoint("s", "100"))  # same value is fine
    with pytest.raises(CheckpointConflict, match="not moved back from 100 to 99"):
        store.save(Checkpoint("s", "99"))
    store.save(Checkpoint("s", "100", shard_end=True))
    with pytest.raises(CheckpointConflict):
        store.save(Checkpoint("s", "100"))  # un-finishing a shard is moving back
    assert store.load("s") == Checkpoint("s", "100", shard_end=True)


# Kinesis sequence numbers have up to 56 digits: as strings the 55-digit LOW sorts after the 56-digit HIGH
LOW = "9" * 55
HIGH = "1" + "0" * 55


def test_is_behind_compares_sequence_numbers_as_integers() -> None:
    """The move-backwards check orders 55- and 56-digit sequence numbers as ints, then by sub-sequence."""
    assert len(LOW) == 55 and len(HIGH) == 56 and LOW > HIGH  # the string order is the wrong one
    low, high = Checkpoint("s", LOW), Checkpoint("s", HIGH)
    assert low.is_behind(high)
    assert not high.is_behind(low)
    assert not high.is_behind(Checkpoint("s", HIGH))  # the same value is not behind
    assert Checkpoint("s", "9").is_behind(Checkpoint("s", "10"))
    assert not Checkpoint("s", "10").is_behind(Checkpoint("s", "9"))
    assert Checkpoint("s", HIGH, 1).is_behind(Checkpoint("s", HIGH, 2))
    assert not Checkpoint("s", HIGH, 1).is_behind(Checkpoint("s", LOW, 7))


def test_memory_store_refuses_writes_after_close_until_reopened() -> None:
    """Like a real store: closed means no writes (a clear, non-retriable error); open() again and the data kept
    before the close is still there."""
    store = MemoryCheckpointStore()
    store.open()
    store.save(Checkpoint("s", "10"))
    batch_store_for(store).save_batch_id(3)
    store.close()
    store.close()  # idempotent
    assert store.closed
    with pytest.raises(CheckpointError, match="memory checkpoint store is closed") as caught:
        store.save(Checkpoint("s", "20"))
    assert not caught.value.retriable
    with pytest.raises(CheckpointError, match="closed"):
        batch_store_for(store).save_batch_id(4)
    assert store.load("s").sequence_number == "10" and batch_store_for(store).load_batch_id() == 3  # reads still work
    store.open()
    store.save(Checkpoint("s", "20"))
    batch_store_for(store).save_batch_id(4)
    assert store.load("s").sequence_number == "20" and batch_store_for(store).load_batch_id() == 4 and store.writes == 2


def test_a_checkpoint_of_a_whole_kinesis_record_is_ahead_of_one_inside_it() -> None:
    inside, whole = Checkpoint("s", "42", 4), Checkpoint("s", "42", None)
    assert inside.is_behind(whole) and not whole.is_behind(inside)
    assert Checkpoint("s", "42", 0).is_behind(inside) and not whole.is_behind(Checkpoint("s", "42", 9))
    assert whole.is_behind(Checkpoint("s", "43", 0))
