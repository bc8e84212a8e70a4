"""Checkpoints stored in the version 1 format (as ZooKeeper holds them) read back to the same positions, and are
written again byte for byte: the stored format does not change with the type that holds them."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import LATEST, TRIM_HORIZON, Position, after, at_timestamp, shard_end
from kinesis_spout.records import WHOLE, SequenceKey

SHARD = "shardId-000000000001"
SEQ = "49590338271490256608559692538361571095921575989136588898"
PIN = datetime(2026, 11, 20, 8, 30, 15, 250000, tzinfo=timezone.utc)
WRITTEN = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
HEAD = b'{"version":1,"sequence_number":'
STAMP = b'"owner":"worker-1","updated_at":"2026-11-29T12:00:00+00:00"'
NOTHING = b'null,"sub_sequence_number":null,'

#: the documents the library wrote before Checkpoint held a Position (captured from that code), and their positions
STORED: list[tuple[str, bytes, Position]] = [
    ("a whole record", HEAD + b'"' + SEQ.encode() + b'","sub_sequence_number":null,"shard_end":false,' + STAMP + b"}",
     after(SEQ)),
    ("inside an aggregate", HEAD + b'"' + SEQ.encode() + b'","sub_sequence_number":3,"shard_end":false,' + STAMP
     + b"}", after(SEQ, 3)),
    ("after user record 0", HEAD + b'"' + SEQ.encode() + b'","sub_sequence_number":0,"shard_end":false,' + STAMP
     + b"}", after(SEQ, 0)),
    ("an end read to its last record", HEAD + b'"' + SEQ.encode() + b'","sub_sequence_number":null,"shard_end":true,'
     + STAMP + b"}", shard_end(SequenceKey(int(SEQ), WHOLE))),
    ("an end that read nothing", HEAD + NOTHING + b'"shard_end":true,' + STAMP + b"}", shard_end()),
    ("an end that hands down LATEST", HEAD + NOTHING + b'"shard_end":true,' + STAMP + b',"reset_to":"LATEST"}',
     shard_end(then=LATEST)),
    ("an end that keeps its pin", HEAD + NOTHING + b'"shard_end":true,' + STAMP
     + b',"reset_to":"AT_TIMESTAMP","timestamp":"2026-11-20T08:30:15.250000+00:00"}',
     shard_end(then=at_timestamp(PIN))),
    ("a reset to TRIM_HORIZON", HEAD + NOTHING + b'"shard_end":false,' + STAMP + b',"reset_to":"TRIM_HORIZON"}',
     TRIM_HORIZON),
    ("a reset to LATEST", HEAD + NOTHING + b'"shard_end":false,' + STAMP + b',"reset_to":"LATEST"}', LATEST),
    ("a pinned start", HEAD + NOTHING + b'"shard_end":false,' + STAMP
     + b',"reset_to":"AT_TIMESTAMP","timestamp":"2026-11-20T08:30:15.250000+00:00"}', at_timestamp(PIN)),
]


@pytest.mark.parametrize(("raw", "position"), [(raw, position) for _, raw, position in STORED],
                         ids=[name for name, _, _ in STORED])
def test_a_stored_checkpoint_reads_back_to_its_position_and_is_written_again_byte_for_byte(raw: bytes,
                                                                                          position: Position) -> None:
    checkpoint = Checkpoint.from_json(SHARD, raw, "/app/stream/checkpoints/" + SHARD)
    assert checkpoint.position == position
    assert (checkpoint.shard_id, checkpoint.owner, checkpoint.updated_at) == (SHARD, "worker-1", WRITTEN)
    assert checkpoint == Checkpoint.at(SHARD, position, "worker-1", WRITTEN)
    assert checkpoint.to_json() == raw


def test_the_stored_fields_are_read_from_the_position() -> None:
    inside = Checkpoint.at(SHARD, after(SEQ, 3))
    assert (inside.sequence_number, inside.sub_sequence_number, inside.shard_end, inside.reset_to,
            inside.timestamp) == (SEQ, 3, False, None, None)
    assert inside.key == SequenceKey(int(SEQ), 3) == inside.position.key
    end = Checkpoint.at(SHARD, shard_end(then=at_timestamp(PIN)))
    assert (end.sequence_number, end.sub_sequence_number, end.shard_end, end.reset_to, end.timestamp, end.key) == \
        (None, None, True, "AT_TIMESTAMP", PIN, None)


def test_the_fields_build_the_same_checkpoint_as_its_position() -> None:
    assert Checkpoint(SHARD, SEQ, 3) == Checkpoint.at(SHARD, after(SEQ, 3))
    assert Checkpoint(SHARD, None, shard_end=True, reset_to="LATEST") == Checkpoint.at(SHARD, shard_end(then=LATEST))
    assert Checkpoint(SHARD, None, reset_to="AT_TIMESTAMP", timestamp=PIN) == Checkpoint.pinned(SHARD, PIN)
    assert Checkpoint(SHARD, SEQ, owner="w", updated_at=WRITTEN).stamped("v").position == after(SEQ)


def test_fields_that_store_no_position_are_refused_when_the_checkpoint_is_made() -> None:
    with pytest.raises(CheckpointError, match=rf"^checkpoint at shard {SHARD} has no sequence_number$"):
        Checkpoint(SHARD, None)
    with pytest.raises(CheckpointError, match=r"bad reset_to 'LATEST': expected one of .* and no sequence_number"):
        Checkpoint(SHARD, SEQ, reset_to="LATEST")
    with pytest.raises(TypeError, match="^Checkpoint takes a position or the fields that store one, not both$"):
        Checkpoint(SHARD, SEQ, position=after(SEQ))
