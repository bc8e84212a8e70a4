"""The columnar decoding of GetRecords replies (kinesis/wire_columns.py, kinesis/arrow_columns.py) against a record
by record model of the record path: the lean parser (``json.loads``, base64, datetimes), the object de-aggregator
(``deaggregate``) and the hash key of each user record. Over random replies: plain records, KPL aggregates made by
aws-kinesis-agg (with explicit hash keys), user records outside the shard's hash range, empty and large data, and
arrival times with any fraction of a second. The columns, the records made of them and the Arrow rows all agree
with the model."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinesis_spout.kinesis.aggregation import MAGIC, deaggregate, hash_key
from kinesis_spout.kinesis.retrieval.arrow_columns import FIELDS, batch_of_columns, batch_of_records
from kinesis_spout.kinesis.retrieval.lean import parse_reply
from kinesis_spout.kinesis.retrieval.wire_columns import (
    HAVE_MSGSPEC,
    ReplyColumns,
    RowSource,
    column_sizes,
    columns_bytes,
    columns_of_records,
    columns_of_reply,
    decode_reply,
    expand,
    keep_inside,
    ranks_of,
    record_of,
    to_records,
)
from kinesis_spout.records import Record, SequenceKey, record_sizes, records_bytes

from ..mutation import PHASES
from .aggregates import aggregate

SHARD = "shardId-000000000007"
TOP = (1 << 128) - 1
keys = st.text(min_size=1, max_size=12)
payloads = st.one_of(st.binary(max_size=64), st.just(b""), st.builds(lambda n: bytes(range(256)) * n,
                                                                         st.integers(200, 1000)))
users = st.lists(st.tuples(keys, st.binary(max_size=40),
                           st.one_of(st.none(), st.integers(0, TOP).map(str))), min_size=1, max_size=12)
entries = st.lists(st.one_of(st.tuples(st.just("plain"), keys, payloads),
                             st.tuples(st.just("kpl"), keys, users)), max_size=12)
arrivals = st.one_of(st.none(), st.integers(0, 4_000_000_000),
                     st.floats(0, 4e9, allow_nan=False, allow_infinity=False))


def reply_bytes(items: list[tuple[Any, ...]], stamps: list[Any], first: int) -> bytes:
    records = []
    for i, ((kind, key, body), stamp) in enumerate(zip(items, stamps)):
        data = aggregate(body) if kind == "kpl" else body
        record = {"SequenceNumber": str(first + i * (1 << 80)), "Data": base64.b64encode(data).decode(),
                  "PartitionKey": key}
        if stamp is not None:
            record["ApproximateArrivalTimestamp"] = stamp
        records.append(record)
    return json.dumps({"Records": records, "NextShardIterator": "AAAA", "MillisBehindLatest": 0}).encode()


def model(content: bytes, deaggregated: bool, low: int, high: int) -> list[Record]:
    """The record path, one record and one user record at a time."""
    out: list[Record] = []
    for r in parse_reply(content)["Records"]:
        seq, data, at = r["SequenceNumber"], r["Data"], r.get("ApproximateArrivalTimestamp")
        users = deaggregate(data) if deaggregated and data[:4] == MAGIC else None
        if users is None:
            out.append(Record(SHARD, seq, None, r["PartitionKey"], data, at, SequenceKey(int(seq), 0), 0))
            continue
        hashes = [hash_key(u.partition_key, u.explicit_hash_key) for u in users]
        kept = [i for i, h in enumerate(hashes) if h is None or low <= h <= high]
        size = kept[-1] + 1 if kept else 0
        out.extend(Record(SHARD, seq, i, users[i].partition_key, users[i].data, at, SequenceKey(int(seq), i), size)
                   for i in kept)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], phases=PHASES)
@given(items=entries, stamps=st.lists(arrivals, min_size=12, max_size=12), deaggregated=st.booleans(),
       first=st.integers(0, 10 ** 50), bounds=st.tuples(st.integers(0, TOP), st.integers(0, TOP)))
def test_columns_records_and_arrow_rows_match_the_record_path(items: list[tuple[Any, ...]], stamps: list[Any],
                                                               deaggregated: bool, first: int,
                                                               bounds: tuple[int, int]) -> None:
    low, high = sorted(bounds)
    content = reply_bytes(items, stamps, first)
    expected = model(content, deaggregated, low, high)
    decoded = decode_reply(content)
    assert decoded is not None and HAVE_MSGSPEC
    fallback = columns_of_reply(parse_reply(content))
    for reply in (decoded, fallback):
        columns = expand(reply, SHARD, deaggregated, keep_inside(low, high))
        assert to_records(columns) == expected
        assert (list(column_sizes(columns)), columns_bytes(columns)) == (record_sizes(expected),
                                                                          records_bytes(expected))
        assert to_records(columns_of_records(expected)) == expected  # records made elsewhere, as columns again
        # a run in flight stands for each of its records by its columns, and makes the one asked for
        for source in (RowSource(columns), RowSource(columns, ranks_of(columns))):
            assert [record_of(source, r.rank) for r in reversed(expected)] == expected[::-1]
        assert all(record_of(r, r.rank) is r for r in expected)
        rows = batch_of_columns(columns).to_pylist()
        assert rows == [{name: record[i] for i, name in enumerate(FIELDS)} for record in expected]
    assert batch_of_records(expected).to_pylist() == rows
    for reply in (decoded, fallback):
        assert (reply.next_shard_iterator, reply.millis_behind_latest) == ("AAAA", 0)


def test_a_reply_the_decoder_does_not_know_is_left_to_the_lean_parser() -> None:
    """A field it has no slot for, a null, base64 it refuses: None (the caller parses as before)."""
    plain = {"SequenceNumber": "1", "Data": "YQ==", "PartitionKey": "k"}
    for odd in ({**plain, "Extra": 1}, {**plain, "Data": None}, {**plain, "Data": "Y"}):
        assert decode_reply(json.dumps({"Records": [odd]}).encode()) is None
    assert decode_reply(b"not json") is None
    decoded = decode_reply(json.dumps({"Records": [plain], "MillisBehindLatest": 5}).encode())
    assert decoded is not None and decoded.data == [b"a"] and decoded.next_shard_iterator is None


def test_arrival_times_round_as_datetime_does() -> None:
    """Half a microsecond rounds to even, as ``datetime.fromtimestamp`` does; whole seconds and None too."""
    stamps = [1764400000.0000005, 1764400000.0000015, 1764400000.123, 0.5e-6, 1764400000, None]
    content = reply_bytes([("plain", "k", b"x")] * len(stamps), stamps, 1)
    decoded = decode_reply(content)
    assert decoded is not None
    got = batch_of_columns(expand(decoded, SHARD, False)).column("approximate_arrival_timestamp").to_pylist()
    assert got == [None if s is None else datetime.fromtimestamp(s, timezone.utc) for s in stamps]


def test_without_msgspec_every_reply_is_left_to_the_lean_parser() -> None:
    """msgspec is a dependency, but a user may lack it: the decoder then answers None for every reply (the shard
    getter parses it as before) and the columns of a parsed reply are the same."""
    code = ("import sys\n"
            "sys.modules['msgspec'] = None  # import msgspec raises ImportError\n"
            "from kinesis_spout.kinesis.retrieval import wire_columns as w\n"
            "from kinesis_spout.kinesis.retrieval.lean import parse_reply\n"
            "content = b'{\"Records\": [{\"SequenceNumber\": \"7\", \"Data\": \"YQ==\", \"PartitionKey\": \"k\"}]}'\n"
            "assert not w.HAVE_MSGSPEC and w.decode_reply(content) is None\n"
            "records = w.to_records(w.expand(w.columns_of_reply(parse_reply(content)), 's', True))\n"
            "assert [(r.sequence_number, r.data) for r in records] == [('7', b'a')]\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_aggregate_that_does_not_decode_stays_whole_and_is_told_with_its_sequence_number() -> None:
    blob = aggregate([("a", b"1", None), ("b", b"2", None)])
    broken = blob[:-1] + bytes([blob[-1] ^ 0xFF])  # the digest no longer matches
    reply = ReplyColumns(["7", "8"], ["a", "a"], [broken, blob], [1.5, 2.5], True, None, None)
    told: list[tuple[str, bytes]] = []
    columns = expand(reply, SHARD, True, corrupt=lambda seq, data: told.append((seq, data)))
    assert told == [("7", broken)]
    assert (columns.sequence_numbers, columns.sub_sequence_numbers, columns.data) == (["7", "8", "8"], [None, 0, 1],
                                                                                        [broken, b"1", b"2"])
    assert columns.aggregated == [0, 2, 2]
    # none of an aggregate's user records kept by the shard's hash range: none delivered, counted as none
    nothing = expand(reply, SHARD, True, keep_inside(0, -1))
    assert (nothing.sequence_numbers, nothing.aggregated) == (["7"], [0])
