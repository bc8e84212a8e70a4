"""Sizing records in bulk (record_sizes, records_bytes): the same figures as Record.size, one by one and summed,
for plain records and user records of KPL aggregates, empty data and multi-byte partition keys included."""

from __future__ import annotations

from kinesis_spout.records import Record, SequenceKey, record_sizes, records_bytes


def records() -> list[Record]:
    out = [Record("shardId-0", "7", None, "pk", b"plain data", None, SequenceKey(7, 0))]
    out += [Record("shardId-0", "9", sub, key, data, None, SequenceKey(9, sub), 3)
            for sub, (key, data) in enumerate([("ключ", b""), ("k", b"x" * 1000), ("", b"yz")])]
    return out


def test_bulk_sizes_are_the_records_own_sizes() -> None:
    rs = records()
    assert record_sizes(rs) == [r.size for r in rs] == [12, 4, 1001, 2]
    assert records_bytes(rs) == sum(r.size for r in rs) == 1019
    assert record_sizes([]) == [] and records_bytes([]) == 0
    assert records_bytes(tuple(rs[1:])) == 1007  # any sequence of records
