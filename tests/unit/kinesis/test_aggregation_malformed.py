"""KPL de-aggregation, exactly: every length encoding, many keys, explicit hash keys, unknown and non-minimal
fields read as aws-kinesis-agg (a producer and decoder nobody here wrote) reads them, and every malformed shape
delivered as the plain record it is (``None``), never half-read. Written against mutants the other tests let
survive. No servers."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
from aws_kinesis_agg.deaggregator import iter_deaggregate_records

from kinesis_spout.kinesis import aggregation
from kinesis_spout.kinesis.aggregation import MAGIC, UserRecord, aggregate_problem, deaggregate

from .test_aggregation import aggregate

NOW = datetime(2026, 11, 22, tzinfo=timezone.utc)
# data bytes that look like the message's own structure (tags 0x08 0x10 0x1A, continuation bytes), so that a
# decoder reading data as structure, or structure as data, goes wrong visibly
PATTERN = bytes([0x08, 0x1A, 0x80, 0x00, 0x10, 0xFF, 0x7F, 0x01, 0x9A, 0x22])


def payload(i: int, size: int) -> bytes:
    """``size`` bytes of the pattern, rotated by ``i``."""
    reps = PATTERN * (size // len(PATTERN) + 2)
    start = i % len(PATTERN)
    return reps[start:start + size]


# -- aggregates made by aws-kinesis-agg, and its own reading of them -----------------------------------------------

def reference(blob: bytes) -> list[dict[str, Any]]:
    """aws-kinesis-agg's reading of one Kinesis record (partition key "outer") whose data is ``blob``."""
    return [r["kinesis"] for r in iter_deaggregate_records([{"SequenceNumber": "1", "PartitionKey": "outer",
                                                             "Data": blob, "ApproximateArrivalTimestamp": NOW}],
                                                           data_format="Boto3")]


def theirs(blob: bytes) -> list[tuple[str, bytes]]:
    """(partition key, data) of each user record aws-kinesis-agg reads in an aggregate (it hands data as base64)."""
    return [(r["partitionKey"], base64.b64decode(r["data"])) for r in reference(blob)]


def assert_read_as_made(records: Sequence[tuple[str, bytes, str | None]]) -> None:
    blob = aggregate(list(records))
    ours = deaggregate(blob)
    assert ours is not None
    assert ours == [UserRecord(pk, ehk, data) for pk, data, ehk in records]
    assert [(r.partition_key, r.data) for r in ours] == theirs(blob)


# -- protobuf bytes by hand ----------------------------------------------------------------------------------------

def varint(value: int, width: int = 0) -> bytes:
    """``value`` as a protobuf varint, padded with continuation bytes to ``width`` bytes (a valid, longer encoding)."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value or len(out) + 1 < width:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def tag(field: int, wire: int, width: int = 0) -> bytes:
    return varint(field << 3 | wire, width)


def ld(field: int, value: bytes, *, tag_width: int = 0, len_width: int = 0) -> bytes:
    """A length-delimited field."""
    return tag(field, 2, tag_width) + varint(len(value), len_width) + value


def uint(field: int, value: int, width: int = 0) -> bytes:
    """A varint field."""
    return tag(field, 0) + varint(value, width)


def record(pk: int, data: bytes, ehk: int | None = None) -> bytes:
    """A ``Record`` message's bytes, in field order as producers write them."""
    return uint(1, pk) + (b"" if ehk is None else uint(2, ehk)) + ld(3, data)


def seal(body: bytes) -> bytes:
    """An aggregated record's data: the magic, the ``AggregatedRecord`` bytes, their MD5."""
    return MAGIC + body + hashlib.md5(body).digest()


def sealed_where(body_with_key: Callable[[bytes], bytes], wanted: Callable[[bytes], bool]) -> bytes:
    """The first of ``seal(body_with_key(b"k0"))``, ``k1``... whose digest satisfies ``wanted``: the digest follows
    the message, so a decoder that reads past the message's end reads these chosen bytes."""
    for i in range(10_000):
        body = body_with_key(f"k{i}".encode())
        if wanted(hashlib.md5(body).digest()):
            return seal(body)
    raise AssertionError("no key gives such a digest")


# -- valid aggregates ----------------------------------------------------------------------------------------------

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
    assert theirs(blob) == [(r.partition_key, r.data) for r in expected]


def test_tables_may_follow_the_records_and_a_key_may_end_the_message() -> None:
    """Field order is free in protobuf: records first, then the key tables, the last key ending the message."""
    body = ld(3, record(1, b"x", ehk=0)) + ld(3, record(0, b"y")) + ld(1, b"pk-a") + ld(2, b"99") + ld(1, b"pk-b")
    blob = seal(body)
    assert deaggregate(blob) == [UserRecord("pk-b", "99", b"x"), UserRecord("pk-a", None, b"y")]
    assert theirs(blob) == [("pk-b", b"x"), ("pk-a", b"y")]
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
    assert theirs(blob) == [(r.partition_key, r.data) for r in expected]


