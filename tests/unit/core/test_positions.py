"""The one position type: its order, its two stored forms (byte for byte as stored before), its iterator."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import (
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    IteratorArgs,
    Kind,
    Position,
    after,
    after_record,
    at_timestamp,
    from_checkpoint_fields,
    iterator_args,
    shard_end,
    to_checkpoint_fields,
)
from kinesis_spout.records import WHOLE, SequenceKey

SEQ = "49590338271490256608559692538361571095921575989136588898"  # 56 digits, as Kinesis has them
T = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
T_PLUS2 = datetime(2024, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2)))

sequences = st.integers(min_value=0, max_value=10**56)
subs = st.one_of(st.integers(min_value=0, max_value=2**40), st.just(WHOLE))
times = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc))
afters = st.builds(lambda s, sub: after(s, sub), sequences, subs)
stamps = st.builds(at_timestamp, times)
ends = st.one_of(st.just(SHARD_END), st.just(shard_end(then=LATEST)),
                 st.builds(lambda t: shard_end(then=at_timestamp(t)), times),
                 st.builds(lambda s: shard_end(SequenceKey(s, WHOLE)), sequences))
positions = st.one_of(st.just(TRIM_HORIZON), st.just(LATEST), stamps, afters, ends)


# -- the order ---------------------------------------------------------------------------------------------------
def test_every_sentinel_relation() -> None:
    chain = [TRIM_HORIZON, at_timestamp(T), at_timestamp(T + timedelta(seconds=1)), LATEST, after(SEQ, 0),
             after(SEQ, 41), after(SEQ), after(int(SEQ) + 1, 0), SHARD_END]
    for i, low in enumerate(chain):
        for high in chain[i + 1:]:
            assert low < high and high > low and low <= high and high >= low and low != high, (low, high)
            assert not (high < low) and not (high <= low)
    assert LATEST < after(0, 0) and LATEST < after("1") and after("9" * 56) < SHARD_END
    assert shard_end(then=LATEST) > after("9" * 56) and shard_end(then=at_timestamp(T)) > LATEST


@settings(max_examples=300, deadline=None)
@given(sequences, subs, sequences, subs)
def test_the_order_of_after_positions_is_the_order_of_their_keys(s1: int, b1: int, s2: int, b2: int) -> None:
    k1, k2 = SequenceKey(s1, b1), SequenceKey(s2, b2)
    p1, p2 = after(s1, b1), after(s2, b2)
    assert (p1 < p2, p1 == p2, p1 > p2) == (k1 < k2, k1 == k2, k1 > k2)


@settings(max_examples=300, deadline=None)
@given(positions, positions)
def test_the_order_is_total_and_agrees_with_equality_and_hash(a: Position, b: Position) -> None:
    assert [a < b, a == b, a > b].count(True) == 1
    assert (a <= b) == (a < b or a == b)
    if a == b:
        assert hash(a) == hash(b)


@settings(max_examples=100, deadline=None)
@given(times, times)
def test_at_timestamp_positions_are_ordered_by_time(t1: datetime, t2: datetime) -> None:
    assert (at_timestamp(t1) < at_timestamp(t2)) == (t1 < t2)


def test_positions_are_frozen_and_hashable() -> None:
    with pytest.raises(AttributeError):
        after(SEQ).kind = Kind.LATEST  # type: ignore[misc]
    assert len({after(SEQ), after(int(SEQ)), after(SEQ, None), after(SEQ, WHOLE)}) == 1
    assert at_timestamp(T.replace(tzinfo=None)) == at_timestamp(T)  # a naive time is read as UTC


def test_impossible_positions_are_refused() -> None:
    for build in (lambda: Position(Kind.AFTER), lambda: Position(Kind.AT_TIMESTAMP),
                  lambda: Position(Kind.LATEST, SequenceKey(1)), lambda: Position(Kind.TRIM_HORIZON, timestamp=T),
                  lambda: shard_end(then=TRIM_HORIZON), lambda: shard_end(SequenceKey(1, WHOLE), then=LATEST),
                  lambda: after(-1), lambda: after(1, WHOLE + 1), lambda: after("12a")):
        with pytest.raises(ValueError):
            build()


# -- the Spark offset string form ----------------------------------------------------------------------------------
#: Every row of the offset table, as the source wrote them before this module existed.
STORED_OFFSETS = {
    "49590338271490256608559692538361571095921575989136588898": after(SEQ),
    "49590338271490256608559692538361571095921575989136588898:41": after(SEQ, 41),
    "49590338271490256608559692538361571095921575989136588898:0": after(SEQ, 0),
    "TRIM_HORIZON": TRIM_HORIZON,
    "LATEST": LATEST,
    "AT_TIMESTAMP:2024-05-06T07:08:09.123456+00:00": at_timestamp(T),
    "AT_TIMESTAMP:2024-05-06T09:08:09+02:00": at_timestamp(T_PLUS2),
    "SHARD_END:49590338271490256608559692538361571095921575989136588898": shard_end(SequenceKey(int(SEQ), WHOLE)),
    "SHARD_END": SHARD_END,
    "SHARD_END@LATEST": shard_end(then=LATEST),
    "SHARD_END@AT_TIMESTAMP:2024-05-06T07:08:09.123456+00:00": shard_end(then=at_timestamp(T)),
}


@pytest.mark.parametrize("text", sorted(STORED_OFFSETS))
def test_stored_offset_strings_decode_and_encode_to_the_same_bytes(text: str) -> None:
    position = Position.parse(text)
    assert position == STORED_OFFSETS[text]
    assert position.encode() == text


def test_shard_end_at_latest_is_not_a_plain_shard_end() -> None:
    assert Position.parse("SHARD_END@LATEST").then == LATEST
    assert Position.parse("SHARD_END@LATEST") != SHARD_END


@settings(max_examples=300, deadline=None)
@given(positions)
def test_offset_strings_round_trip(position: Position) -> None:
    assert Position.parse(position.encode()) == position


@pytest.mark.parametrize("text", ["", "12a", "1:2:3", "-1", "SHARD_END@TRIM_HORIZON", "SHARD_END@5", "AT_TIMESTAMP:",
                                  "AT_TIMESTAMP:yesterday", "SHARD_END:x", "EARLIEST", None, 12])
def test_unreadable_offset_strings_are_refused_naming_where(text: object) -> None:
    with pytest.raises(CheckpointError, match="offset of q, shard s"):
        Position.parse(text, "offset of q, shard s")


# -- the checkpoint fields -------------------------------------------------------------------------------------------
U = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
_HEAD = b'{"version":1,'
_TAIL = b'"owner":"worker-1","updated_at":"2024-01-02T03:04:05.678901+00:00"'
#: Checkpoints as the spout, the source, the lineage rule and the CLI stored them before this module existed.
STORED_CHECKPOINTS = {
    _HEAD + b'"sequence_number":"' + SEQ.encode() + b'","sub_sequence_number":null,"shard_end":false,' + _TAIL + b"}":
        after(SEQ),
    _HEAD + b'"sequence_number":"' + SEQ.encode() + b'","sub_sequence_number":41,"shard_end":false,' + _TAIL + b"}":
        after(SEQ, 41),
    _HEAD + b'"sequence_number":"' + SEQ.encode() + b'","sub_sequence_number":0,"shard_end":false,' + _TAIL + b"}":
        after(SEQ, 0),
    _HEAD + b'"sequence_number":null,"sub_sequence_number":null,"shard_end":false,' + _TAIL
    + b',"reset_to":"AT_TIMESTAMP","timestamp":"2024-05-06T07:08:09.123456+00:00"}': at_timestamp(T),
    _HEAD + b'"sequence_number":null,"sub_sequence_number":null,"shard_end":true,' + _TAIL + b',"reset_to":"LATEST"}':
        shard_end(then=LATEST),
    _HEAD + b'"sequence_number":null,"sub_sequence_number":null,"shard_end":true,' + _TAIL
    + b',"reset_to":"AT_TIMESTAMP","timestamp":"2024-05-06T07:08:09.123456+00:00"}': shard_end(then=at_timestamp(T)),
    _HEAD + b'"sequence_number":"' + SEQ.encode() + b'","sub_sequence_number":null,"shard_end":true,' + _TAIL + b"}":
        shard_end(SequenceKey(int(SEQ), WHOLE)),
    _HEAD + b'"sequence_number":null,"sub_sequence_number":null,"shard_end":true,' + _TAIL + b"}": SHARD_END,
    _HEAD + b'"sequence_number":null,"sub_sequence_number":null,"shard_end":false,' + _TAIL
    + b',"reset_to":"TRIM_HORIZON"}': TRIM_HORIZON,
    _HEAD + b'"sequence_number":null,"sub_sequence_number":null,"shard_end":false,' + _TAIL + b',"reset_to":"LATEST"}':
        LATEST,
}


@pytest.mark.parametrize("raw", sorted(STORED_CHECKPOINTS))
def test_stored_checkpoints_decode_and_encode_to_the_same_bytes(raw: bytes) -> None:
    checkpoint = Checkpoint.from_json("s", raw, "/cp/s")
    assert checkpoint.position == STORED_CHECKPOINTS[raw]
    rebuilt = Checkpoint.at("s", checkpoint.position, owner="worker-1", updated_at=U)
    assert rebuilt == checkpoint
    assert rebuilt.to_json() == raw


@settings(max_examples=300, deadline=None)
@given(positions)
def test_checkpoint_fields_round_trip(position: Position) -> None:
    assert from_checkpoint_fields(to_checkpoint_fields(position)) == position
    stored = Checkpoint.at("s", position, owner="o", updated_at=U).to_json()
    assert Checkpoint.from_json("s", stored, "/cp/s").position == position


def test_an_end_stored_with_a_reset_to_trim_horizon_is_a_plain_end() -> None:
    fields = to_checkpoint_fields(SHARD_END)._replace(reset_to="TRIM_HORIZON")
    assert from_checkpoint_fields(fields) == SHARD_END


# -- where a read starts -------------------------------------------------------------------------------------------
def test_iterator_args_of_every_kind() -> None:
    assert iterator_args(TRIM_HORIZON) == IteratorArgs("TRIM_HORIZON")
    assert iterator_args(LATEST) == IteratorArgs("LATEST")
    assert iterator_args(at_timestamp(T)) == IteratorArgs("AT_TIMESTAMP", timestamp=T)
    assert iterator_args(after(SEQ)) == IteratorArgs("AFTER_SEQUENCE_NUMBER", SEQ)
    assert iterator_args(after(SEQ, 41)) == IteratorArgs("AT_SEQUENCE_NUMBER", SEQ, skip_through=41)
    assert iterator_args(after(SEQ, 0)) == IteratorArgs("AT_SEQUENCE_NUMBER", SEQ, skip_through=0)
    for end in (SHARD_END, shard_end(SequenceKey(int(SEQ), WHOLE)), shard_end(then=LATEST)):
        assert iterator_args(end) is None
    assert IteratorArgs("AT_SEQUENCE_NUMBER", SEQ, skip_through=3).kwargs() == {
        "ShardIteratorType": "AT_SEQUENCE_NUMBER", "StartingSequenceNumber": SEQ}
    assert IteratorArgs("AT_TIMESTAMP", timestamp=T).kwargs() == {"ShardIteratorType": "AT_TIMESTAMP", "Timestamp": T}
    assert IteratorArgs("AT_TIMESTAMP", timestamp=T).describe() == f"AT_TIMESTAMP {T.isoformat()}"
    assert IteratorArgs("AFTER_SEQUENCE_NUMBER", "5").describe() == "AFTER_SEQUENCE_NUMBER 5"


# -- what a position says -------------------------------------------------------------------------------------------
def test_after_record_and_finished() -> None:
    key = SequenceKey(int(SEQ), 7)
    assert after_record(key, whole=True) == after(SEQ) and after_record(key, whole=False) == after(SEQ, 7)
    assert after(SEQ, 7).inside_aggregate and not after(SEQ).inside_aggregate
    assert after(SEQ, 7).finished() == shard_end(SequenceKey(int(SEQ), WHOLE)) == after(SEQ).finished()
    assert TRIM_HORIZON.finished() == at_timestamp(T).finished() == SHARD_END
    assert LATEST.finished() == shard_end(then=LATEST) == shard_end(then=LATEST).finished()
    assert shard_end(then=at_timestamp(T)).finished() == SHARD_END
    assert after(SEQ, 7).is_beyond(after(SEQ, 6)) and not after(SEQ, 6).is_beyond(after(SEQ, 6))
    assert after("1", 0).is_beyond(LATEST) and not TRIM_HORIZON.is_beyond(TRIM_HORIZON)


# -- the order's laws, the order among shard ends, and keys that are not whole numbers -------------------------------
@given(positions)
def test_a_position_is_equal_to_itself_in_the_order(p: Position) -> None:
    assert p >= p and p <= p and not p > p and not p < p
    same = Position(p.kind, p.key, p.timestamp, p.then)
    assert same == p and same >= p and same <= p


def test_ends_that_read_nothing_come_before_ends_that_read_a_record_and_are_ordered_by_what_they_hand_down() -> None:
    ladder = [SHARD_END, shard_end(then=at_timestamp(T)), shard_end(then=at_timestamp(T + timedelta(seconds=1))),
              shard_end(then=LATEST), shard_end(SequenceKey(1, WHOLE)), shard_end(SequenceKey(2, WHOLE))]
    assert sorted(reversed(ladder)) == ladder
    assert all(a < b and b > a and not b <= a for a, b in zip(ladder, ladder[1:]))


@pytest.mark.parametrize("key", [SequenceKey(5.0, 0), SequenceKey(5, 0.0), SequenceKey(-1, 0),  # type: ignore[arg-type]
                                 SequenceKey(5, WHOLE + 1)])
def test_a_key_that_is_not_a_pair_of_whole_numbers_in_range_is_refused(key: SequenceKey) -> None:
    with pytest.raises(ValueError, match=r"^bad key .*: expected ints, the sub-sequence number in 0 \.\. WHOLE$"):
        Position(Kind.AFTER, key)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Position(Kind.LATEST, timestamp=T), "LATEST: a timestamp belongs to AT_TIMESTAMP and nothing else"),
    (lambda: Position(Kind.AT_TIMESTAMP), "AT_TIMESTAMP: a timestamp belongs to AT_TIMESTAMP and nothing else"),
    (lambda: Position(Kind.LATEST, key=SequenceKey(1, WHOLE)), "LATEST has no sequence number"),
    (lambda: Position(Kind.AFTER), "AFTER needs a key"),
    (lambda: Position(Kind.SHARD_END, SequenceKey(1, WHOLE), then=LATEST),
     "only an end that read nothing hands down a start, LATEST or AT_TIMESTAMP"),
    (lambda: Position(Kind.SHARD_END, then=TRIM_HORIZON),
     "only an end that read nothing hands down a start, LATEST or AT_TIMESTAMP"),
])
def test_a_combination_no_position_has_is_refused_saying_why(make: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make()
    assert str(raised.value) == message
