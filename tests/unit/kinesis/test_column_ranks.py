"""The tracker's ranks of a piece of columns (``ranks_of``) and the test that vouches for their order without an
``int()`` a record (``in_rank_order``), which lets a columnar batch put a piece in flight by its ends' ranks alone."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns, in_rank_order, ranks_of, to_records

BASE = 49590338271490256608559692538361571095921575989136588898
# sequence numbers as strings: the 56-digit ones Kinesis sends, shorter and longer ones, leading zeros, and what
# int() takes but does not order as a string does (signs, spaces, underscores, other digits)
SEQS = st.one_of(st.integers(BASE, BASE + 50).map(str), st.integers(0, 120).map(str),
                 st.sampled_from(["0050", "+51", " 52", "5_3", "\u0665\u0665", "00"]))
SUBS = st.one_of(st.none(), st.integers(0, 4))


def columns(seqs: list[str], subs: list[int | None] | None) -> RecordColumns:
    n = len(seqs)
    agg = None if subs is None else [0 if u is None else 5 for u in subs]
    return RecordColumns("shardId-0", seqs, subs, ["k"] * n, [b"x"] * n, [None] * n, True, agg)


def increasing(ranks: list[int]) -> bool:
    return all(a < b for a, b in zip(ranks, ranks[1:]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(SEQS, SUBS), max_size=8), st.booleans())
def test_a_piece_said_in_order_has_strictly_increasing_ranks_and_they_are_the_records_ranks(
        rows: list[tuple[str, int | None]], kpl: bool) -> None:
    seqs = [s for s, _ in rows]
    cols = columns(seqs, [u for _, u in rows] if kpl else None)
    try:
        ranks = ranks_of(cols)
    except ValueError:  # not a number: never said in order
        assert not in_rank_order(cols)
        return
    assert ranks == [record.rank for record in to_records(cols)]
    if in_rank_order(cols):
        assert increasing(ranks)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**20), st.integers(0, 3)), min_size=1, max_size=12), st.booleans())
def test_what_a_shard_reads_is_said_in_order(steps: list[tuple[int, int]], kpl: bool) -> None:
    """Sequence numbers of one length, increasing; with KPL, each aggregate's user records 0..n-1."""
    seqs: list[str] = []
    subs: list[int | None] = []
    seq = BASE
    for gap, users in steps:
        seq += gap
        for sub in range(users + 1) if kpl else [None]:
            seqs.append(str(seq))
            subs.append(sub)
    assert in_rank_order(columns(seqs, subs if kpl else None))


def test_equal_or_falling_sequence_numbers_are_not_in_order() -> None:
    a, b = str(BASE), str(BASE + 1)
    assert not in_rank_order(columns([a, a], None))
    assert not in_rank_order(columns([b, a], None))
    assert not in_rank_order(columns([a, a], [1, 1]))
    assert not in_rank_order(columns([a, a], [None, 0]))
    assert in_rank_order(columns([a, a, b], [0, 1, 0]))
    # strings that increase as strings but not as numbers: they differ in length
    assert not in_rank_order(columns(["10", "9"], None))
    assert not in_rank_order(columns(["10", "100", "2", "20"], None))