def test_records_of_the_shape_producers_write_are_read_without_the_general_parser(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path ``deaggregate`` documents (a length under 16 KiB, a partition key index under 128, data under
    16 KiB, nothing else) is taken: the general record parser is called only for the other records."""
    general: list[tuple[int, int]] = []
    parse = aggregation._record

    def counted(buf: bytes, pos: int, end: int) -> tuple[int, int | None, bytes]:
        general.append((pos, end))
        return parse(buf, pos, end)

    monkeypatch.setattr(aggregation, "_record", counted)
    sizes = [0, 1, 127, 128, 200, 16_383]
    fast: list[tuple[str, bytes, str | None]] = [(f"pk-{i}", payload(i, size), None) for i, size in enumerate(sizes)]
    assert_read_as_made(fast)
    assert general == []
    # keys 0-5 above, "pk" 6, then key-1 to key-123 at indexes 7 to 129
    slow = [("pk", b"x", "1"), *[(f"key-{i}", b"y", None) for i in range(1, 124)], ("pk", b"z" * 16_384, None)]
    assert_read_as_made(fast + slow)
    assert len(general) == 4  # an explicit hash key, partition key indexes 128 and 129, 16 KiB of data


# -- malformed aggregates: delivered as they are -------------------------------------------------------------------

KEY = ld(1, b"a")
NEXT = ld(3, record(0, b"next"))  # a valid record after the one under test


def claims(held: int) -> set[int]:
    """Wrong data lengths for a record holding ``held`` bytes: off by -3 to 20, off by one in the length's second
    byte (128), and each one-bit flip of the length (a flip in bit 7 or above leaves the length's first byte as it
    was and changes only the bytes after it)."""
    off = (*range(-3, 21), -128, 128)
    return {c for c in (*(held + d for d in off), *(held ^ 1 << bit for bit in range(16))) if c >= 0 and c != held}


# every size whose data length takes one or two bytes, then a size in every 128-byte band up to 33,000 (lengths of
# two and three bytes), and the boundaries
HELD = sorted({*range(301), *range(301, 33_000, 101), 16_383, 16_384, 16_400})


@pytest.mark.parametrize("sizes", [HELD[:301], HELD[301:]], ids=["up-to-300", "to-33000"])
def test_a_data_length_that_disagrees_with_its_record_makes_the_aggregate_invalid(sizes: list[int]) -> None:
    """A record holding ``held`` bytes of data whose length says otherwise: longer runs into the next record,
    shorter leaves stray bytes before the record's end (0x07 and 0xFF: wire type 7 and a varint that never ends,
    so they parse as nothing from any position). The right length is the control."""
    def sealed(claimed: int, held: int) -> bytes:
        data = (b"\x07\xff" * (held // 2 + 1))[:held]
        return seal(KEY + ld(3, uint(1, 0) + tag(3, 2) + varint(claimed) + data) + NEXT)

    wrong = []
    for held in sizes:
        data = (b"\x07\xff" * (held // 2 + 1))[:held]
        assert deaggregate(sealed(held, held)) == [UserRecord("a", None, data), UserRecord("a", None, b"next")]
        wrong += [(claimed, held) for claimed in sorted(claims(held)) if deaggregate(sealed(claimed, held)) is not None]
    assert wrong == [], "(claimed, held) read as valid"


@pytest.mark.parametrize(("claimed", "held"), [(128, 0), (16_384, 0), (2 ** 21, 0), (2 ** 21, 5)])
def test_a_record_that_ends_inside_its_data_length_or_right_after_it_makes_the_aggregate_invalid(
        claimed: int, held: int) -> None:
    body = KEY + ld(3, uint(1, 0) + tag(3, 2) + varint(claimed) + b"\xff" * held) + NEXT
    assert deaggregate(seal(body)) is None
    assert aggregate_problem(seal(body)) == "truncated data"


@pytest.mark.parametrize("fields", [
    uint(2, 0) + ld(3, b"x"),  # an explicit hash key index where the partition key index belongs
    ld(3, b"x"),
    uint(1, 0),
    uint(1, 0) + uint(2, 0),
    b"",
], ids=["ehk-then-data", "data-only", "index-only", "indexes-only", "empty"])
def test_a_record_without_its_partition_key_index_or_data_makes_the_aggregate_invalid(fields: bytes) -> None:
    """Both are required fields of a Record; KCL rejects such a message, so it is delivered as it is."""
    for body in (KEY + ld(2, b"1") + ld(3, fields) + NEXT, KEY + ld(2, b"1") + ld(3, fields)):
        assert deaggregate(seal(body)) is None
        assert aggregate_problem(seal(body)) == "a record without its partition key index or data"


@pytest.mark.parametrize(("body", "problem"), [
    (KEY + tag(3, 3) + varint(5) + record(0, b"x"), "unsupported wire type 3"),  # records in group encoding
    (KEY + ld(3, uint(1, 0) + tag(3, 3) + b"\x01x"), "unsupported wire type 3"),  # the data in group encoding
    (KEY + NEXT + tag(9, 6) + b"\x00", "unsupported wire type 6"),
    (KEY + ld(3, record(0, b"x") + tag(9, 7) + b"\x00"), "unsupported wire type 7"),
    (KEY + NEXT + uint(9, 0, width=11), "truncated varint"),  # a varint over 64 bits
    (KEY + ld(3, record(0, b"x") + uint(9, 0, width=11)), "truncated varint"),
], ids=["group-records", "group-data", "wire-6", "wire-7-in-record", "varint-11-bytes", "varint-11-in-record"])
def test_an_unsupported_wire_type_or_an_overlong_varint_makes_the_aggregate_invalid(body: bytes, problem: str) -> None:
    assert deaggregate(seal(body)) is None
    assert aggregate_problem(seal(body)) == problem


def test_a_record_cut_after_its_data_tag_makes_the_aggregate_invalid() -> None:
    """Followed by a field whose tag is ``80 80 01`` (field 2048), which a decoder reading on past the record would
    take for a data length."""
    blob = seal(KEY + ld(3, uint(1, 0) + tag(3, 2)) + tag(2048, 0) + b"\x00")
    assert deaggregate(blob) is None
    assert aggregate_problem(blob) == "truncated varint"


def test_a_record_cut_inside_its_data_length_makes_the_aggregate_invalid() -> None:
    """Record ``08 00 1A 80``: its data length is a varint cut after its first byte; the next field's tag (field
    16, two bytes ``80 01``) follows. The general parser and aws-kinesis-agg reject it."""
    blob = seal(KEY + ld(3, uint(1, 0) + tag(3, 2) + b"\x80") + tag(16, 0) + b"\x00")
    plain = reference(blob)  # aws-kinesis-agg delivers it as the plain record it is
    assert [(r["partitionKey"], r["data"]) for r in plain] == [("outer", blob)]
    assert deaggregate(blob) is None
    assert aggregate_problem(blob) == "truncated varint"


def test_no_field_is_read_into_the_digest_after_the_message() -> None:
    """A field cut short at the message's end, with a digest whose first bytes would complete it: a decoder that
    reads past the end would accept the aggregate."""
    def short(digest: bytes) -> bool:  # ends a varint and is a one-byte UTF-8 character
        return digest[0] < 0x80

    def a_varint_field(digest: bytes) -> bool:  # an unknown varint field's tag, then a one-byte value
        return short(digest) and digest[0] & 7 == 0 and digest[0] >> 3 not in (1, 2) and digest[1] < 0x80

    cases = [
        (lambda k: ld(1, k) + NEXT + uint(9, 0)[:1] + b"\x80", short),  # a value varint cut after 0x80
        (lambda k: ld(1, k) + NEXT + b"\x80", short),  # a tag cut after 0x80
        (lambda k: NEXT + ld(1, k) + tag(1, 2) + varint(2) + b"z", short),  # a key one byte short
        (lambda k: ld(1, k) + tag(3, 2, width=2) + varint(len(record(0, b"x")) + 2) + record(0, b"x"),
         a_varint_field),  # a record two bytes short, after a two-byte records tag
    ]
    for body_with_key, wanted in cases:
        assert deaggregate(sealed_where(body_with_key, wanted)) is None


@pytest.mark.parametrize("body", [KEY + NEXT + uint(0, 0), KEY + ld(3, record(0, b"x") + tag(0, 5) + b"\x00" * 4)],
                         ids=["top-level", "in-record"])
def test_a_field_numbered_zero_makes_the_aggregate_invalid(body: bytes) -> None:
    """Field numbers start at 1; a tag with number 0 is not valid protobuf."""
    blob = seal(body)
    plain = reference(blob)  # aws-kinesis-agg delivers it as the plain record it is
    assert [(r["partitionKey"], r["data"]) for r in plain] == [("outer", blob)]
    assert deaggregate(blob) is None
    assert aggregate_problem(blob) == "field number 0"


@pytest.mark.parametrize(("body", "problem"), [
    (KEY + NEXT + tag(9, 2) + varint(50) + b"x", "truncated field"),  # an unknown field longer than the message
    (KEY + NEXT + tag(1, 2) + varint(50) + b"k", "truncated string"),
    (ld(1, b"\xff") + NEXT, "a key that is not UTF-8"),
    (KEY + tag(3, 2, width=2) + varint(50) + record(0, b"x"), "truncated record"),  # read by the general parser
], ids=["field", "string", "not-utf-8", "record"])
def test_the_problem_of_a_broken_aggregate_is_named(body: bytes, problem: str) -> None:
    blob = seal(body)
    assert deaggregate(blob) is None
    assert aggregate_problem(blob) == problem
