"""KPL de-aggregation of well-formed aggregates: the project's decoder agrees record for record with
aws-kinesis-agg's own de-aggregator on aggregates made by aws-kinesis-agg's aggregator (a producer nobody here
wrote), with every length encoding, many keys, explicit hash keys, and the unknown and non-minimal fields protobuf
allows; the hash key each user record is routed by. No servers."""

from __future__ import annotations

import hashlib

import pytest

from kinesis_spout.kinesis.aggregation import MAGIC, UserRecord, deaggregate, hash_key, is_aggregated
from kinesis_spout.kinesis.retrieval.polling import FetchResult

from .aggregates import (
    CASES,
    aggregate,
    assert_read_as_made,
    ld,
    payload,
    record,
    seal,
    tag,
    their_pairs,
    theirs,
    uint,
    varint,
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_agrees_with_aws_kinesis_agg_record_for_record(case: str) -> None:
    blob = aggregate(CASES[case])
    assert is_aggregated(blob)
    ours = deaggregate(blob)
    assert ours is not None
    reference = theirs(blob)
    assert [(r.partition_key, r.data) for r in ours] == [(r.partition_key, r.data) for r in reference]
    assert [(pk, data) for pk, data, _ in CASES[case]] == [(r.partition_key, r.data) for r in ours]
    assert [r.explicit_hash_key for r in ours] == [ehk for _, _, ehk in CASES[case]]


def test_plain_data_is_not_an_aggregate() -> None:
    for data in (b"", b"plain", b'{"json": true}', MAGIC[:3]):
        assert not is_aggregated(data) and deaggregate(data) is None


def test_unknown_fields_are_skipped() -> None:
    """Tags (field 4 of a record) and fields a newer producer may add are skipped, not errors."""
    record = b"\x08\x00" + b"\x1a\x02hi" + b"\x22\x06\x0a\x01k\x12\x01v" + b"\x28\x05"  # tags, then varint field 5
    body = b"\x0a\x02pk" + b"\x1a" + bytes([len(record)]) + record + b"\x25\x01\x02\x03\x04"  # a fixed32 field 4
    assert deaggregate(MAGIC + body + hashlib.md5(body).digest()) == [UserRecord("pk", None, b"hi")]


def test_every_length_encoding_of_records_and_data_is_read_as_aws_kinesis_agg_made_it() -> None:
    """Data of 0 to 140 bytes (record and data lengths cross 127/128, one byte to two), around 16 KiB (two bytes to
    three) and larger: read record for record, including a record of exactly 128 bytes."""
    sizes = [*range(141), *range(16_370, 16_395), 20_000, 100_000]
    assert_read_as_made([(f"pk-{i % 7}", payload(i, size), None) for i, size in enumerate(sizes)])


@pytest.mark.parametrize("size", [0, 25, 130])
def test_thousands_of_partition_keys_are_read_as_aws_kinesis_agg_made_them(size: int) -> None:
    """Indexes over 127 take two bytes; for 25-byte data the byte after a two-byte index is 0x1A (the data tag)
    where a one-byte index would have it, so a loose shape check would read such records wrong."""
    assert_read_as_made([(f"key-{i}", payload(i, size), None) for i in range(3_500)])


def test_explicit_hash_keys_are_read_in_every_combination_of_index_and_data_length() -> None:
    """Each of 40 explicit hash keys with data of 0 to 39 bytes (an index equal to the data length plus 2 makes a
    record whose byte after the partition key index lines up with its end), then 300 more keys (two-byte
    indexes) beside partition key indexes over 127."""
    grid = [(f"pk-{length % 3}", payload(e, length), str(2 ** 127 + e)) for e in range(40) for length in range(40)]
    wide = [(f"wide-{i}", payload(i, i % 30), str(i)) for i in range(300)]
    assert_read_as_made(grid + wide)


def test_non_minimal_encodings_are_read() -> None:
    """Varints with extra continuation bytes are valid protobuf: a records tag written in two bytes (so it is
    not the one-byte 0x1A), and padded lengths and indexes; also a records field that ends the message."""
    records = [record(0, b"first"), uint(1, 1, width=3) + ld(3, b"second", len_width=2),
               uint(1, 0) + uint(2, 0, width=2) + ld(3, b"third" * 30, len_width=3), record(1, b"")]
    body = ld(1, b"pk-a") + ld(2, b"12345") + ld(1, b"pk-b", len_width=2)
    body += ld(3, records[0], tag_width=2) + ld(3, records[1], len_width=2) + ld(3, records[2], tag_width=3)
    body += ld(3, records[3], tag_width=2, len_width=2)  # the last field of the message
    blob = seal(body)
    expected = [UserRecord("pk-a", None, b"first"), UserRecord("pk-b", None, b"second"),
                UserRecord("pk-a", "12345", b"third" * 30), UserRecord("pk-b", None, b"")]
    assert deaggregate(blob) == expected
    assert their_pairs(blob) == [(r.partition_key, r.data) for r in expected]


def test_tables_may_follow_the_records_and_a_key_may_end_the_message() -> None:
    """Field order is free in protobuf: records first, then the key tables, the last key ending the message."""
    body = ld(3, record(1, b"x", ehk=0)) + ld(3, record(0, b"y")) + ld(1, b"pk-a") + ld(2, b"99") + ld(1, b"pk-b")
    blob = seal(body)
    assert deaggregate(blob) == [UserRecord("pk-b", "99", b"x"), UserRecord("pk-a", None, b"y")]
    assert their_pairs(blob) == [("pk-b", b"x"), ("pk-a", b"y")]
    assert deaggregate(seal(ld(1, b"pk-a") + ld(2, b"99"))) is None  # tables and no records: delivered whole


def test_unknown_fields_of_every_wire_type_are_skipped_at_both_levels() -> None:
    """Varint (a 10-byte one: the largest 64-bit value), fixed64, length-delimited and fixed32 fields a newer
    producer may add, before the tables and inside records; a known field number with an unexpected wire type is
    unknown too (a partition key index written as fixed64 is skipped, as protobuf does)."""
    fixed64 = b"\x00\x00\x00" + ld(1, b"zz") + b"\x00"  # 8 bytes that hold a key table entry 3 bytes in
    top = tag(9, 1) + fixed64 + uint(10, 2 ** 64 - 1) + ld(11, b"unknown") + tag(12, 5) + b"\x01\x02\x03\x04"
    assert len(varint(2 ** 64 - 1)) == 10
    odd_pk = tag(1, 1) + b"\x00\x1a\x0a" + b"\xff" * 5 + record(0, b"y")  # the first 3 bytes look like 08 pk 1A
    records = [record(0, b"x") + uint(5, 2 ** 64 - 1) + tag(6, 1) + b"\x1a" * 8 + ld(4, ld(1, b"k") + ld(2, b"v"))
               + ld(7, b"\x08\x00") + tag(8, 5) + b"\x1a\x1a\x1a\x1a",
               odd_pk,
               uint(1, 0) + uint(2, 0) + ld(3, b"z") + uint(5, 2 ** 64 - 1)]
    body = top + ld(1, b"pk-a") + ld(7, b"not a key") + ld(2, b"77") + b"".join(ld(3, r) for r in records)
    blob = seal(body)
    expected = [UserRecord("pk-a", None, b"x"), UserRecord("pk-a", None, b"y"), UserRecord("pk-a", "77", b"z")]
    assert deaggregate(seal(top + ld(1, b"pk-a") + ld(3, record(0, b"t")))) == [UserRecord("pk-a", None, b"t")]
    assert deaggregate(blob) == expected
    assert their_pairs(blob) == [(r.partition_key, r.data) for r in expected]


@pytest.mark.parametrize("explicit", ["0x10", "abc", "-5", "", " 12", "12 ", "1e3", "١٢"])
def test_an_explicit_hash_key_that_is_not_a_decimal_number_has_no_hash_key(explicit: str) -> None:
    """No shard can be told for such a user record (the getter keeps it), whatever its partition key hashes to."""
    assert hash_key("partition", explicit) is None


def test_the_hash_key_is_the_explicit_decimal_one_else_the_partition_keys_md5_big_endian() -> None:
    assert hash_key("partition", "340282366920938463463374607431768211455") == (1 << 128) - 1
    assert hash_key("partition", "007") == 7
    assert hash_key("partition", None) == int.from_bytes(hashlib.md5(b"partition").digest(), "big")


def test_a_fetch_result_needs_the_count_of_kinesis_records_fetched() -> None:
    """Without it a reply whose user records were all dropped would pass for the shard's tip."""
    with pytest.raises(TypeError, match="fetched"):
        FetchResult([], 0, False)  # type: ignore[call-arg]
    assert FetchResult([], 0, False, 3).fetched == 3
