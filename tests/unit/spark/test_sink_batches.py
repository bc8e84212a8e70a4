"""The sink's whole-column check of an Arrow batch: a batch whose rows are all within Kinesis' limits gives the same
entries as the row-by-row check (text as its UTF-8 bytes, a constant key, large string types); a batch where any
row breaks a limit (null data, a null or empty key, a key over 256 UTF-16 code units, over 1 MiB) or that has
explicit hash keys is left to the row-by-row check, which names the row."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kinesis_spout.kinesis.writing.putter import MAX_RECORD_BYTES, PutEntry, entry_problem
from kinesis_spout.spark.sink import parse_sink_options
from kinesis_spout.spark.sink.batches import checked_entries
from kinesis_spout.spark.sink.columns import Columns

OPTIONS = parse_sink_options({"streamName": "s", "endpointUrl": "http://127.0.0.1:9"})
TEXT = Columns("data", True, "partitionKey", None)
BINARY = Columns("data", False, "partitionKey", None)


STRING = pa.string()


def batch(datas: list[Any], keys: list[Any], data_type: Any = STRING, key_type: Any = STRING) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(keys, key_type), pa.array(datas, data_type)],
                                      names=["partitionKey", "data"])


def row_by_row(datas: list[Any], keys: list[Any], first_row: int) -> list[tuple[int, PutEntry]]:
    out = []
    for n, (d, k) in enumerate(zip(datas, keys)):
        raw = d.encode() if isinstance(d, str) else d
        assert entry_problem(raw, k) is None
        out.append((first_row + n, PutEntry(raw, k)))
    return out


@pytest.mark.parametrize(("data_type", "key_type"), [(pa.string(), pa.string()), (pa.binary(), pa.string()),
                                                     (pa.large_string(), pa.large_string()),
                                                     (pa.large_binary(), pa.string())])
def test_a_batch_within_the_limits_gives_the_entries_of_the_row_by_row_check(data_type: Any, key_type: Any) -> None:
    texts = ["a", "", "ключ ☃", "x" * 1000]
    datas: list[Any] = texts if data_type in (pa.string(), pa.large_string()) else [t.encode() for t in texts]
    keys = ["k1", "é" * 256, "k", "\U0001F600" * 128]  # the last: 512 UTF-8 bytes, 256 UTF-16 code units
    columns = TEXT if data_type in (pa.string(), pa.large_string()) else BINARY
    got = checked_entries(batch(datas, keys, data_type, key_type), columns, OPTIONS, 7)
    assert got == row_by_row(datas, keys, 7)
    assert all(type(e.data) is bytes for _, e in got or ())


def test_a_constant_partition_key_is_every_rows_key() -> None:
    options = parse_sink_options({"streamName": "s", "endpointUrl": "http://127.0.0.1:9", "partitionKey": "one"})
    got = checked_entries(batch(["a", "b"], ["ignored", "ignored"]), Columns("data", True, None, None), options, 0)
    assert got == [(0, PutEntry(b"a", "one")), (1, PutEntry(b"b", "one"))]


def test_a_record_of_exactly_1_mib_passes() -> None:
    data = "x" * (MAX_RECORD_BYTES - 2)
    assert checked_entries(batch([data], ["kk"]), TEXT, OPTIONS, 0) == [(0, PutEntry(data.encode(), "kk"))]


@pytest.mark.parametrize(("datas", "keys"), [
    (["a", None], ["k", "k"]),  # null data
    (["a", "b"], ["k", None]),  # null key
    (["a", "b"], ["k", ""]),  # empty key
    (["a", "b"], ["k", "k" * 257]),  # a key of 257 characters
    (["a", "b"], ["k", "\U0001F600" * 129]),  # 129 code points, 258 UTF-16 code units
    (["a", "x" * (MAX_RECORD_BYTES - 1)], ["k", "kk"]),  # 1 MiB + 1 with its key
])
def test_a_batch_with_a_row_beyond_a_limit_is_left_to_the_row_by_row_check(datas: list[Any], keys: list[Any]) -> None:
    assert checked_entries(batch(datas, keys), TEXT, OPTIONS, 0) is None


def test_a_batch_with_explicit_hash_keys_is_left_to_the_row_by_row_check() -> None:
    b = pa.RecordBatch.from_arrays([pa.array(["k"]), pa.array(["a"]), pa.array(["5"])],
                                   names=["partitionKey", "data", "explicitHashKey"])
    assert checked_entries(b, Columns("data", True, "partitionKey", "explicitHashKey"), OPTIONS, 0) is None


def test_an_empty_batch_has_no_entries() -> None:
    assert checked_entries(batch([], []), TEXT, OPTIONS, 3) == []
