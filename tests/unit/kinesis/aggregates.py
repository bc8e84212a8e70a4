"""Aggregates for the de-aggregation tests: made by aws-kinesis-agg (a producer nobody here wrote) and read back by
its own de-aggregator, or written byte by byte in protobuf's wire format to reach the shapes no producer writes."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import iter_deaggregate_records

from kinesis_spout.kinesis.aggregation import MAGIC, UserRecord, deaggregate

NOW = datetime(2026, 11, 22, tzinfo=timezone.utc)
# data bytes that look like the message's own structure (tags 0x08 0x10 0x1A, continuation bytes), so that a
# decoder reading data as structure, or structure as data, goes wrong visibly
PATTERN = bytes([0x08, 0x1A, 0x80, 0x00, 0x10, 0xFF, 0x7F, 0x01, 0x9A, 0x22])


# -- aggregates made by aws-kinesis-agg, and its own reading of them -----------------------------------------------

def aggregate(records: list[tuple[str, bytes, str | None]]) -> bytes:
    """One aggregate holding ``(partition key, data, explicit hash key)`` records, made by aws-kinesis-agg."""
    aggregator = RecordAggregator()
    for pk, data, ehk in records:
        assert aggregator.add_user_record(pk, data, ehk) is None, "the test's records must fit one aggregate"
    _, _, blob = aggregator.clear_and_get().get_contents()
    return bytes(blob)


CASES: dict[str, list[tuple[str, bytes, str | None]]] = {
    "one record": [("pk-1", b"hello", None)],
    "shared keys": [(f"pk-{i % 3}", f"record {i}".encode(), None) for i in range(50)],
    "explicit hash keys": [(f"pk-{i}", bytes([i]) * i, str(2 ** 127 + i)) for i in range(20)],
    "unicode keys and empty data": [("ключ-é-🔑", b"", None), ("键", "données ✓".encode(), None)],
    "about 1 MiB": [(f"pk-{i}", bytes([i % 251]) * 10_000, None) for i in range(100)],
}


def theirs(blob: bytes) -> list[UserRecord]:
    """aws-kinesis-agg's reading of one Kinesis record's data."""
    out = list(iter_deaggregate_records([{"SequenceNumber": "1", "PartitionKey": "outer", "Data": blob,
                                          "ApproximateArrivalTimestamp": NOW}], data_format="Boto3"))
    return [UserRecord(r["kinesis"]["partitionKey"], r["kinesis"].get("explicitHashKey"),
                       base64.b64decode(r["kinesis"]["data"])) for r in out]  # it hands data back as base64


def payload(i: int, size: int) -> bytes:
    """``size`` bytes of the pattern, rotated by ``i``."""
    reps = PATTERN * (size // len(PATTERN) + 2)
    start = i % len(PATTERN)
    return reps[start:start + size]


def reference(blob: bytes) -> list[dict[str, Any]]:
    """aws-kinesis-agg's reading of one Kinesis record (partition key "outer") whose data is ``blob``."""
    return [r["kinesis"] for r in iter_deaggregate_records([{"SequenceNumber": "1", "PartitionKey": "outer",
                                                             "Data": blob, "ApproximateArrivalTimestamp": NOW}],
                                                           data_format="Boto3")]


def their_pairs(blob: bytes) -> list[tuple[str, bytes]]:
    """(partition key, data) of each user record aws-kinesis-agg reads in an aggregate (it hands data as base64)."""
    return [(r["partitionKey"], base64.b64decode(r["data"])) for r in reference(blob)]


def assert_read_as_made(records: Sequence[tuple[str, bytes, str | None]]) -> None:
    blob = aggregate(list(records))
    ours = deaggregate(blob)
    assert ours is not None
    assert ours == [UserRecord(pk, ehk, data) for pk, data, ehk in records]
    assert [(r.partition_key, r.data) for r in ours] == their_pairs(blob)


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
