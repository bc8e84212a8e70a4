"""Records and their keys: sequence keys ordered as integers, their ranks (the tracker's key form: SequenceKey.rank,
rank_of, parse_message_id_rank), message ids and their two parsers, and the Record value itself."""

from __future__ import annotations

import random

import pytest

from kinesis_spout.records import (
    RANK_BASE,
    WHOLE,
    Record,
    SequenceKey,
    message_id,
    parse_message_id,
    parse_message_id_rank,
    rank_of,
)

BIG = "49590338271490256608559692538361571095921575989136588898"


def kinesalite_like(index: int, second: int) -> int:
    """A 56-digit sequence number laid out as kinesalite (and Kinesis) lay theirs out: binary fields written in
    decimal, the record's index at bit 80, the second it arrived at bit 36."""
    return int("2" + "05466f823" + "1" + f"{index:016x}" + "00" + f"{second:09x}" + f"{1:08x}" + "2", 16)


def test_ranks_order_as_keys_and_give_the_key_back() -> None:
    rng = random.Random(1)
    seqs = [int(BIG), int(BIG) + 1, 10**56 - 1, 10**56, 0, 7]
    keys = [SequenceKey(s, sub) for s in seqs for sub in (0, 1, 2, rng.randint(3, 2**40), WHOLE, 2**64 - 1)]
    for a in keys:
        assert SequenceKey.from_rank(a.rank) == a
        for b in rng.sample(keys, 10):
            assert (a.rank < b.rank) == (a < b) and (a.rank == b.rank) == (a == b)
    assert SequenceKey(int(BIG)).rank == int(BIG) * RANK_BASE == rank_of(BIG)
    assert rank_of(BIG, 3) == SequenceKey.parse(BIG, 3).rank


def test_ranks_of_one_shard_spread_over_a_dicts_slots() -> None:
    """Sequence numbers of one shard differ by multiples of 2**80 here, and Python hashes ints modulo 2**61 - 1:
    shifted into place, their ranks would all share their low hash bits (one dict slot, long probe chains)."""
    seqs = [kinesalite_like(i, 1_700_000_000 + i // 500) for i in range(1000)]
    assert len({hash(s << 64) & 1023 for s in seqs}) <= 4  # the hazard a shift would meet
    assert len({hash(SequenceKey(s).rank) & 1023 for s in seqs}) > 600  # 1,000 random hashes fill about 632
    assert len({hash(SequenceKey(s).rank) & 1023 for s in range(1, 1001)}) > 600  # moto numbers them 1, 2, 3...


@pytest.mark.parametrize("key", [SequenceKey(-1), SequenceKey(1, -1), SequenceKey(1, 2**64)])
def test_keys_without_a_rank_are_refused(key: SequenceKey) -> None:
    with pytest.raises(ValueError, match="no rank for key"):
        key.rank  # noqa: B018


def test_message_ids_parse_to_ranks() -> None:
    assert parse_message_id_rank(f"shardId-000000000001:{BIG}") == ("shardId-000000000001", int(BIG) * RANK_BASE)
    assert parse_message_id_rank(f"s:{BIG}:3") == ("s", SequenceKey(int(BIG), 3).rank)
    assert parse_message_id_rank("s:0012:0") == ("s", SequenceKey(12).rank)  # as parse_message_id reads it
    assert parse_message_id_rank("s:\u0663") == ("s", SequenceKey(3).rank)  # a digit str.isdigit() knows
    with pytest.raises(ValueError, match="malformed message id"):
        parse_message_id_rank(f"s:{BIG}:{2**64}")  # a sub-sequence no rank holds


MALFORMED = ["", "shard", "shard:", ":12", "s:1:2:3", "s:x", "s: 12", "s:12 ", "s:+1", "s:-0", "s:1_0", "s:1x2",
             "s:1:", "s:1: 2", "s:1:+2", "s:\u00b2", "s:1:\u00b2", "s:\u00b2:", "s:12\n"]


@pytest.mark.parametrize("mid", MALFORMED)
def test_malformed_message_ids_are_refused_by_both_parsers(mid: str) -> None:
    for parse in (parse_message_id, parse_message_id_rank):
        with pytest.raises(ValueError, match="malformed message id"):
            parse(mid)


def test_both_parsers_agree_on_random_ids() -> None:
    """Random short ids made of digits and the characters int() treats specially: the two parsers accept the same
    ids, and the rank is the key's."""
    rng = random.Random(7)
    alphabet = ["0", "1", "9", ":", "_", " ", "+", "-", "x", "\u0663", "\u00b2", "\n"]
    for _ in range(20_000):
        mid = "s:" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        try:
            shard, key = parse_message_id(mid)
        except ValueError as exc:
            assert "malformed message id" in str(exc)
            with pytest.raises(ValueError, match="malformed message id"):
                parse_message_id_rank(mid)
        else:
            assert parse_message_id_rank(mid) == (shard, key.rank)
            assert key.sequence_number.isdigit()


def test_a_records_rank_is_its_keys() -> None:
    for sub, key in ((None, SequenceKey(int(BIG))), (4, SequenceKey(int(BIG), 4))):
        record = Record("shardId-000000000001", BIG, sub, "pk", b"data", None, key, 9 if sub else 0)
        assert record.rank == key.rank == parse_message_id_rank(record.message_id)[1]


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
