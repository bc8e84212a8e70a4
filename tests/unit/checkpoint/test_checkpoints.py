"""The checkpoint value: its stored form byte for byte, what is read back (defaults, naive times as UTC), what is
refused (an error naming where it was read), and its order (sequence numbers as integers, then sub-sequence)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout import Checkpoint, CheckpointError

BIG = "49590338271490256608559692538361571095921575989136588898"
SEQ = BIG
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
PLUS_TWO = timezone(timedelta(hours=2))


def parse(**doc: object) -> Checkpoint:
    return Checkpoint.from_json("s", json.dumps({"version": 1, **doc}).encode(), "/where")


# ------------------------------------------------------------------ the stored form


def test_checkpoint_json_round_trip() -> None:
    cp = Checkpoint("shardId-0", BIG, None, shard_end=True).stamped("host:1")
    back = Checkpoint.from_json("shardId-0", cp.to_json(), "here")
    assert back == cp


def test_the_stored_form_is_compact_json_with_every_field() -> None:
    checkpoint = Checkpoint("s", SEQ, 3, owner="w1", updated_at=T0)
    assert checkpoint.to_json() == (
        b'{"version":1,"sequence_number":"' + SEQ.encode() + b'","sub_sequence_number":3,"shard_end":false,'
        b'"owner":"w1","updated_at":"2026-11-22T12:00:00+00:00"}')


def test_a_sub_sequence_number_survives_the_round_trip() -> None:
    checkpoint = Checkpoint("s", SEQ, 3, owner="w1", updated_at=T0)
    assert Checkpoint.from_json("s", checkpoint.to_json(), "/where") == checkpoint
    assert parse(sequence_number=SEQ, sub_sequence_number=0).sub_sequence_number == 0


def test_a_checkpoint_written_without_a_time_is_stamped_with_an_aware_utc_time() -> None:
    before = datetime.now(timezone.utc)
    written = datetime.fromisoformat(json.loads(Checkpoint("s", SEQ).to_json())["updated_at"])
    assert written.tzinfo is not None and before - timedelta(seconds=1) <= written <= before + timedelta(seconds=60)


def test_stamped_sets_the_owner_and_an_aware_time() -> None:
    stamped = Checkpoint("s", SEQ).stamped("worker-7")
    assert stamped.owner == "worker-7"
    assert stamped.updated_at is not None and stamped.updated_at.tzinfo is not None
    assert abs(stamped.updated_at - datetime.now(timezone.utc)) < timedelta(seconds=60)


def test_pinned_keeps_the_shard_and_the_instant_and_reads_naive_times_as_utc() -> None:
    aware = datetime(2026, 11, 22, 14, 0, tzinfo=PLUS_TWO)
    pinned = Checkpoint.pinned("shard-9", aware)
    assert pinned.shard_id == "shard-9" and pinned.sequence_number is None and pinned.reset_to == "AT_TIMESTAMP"
    assert pinned.timestamp == T0 and pinned.timestamp.utcoffset() == timedelta(hours=2)
    naive = Checkpoint.pinned("shard-9", datetime(2026, 11, 22, 12, 0))
    assert naive.timestamp == T0 and naive.timestamp.tzinfo is timezone.utc


def test_missing_optional_fields_take_their_defaults() -> None:
    checkpoint = parse(sequence_number=SEQ)
    assert checkpoint == Checkpoint("s", SEQ, None, False, "", None, None, None)


def test_an_unreadable_update_time_is_none() -> None:
    assert parse(sequence_number=SEQ, updated_at="yesterday").updated_at is None
    assert parse(sequence_number=SEQ, updated_at=12).updated_at is None


def test_a_naive_stored_timestamp_is_read_as_utc() -> None:
    checkpoint = parse(sequence_number=None, reset_to="AT_TIMESTAMP", timestamp="2026-11-22T12:00:00")
    assert checkpoint.timestamp == T0 and checkpoint.timestamp.tzinfo is timezone.utc
    aware = parse(sequence_number=None, reset_to="AT_TIMESTAMP", timestamp="2026-11-22T14:00:00+02:00")
    assert aware.timestamp == T0 and aware.timestamp.utcoffset() == timedelta(hours=2)


# ------------------------------------------------------------------ what is refused


@pytest.mark.parametrize("raw, message", [
    (b"\xff", "not valid UTF-8 JSON"),
    (b"{", "not valid UTF-8 JSON"),
    (b'{"version": 2, "sequence_number": "1"}', "has version 2"),
    (b'{"version": 1, "sequence_number": "12x"}', "non-numeric sequence_number"),
    (b'{"version": 1, "sequence_number": 12}', "non-numeric sequence_number"),
    (b'{"version": 1}', "has no sequence_number"),
    (b'{"version": 1, "sequence_number": "1", "shard_end": "yes"}', "non-boolean shard_end"),
    (b'{"version": 1, "sequence_number": "1", "sub_sequence_number": -1}', "bad sub_sequence_number"),
    (b'{"version": 1, "sequence_number": "5", "sub_sequence_number": 4611686018427387905}',
     "bad sub_sequence_number 4611686018427387905"),
    (b'{"version": 1, "sequence_number": null, "reset_to": "EARLIEST"}', "bad reset_to"),
    (b'{"version": 1, "sequence_number": "5", "reset_to": "LATEST"}', "bad reset_to"),
])
def test_unreadable_checkpoints_are_errors_naming_where(raw: bytes, message: str) -> None:
    with pytest.raises(CheckpointError, match=f"checkpoint at /zk/path.*{message}|{message}") as info:
        Checkpoint.from_json("s", raw, "/zk/path")
    assert "/zk/path" in str(info.value)


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"7"])
def test_a_document_that_is_not_an_object_is_a_checkpoint_error(raw: bytes) -> None:
    with pytest.raises(CheckpointError, match="has version None"):
        Checkpoint.from_json("s", raw, "/where")


def test_a_timestamp_that_is_not_a_string_is_a_checkpoint_error() -> None:
    with pytest.raises(CheckpointError, match="unreadable timestamp 12"):
        parse(sequence_number=None, reset_to="AT_TIMESTAMP", timestamp=12)


@pytest.mark.parametrize("sub", [True, False, -1, "2", 1.5])
def test_a_bad_sub_sequence_number_is_a_checkpoint_error(sub: object) -> None:
    with pytest.raises(CheckpointError, match="bad sub_sequence_number"):
        parse(sequence_number=SEQ, sub_sequence_number=sub)


def test_a_bad_reset_lists_the_positions_it_accepts() -> None:
    with pytest.raises(CheckpointError, match="expected one of TRIM_HORIZON, LATEST, AT_TIMESTAMP and no "):
        parse(sequence_number=None, reset_to="EARLIEST")


# ------------------------------------------------------------------ the order


def test_reset_checkpoints_round_trip_and_are_behind_any_sequence() -> None:
    reset = Checkpoint("shardId-0", None, reset_to="TRIM_HORIZON").stamped("cli")
    back = Checkpoint.from_json("shardId-0", reset.to_json(), "here")
    assert back == reset and back.key is None
    assert reset.is_behind(Checkpoint("shardId-0", "1"))
    assert not Checkpoint("shardId-0", "1").is_behind(reset)
    assert b"reset_to" not in Checkpoint("shardId-0", "1").to_json()  # plain checkpoints keep the v1 layout


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


def test_a_checkpoint_of_a_whole_kinesis_record_is_ahead_of_one_inside_it() -> None:
    inside, whole = Checkpoint("s", "42", 4), Checkpoint("s", "42", None)
    assert inside.is_behind(whole) and not whole.is_behind(inside)
    assert Checkpoint("s", "42", 0).is_behind(inside) and not whole.is_behind(Checkpoint("s", "42", 9))
    assert whole.is_behind(Checkpoint("s", "43", 0))
