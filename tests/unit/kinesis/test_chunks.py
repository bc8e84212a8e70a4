"""The readers' buffer of columns (kinesis/chunks.py) against the rule the readers kept on a deque of records: up to
``n`` of the oldest records, the first always, then while the bytes taken stay under the budget; taken as records or
as columns, from pieces of columns and of records alike."""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate

from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_spout.kinesis.retrieval.chunks import ChunkBuffer
from kinesis_spout.kinesis.retrieval.wire_columns import ReplyColumns, expand, to_records
from kinesis_spout.records import Record

from ..mutation import PHASES

counter = iter(range(10 ** 9))


def piece(sizes: list[int], as_columns: bool) -> object:
    seqs = [str(next(counter) + 1) for _ in sizes]
    reply = ReplyColumns(seqs, ["k"] * len(sizes), [b"x" * (s - 1) for s in sizes], [1.5] * len(sizes), True, None,
                         None)
    columns = expand(reply, "shardId-0", False)
    return columns if as_columns else to_records(columns)


def model_take(buffer: list[Record], n: int, max_bytes: int) -> list[Record]:
    """The readers' deque rule, as it was."""
    if n <= 0 or max_bytes <= 0:
        return []
    out = buffer[:n]
    sizes = [r.size for r in out]
    if sum(sizes) > max_bytes:
        out = out[:bisect_left(list(accumulate(sizes)), max_bytes) + 1]
    del buffer[:len(out)]
    return out


@settings(max_examples=80, deadline=None, phases=PHASES)
@given(pieces=st.lists(st.tuples(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.booleans()), max_size=6),
       takes=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 120), st.booleans()), max_size=10))
def test_takes_follow_the_readers_rule_for_count_and_bytes(pieces: list[tuple[list[int], bool]],
                                                          takes: list[tuple[int, int, bool]]) -> None:
    buffer, model = ChunkBuffer(), []
    for sizes, as_columns in pieces:
        p = piece(sizes, as_columns)
        assert buffer.add(p) == sum(sizes)  # type: ignore[arg-type]
        model.extend(to_records(p) if not isinstance(p, list) else p)  # type: ignore[arg-type]
    for n, max_bytes, as_columns in takes:
        expected = model_take(model, n, max_bytes)
        got = [r for c in buffer.take_columns(n, max_bytes) for r in to_records(c)] if as_columns else \
            buffer.take_records(n, max_bytes)
        assert got == expected
        assert len(buffer) == len(model) and buffer.nbytes == sum(r.size for r in model)


def test_a_budget_of_one_byte_still_takes_the_first_record_and_one_left_takes_the_next_piece_s_first() -> None:
    """The rule at its smallest: a 1-byte budget takes the first record (the first always); a budget with 1 byte
    left when a piece runs out takes the next piece's first record (the one whose bytes reach the budget is the
    last taken)."""
    for as_columns in (False, True):
        buffer, model = ChunkBuffer(), []
        for sizes in ([1, 1], [2], [5], [3]):
            p = piece(sizes, as_columns)
            buffer.add(p)  # type: ignore[arg-type]
            model.extend(to_records(p) if not isinstance(p, list) else p)  # type: ignore[arg-type]
        for n, max_bytes in ((5, 1), (5, 4), (5, 100)):
            expected = model_take(model, n, max_bytes)
            got = buffer.take_records(n, max_bytes)
            assert got == expected and len(got) == {1: 1, 4: 3, 100: 1}[max_bytes]
