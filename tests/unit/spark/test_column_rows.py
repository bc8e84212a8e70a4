"""ColumnRows (the source's records kept as columns) answers as the records it stands for: slices, joins, keys,
bytes, the first record past a cutoff (to the microsecond datetime.fromtimestamp rounds to), cuts at positions, and
the Arrow rows of the source; and the batch reader's time bounds keep the rows the record path kept."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns, to_records
from kinesis_spout.positions import Position, after_record
from kinesis_spout.records import records_bytes
from kinesis_spout.spark.shared.schema import records_to_arrow
from kinesis_spout.spark.source.batch import between
from kinesis_spout.spark.source.executor_batches import within
from kinesis_spout.spark.source.executor_read import within_rows
from kinesis_spout.spark.source.offsets import first_after
from kinesis_spout.spark.source.rows import ColumnRows, join_rows, keys_up_to, rows_to_arrow

BASE = 1_764_400_000.0


@st.composite
def pieces(draw: st.DrawFn) -> list[RecordColumns]:
    """Pieces of one shard in key order: plain records and user records of aggregates, arrival seconds near each
    other (some unknown)."""
    out = []
    seq = draw(st.integers(1, 10**6)) * 10**20
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, 6))
        seqs: list[str] = []
        subs: list[int | None] = []
        aggregated: list[int] = []
        for _ in range(n):
            users = draw(st.integers(0, 3))
            seq += draw(st.integers(1, 10**9))
            if users:
                seqs += [str(seq)] * users
                subs += list(range(users))
                aggregated += [users] * users
            else:
                seqs.append(str(seq))
                subs.append(None)
                aggregated.append(0)
        k = len(seqs)
        arrivals = draw(st.lists(st.one_of(st.none(), st.floats(BASE, BASE + 0.01)), min_size=k, max_size=k))
        plain = not any(aggregated)
        out.append(RecordColumns("shardId-000000000003", seqs, None if plain else subs, [f"k{i}" for i in range(k)],
                                 [bytes(i % 7) for i in range(k)], arrivals, True, None if plain else aggregated))
    return out


@settings(max_examples=60, deadline=None)
@given(pieces(), st.data())
def test_rows_answer_as_their_records(parts: list[RecordColumns], data: st.DataObject) -> None:
    rows = ColumnRows(parts[:1])
    for piece in parts[1:]:
        rows.extend(ColumnRows([piece]))
    records = [r for p in parts for r in to_records(p)]
    assert list(rows) == records and len(rows) == len(records) and rows.nbytes() == records_bytes(records)
    n = len(records)
    a, b = data.draw(st.integers(0, n)), data.draw(st.integers(0, n))
    assert list(rows[a:b]) == records[a:b]
    if n:
        i = data.draw(st.integers(-n, n - 1))
        assert rows[i] == records[i] and rows.key(i) == records[i].key
        key = records[data.draw(st.integers(0, n - 1))].key
        assert keys_up_to(rows, key) == sum(1 for r in records if r.key <= key)
        start, end = (after_record(records[j].key, data.draw(st.booleans())) for j in sorted((a % n, b % n)))
        for low in (start, Position.parse("TRIM_HORIZON")):
            assert list(within_rows(rows, low, end)) == within(records, low, end)
    cutoff = datetime.fromtimestamp(BASE, timezone.utc) + timedelta(microseconds=data.draw(st.integers(0, 10_000)))
    assert rows.first_after(cutoff) == first_after((r.approximate_arrival_timestamp for r in records), cutoff)
    assert list(join_rows([rows[:a], rows[a:]])) == records
    assert rows_to_arrow("s", rows).equals(records_to_arrow("s", records))


def test_the_first_row_past_a_cutoff_is_found_to_the_rounded_microsecond() -> None:
    cutoff = datetime.fromtimestamp(BASE, timezone.utc) + timedelta(microseconds=5)
    answers = set()
    for tenth in range(40, 70):  # seconds around the cutoff, a tenth of a microsecond apart
        rows = ColumnRows([RecordColumns("s", ["1"], None, ["a"], [b""], [BASE + tenth * 1e-7], True, None)])
        answer = rows.first_after(cutoff)
        assert answer == first_after([r.approximate_arrival_timestamp for r in rows], cutoff)
        answers.add(answer)
    assert answers == {None, 0}  # both sides of the rounding were tried


def test_a_batch_read_keeps_the_rows_between_its_times_as_the_record_path_did() -> None:
    at = [BASE + 1, None, BASE, BASE + 3, BASE + 2, BASE + 4]
    columns = RecordColumns("s", [str(i) for i in range(1, 7)], None, list("abcdef"), [b"x"] * 6, at, True, None)
    records = to_records(columns)
    begin = datetime.fromtimestamp(BASE + 0.5, timezone.utc)
    end = datetime.fromtimestamp(BASE + 2.5, timezone.utc)
    kept = [r for r in records if r.approximate_arrival_timestamp is None or r.approximate_arrival_timestamp >= begin]
    late = next(i for i, r in enumerate(kept) if r.approximate_arrival_timestamp is not None
                and r.approximate_arrival_timestamp > end)
    table, past = between(rows_to_arrow("stream", ColumnRows([columns])), begin, end)
    assert past and table.equals(records_to_arrow("stream", kept[:late]))
