"""KPL de-aggregation of malformed aggregates: every corrupt or malformed shape (a bad magic or digest, a cut
message, a key index outside its table, lengths that disagree with their record, unsupported wire types, fields
numbered zero, nothing read past the message's end) is delivered as the plain Kinesis record it is (``None``),
never half-read, and its problem is named for the reader's log line. No servers."""

from __future__ import annotations

import hashlib

import pytest
from aws_kinesis_agg.deaggregator import iter_deaggregate_records

from kinesis_spout.kinesis.aggregation import MAGIC, UserRecord, aggregate_problem, deaggregate

from .aggregates import (
    CASES,
    NOW,
    aggregate,
    ld,
    record,
    reference,
    seal,
    sealed_where,
    tag,
    theirs,
    uint,
    varint,
)


def test_an_empty_aggregate_is_delivered_whole_as_aws_kinesis_agg_does() -> None:
    body = b""  # an AggregatedRecord with empty tables and no records: the magic and the MD5 of nothing
    blob = MAGIC + body + hashlib.md5(body).digest()
    assert deaggregate(blob) is None  # not an aggregate: the Kinesis record as it is, never nothing at all
    assert aggregate_problem(blob) == "an aggregate without user records"
    out = list(iter_deaggregate_records([{"SequenceNumber": "1", "PartitionKey": "outer", "Data": blob,
                                          "ApproximateArrivalTimestamp": NOW}], data_format="Boto3"))
    assert [(r["kinesis"]["partitionKey"], r["kinesis"]["data"]) for r in out] == [("outer", blob)]  # theirs: whole


def _corrupt(kind: str) -> bytes:
    blob = aggregate(CASES["shared keys"])
    body = blob[4:-16]
    if kind == "bad magic":
        return b"\xf3\x89\x9a\xc3" + blob[4:]
    if kind == "bad digest":
        return blob[:-1] + bytes([blob[-1] ^ 1])
    if kind == "truncated message":
        short = body[: len(body) // 2]
        return MAGIC + short + hashlib.md5(short).digest()
    if kind == "index outside its table":
        bad = b"\x0a\x01a" + b"\x1a\x05\x08\x07\x1a\x01x"  # one key; a record pointing at key 7
        return MAGIC + bad + hashlib.md5(bad).digest()
    if kind == "too short":
        return MAGIC + b"\x00" * 5
    raise AssertionError(kind)


@pytest.mark.parametrize(("kind", "problem"), [
    ("bad magic", "no KPL magic"),
    ("bad digest", "the MD5 digest does not match the message"),
    ("truncated message", "truncated record"),
    ("index outside its table", "a key index outside its table (1 partition keys, 0 explicit hash keys)"),
    ("too short", "shorter than the magic and the digest"),
])
def test_a_corrupt_aggregate_is_no_aggregate_and_its_problem_is_named(kind: str, problem: str) -> None:
    """Delivered as the plain record it is, never an exception that stops the shard; the reader's log line says
    what was wrong with it."""
    assert deaggregate(_corrupt(kind)) is None
    assert aggregate_problem(_corrupt(kind)) == problem
    assert aggregate_problem(aggregate(CASES["shared keys"])) is None


def test_a_key_index_outside_its_table_delivers_the_record_whole_where_aws_kinesis_agg_keeps_what_precedes_it(
        ) -> None:
    """aws-kinesis-agg (and KCL) hand out the user records before the bad index and drop it and the rest; this
    decoder drops nothing: the whole Kinesis record is delivered (and counted as corrupt by the getter)."""
    good = b"\x1a\x05\x08\x00\x1a\x01a" + b"\x1a\x05\x08\x00\x1a\x01b"
    body = b"\x0a\x02pk" + good + b"\x1a\x05\x08\x07\x1a\x01x" + b"\x1a\x05\x08\x00\x1a\x01c"  # key 7 of 1
    blob = MAGIC + body + hashlib.md5(body).digest()
    assert deaggregate(blob) is None
    assert theirs(blob) == [UserRecord("pk", None, b"a"), UserRecord("pk", None, b"b")]


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
