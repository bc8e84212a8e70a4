"""The KPL aggregate encoder: what it writes is read back record for record by aws-kinesis-agg's de-aggregator and by
ours, and its size estimate is the size of the record it makes (Kinesis' 1 MiB limit is kept exactly)."""

from __future__ import annotations

import pytest

from kinesis_spout.kinesis.aggregation import UserRecord, deaggregate, hash_key
from kinesis_spout.kinesis.writing.aggregator import AggregateBuilder
from tests.unit.kinesis.aggregates import CASES, payload, theirs


def build(records: list[tuple[str, bytes, str | None]]) -> tuple[bytes, str, str]:
    builder = AggregateBuilder()
    for pk, data, ehk in records:
        builder.add(pk, ehk, data)
    return builder.build()


@pytest.mark.parametrize("case", sorted(CASES))
def test_aggregates_are_read_back_identically_by_aws_kinesis_agg_and_by_ours(case: str) -> None:
    records = CASES[case]
    data, pk, ehk = build(records)
    expected = [UserRecord(p, e, d) for p, d, e in records]
    assert theirs(data) == expected
    assert deaggregate(data) == expected
    first_pk, _, first_ehk = records[0]
    assert pk == first_pk and int(ehk) == hash_key(first_pk, first_ehk), "routed by its first user record"


def test_the_size_estimate_is_the_size_of_the_record_made_at_every_step() -> None:
    builder = AggregateBuilder()
    records = [(f"ключ-{i % 7}", payload(i, i * 37 % 300), None if i % 3 else str(2 ** 127 + i % 5))
               for i in range(200)]
    for pk, data, ehk in records:
        predicted = builder.size_with(pk, ehk, data)
        builder.add(pk, ehk, data)
        blob, outer_pk, _ = builder.build()
        assert predicted == len(blob) + len(outer_pk.encode())


def test_long_keys_and_data_over_128_bytes_use_multi_byte_lengths() -> None:
    records = [("p" * 256, b"x" * 20_000, str(2 ** 128 - 1)), ("q", b"", None), ("p" * 256, b"y" * 200, None)]
    data, _, _ = build(records)
    assert deaggregate(data) == [UserRecord(p, e, d) for p, d, e in records]
    # aws-kinesis-agg's de-aggregator hands a record without an explicit hash key the previous record's: compare the
    # rest there
    assert [(r.partition_key, r.data) for r in theirs(data)] == [(p, d) for p, d, _ in records]


def test_a_key_kinesis_refuses_is_refused_before_it_is_added_by_add_and_by_fill() -> None:
    wide = "\U0001F600" * 129  # 258 UTF-16 code units
    builder = AggregateBuilder()
    with pytest.raises(ValueError, match="partition key of 258 UTF-16 code units: Kinesis takes 1 to 256"):
        builder.add(wide, None, b"x")
    assert len(builder) == 0
    bulk = AggregateBuilder()
    with pytest.raises(ValueError, match="partition key of 258 UTF-16 code units"):
        bulk.fill([("k", None, b"a"), (wide, None, b"b")], 0, 10_000)
    assert len(bulk) == 1 and bulk.size_with("k", None, b"c") == build([("k", b"a", None), ("k", b"c", None)])[0]\
        .__len__() + 1, "what was added before the refused key stays, sized as before"
    with pytest.raises(ValueError, match="partition key of 0 UTF-16 code units"):
        AggregateBuilder().fill([("", None, b"a")], 0, 10_000)
    data, pk, _ = build([("\U0001F600" * 128, b"a", None)])
    assert pk == "\U0001F600" * 128 and deaggregate(data) == [UserRecord(pk, None, b"a")]


def test_an_empty_aggregate_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one user record"):
        AggregateBuilder().build()


@pytest.mark.parametrize("limit", [200, 1_000, 4_321, 70_000])
def test_filling_in_bulk_makes_the_aggregates_of_record_by_record_adds_and_stops_at_the_same_record(
        limit: int) -> None:
    records = [(f"ключ-{i % 50}" if i % 4 else "k" * (i % 200 + 1), None if i % 3 else str(2 ** 127 + i % 9),
                payload(i, i * 37 % 700)) for i in range(600)]
    start = 0
    while start < len(records):
        one_by_one = AggregateBuilder()
        end = start
        while end < len(records) and one_by_one.size_with(*records[end]) <= limit:
            one_by_one.add(*records[end])
            end += 1
        bulk = AggregateBuilder()
        assert bulk.fill(records, start, limit) == end
        if end == start:  # too large for an aggregate of its own
            start += 1
            continue
        built = bulk.build()
        assert built == one_by_one.build()
        assert len(built[0]) + len(built[1].encode()) <= limit
        start = end
