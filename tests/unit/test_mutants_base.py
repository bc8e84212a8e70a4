"""The checkpoint value's stored form, exactly: what is written, what is read back, and what is refused. Written
against mutants the other tests let survive."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.errors import CheckpointError

SEQ = "49590338271490256608559692538361571095921575989136588898"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
PLUS_TWO = timezone(timedelta(hours=2))


def parse(**doc: object) -> Checkpoint:
    return Checkpoint.from_json("s", json.dumps({"version": 1, **doc}).encode(), "/where")


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
