"""KPL de-aggregation: the project's decoder agrees record for record with aws-kinesis-agg's own de-aggregator on
aggregates made by aws-kinesis-agg's aggregator (a producer nobody here wrote), and corrupt aggregates come out as
the plain records they are. No servers."""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime, timezone

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import iter_deaggregate_records

from kinesis_spout.kinesis.aggregation import (
    MAGIC,
    UserRecord,
    aggregate_problem,
    deaggregate,
    hash_key,
    is_aggregated,
)
from kinesis_spout.kinesis.getter import FetchResult

NOW = datetime(2026, 11, 22, tzinfo=timezone.utc)


def aggregate(records: list[tuple[str, bytes, str | None]]) -> bytes:
    """One aggregate holding ``(partition key, data, explicit hash key)`` records, made by aws-kinesis-agg."""
    aggregator = RecordAggregator()
    for pk, data, ehk in records:
        assert aggregator.add_user_record(pk, data, ehk) is None, "the test's records must fit one aggregate"
    _, _, blob = aggregator.clear_and_get().get_contents()
    return bytes(blob)


def theirs(blob: bytes) -> list[UserRecord]:
    """aws-kinesis-agg's reading of one Kinesis record's data."""
    out = list(iter_deaggregate_records([{"SequenceNumber": "1", "PartitionKey": "outer", "Data": blob,
                                          "ApproximateArrivalTimestamp": NOW}], data_format="Boto3"))
    return [UserRecord(r["kinesis"]["partitionKey"], r["kinesis"].get("explicitHashKey"),
                       base64.b64decode(r["kinesis"]["data"])) for r in out]  # it hands data back as base64


CASES: dict[str, list[tuple[str, bytes, str | None]]] = {
    "one record": [("pk-1", b"hello", None)],
    "shared keys": [(f"pk-{i % 3}", f"record {i}".encode(), None) for i in range(50)],
    "explicit hash keys": [(f"pk-{i}", bytes([i]) * i, str(2 ** 127 + i)) for i in range(20)],
    "unicode keys and empty data": [("ключ-é-🔑", b"", None), ("键", "données ✓".encode(), None)],
    "about 1 MiB": [(f"pk-{i}", bytes([i % 251]) * 10_000, None) for i in range(100)],
}


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


def test_plain_data_is_not_an_aggregate() -> None:
    for data in (b"", b"plain", b'{"json": true}', MAGIC[:3]):
        assert not is_aggregated(data) and deaggregate(data) is None


def test_unknown_fields_are_skipped() -> None:
    """Tags (field 4 of a record) and fields a newer producer may add are skipped, not errors."""
    record = b"\x08\x00" + b"\x1a\x02hi" + b"\x22\x06\x0a\x01k\x12\x01v" + b"\x28\x05"  # tags, then varint field 5
    body = b"\x0a\x02pk" + b"\x1a" + bytes([len(record)]) + record + b"\x25\x01\x02\x03\x04"  # a fixed32 field 4
    assert deaggregate(MAGIC + body + hashlib.md5(body).digest()) == [UserRecord("pk", None, b"hi")]


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
