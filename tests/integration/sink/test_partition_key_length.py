"""A partition key's length is counted as Kinesis counts it: in UTF-16 code units (as Java counts a string's length;
an emoji is 2), at most 256. Both emulators refuse a key of 129 emoji (258 units) as Kinesis does: kinesis-local
with "Partition key must be between 1 and 256 in length", kinesalite with a validation error. So the sink sets such
a row aside (or fails naming it) before anything of its batch is put, plain or aggregated, in a task and in a
``df.write``; and a PutRecords call refused as a whole for an entry the writers' checks should have caught names
that entry and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kinesis_spout.errors import InvalidRecordError, PutRecordsError
from kinesis_spout.kinesis.writing.putter import PutEntry, RecordPutter
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.spark import register
from kinesis_spout.spark.sink import parse_sink_options
from kinesis_spout.spark.sink.columns import Columns
from kinesis_spout.spark.sink.task import write_task
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import raw_records, user_records_in_range

EMOJI_KEY = "\U0001F600" * 200  # 200 code points, 400 UTF-16 code units
LONG_KEY = "\U0001F600" * 129  # 258 units: one over the limit
COLUMNS = Columns("data", False, "partitionKey", None)
EMULATORS = ["kinesalite", "kinesis_local"]


def three_hundred_rows(bad_row: int, bad_key: str) -> list[pa.RecordBatch]:
    """300 rows in two Arrow batches, row ``bad_row`` keyed by ``bad_key``, the others by ``k<n % 7>``."""
    keys = [bad_key if n == bad_row else f"k{n % 7}" for n in range(300)]
    datas = [b"row %d" % n for n in range(300)]
    return [pa.RecordBatch.from_arrays([pa.array(datas[a:b], pa.binary()), pa.array(keys[a:b], pa.string())],
                                       names=["data", "partitionKey"]) for a, b in ((0, 150), (150, 300))]


def written_rows(endpoint: KinesisEndpoint, stream: str, aggregated: bool) -> list[bytes]:
    if aggregated:
        return [u.data for _, u in user_records_in_range(endpoint, stream)]
    return [r["Data"] for records in raw_records(endpoint, stream).values() for r in records]


@pytest.mark.parametrize("aggregate", [False, True], ids=["plain", "aggregated"])
@pytest.mark.parametrize("emulator", EMULATORS)
def test_a_key_of_more_than_256_utf16_units_is_set_aside_and_the_other_rows_are_written(
        request: pytest.FixtureRequest, tmp_path: Path, emulator: str, aggregate: bool) -> None:
    endpoint: KinesisEndpoint = request.getfixturevalue(emulator)
    stream = endpoint.create_stream(shards=2)
    options = parse_sink_options({"streamName": stream, "endpointUrl": endpoint.endpoint_url,
                                  "deadLetterPath": str(tmp_path / "rejects"), "aggregate": str(aggregate)})
    counts = write_task(three_hundred_rows(170, EMOJI_KEY), options, COLUMNS, endpoint.client(), "task 3")
    assert (counts.rows, counts.user_records, counts.dead_lettered) == (300, 299, 1)
    assert sorted(written_rows(endpoint, stream, aggregate)) == sorted(b"row %d" % n for n in range(300) if n != 170)
    [letter] = [json.loads(line) for f in (tmp_path / "rejects").iterdir() for line in f.read_text().splitlines()]
    assert (letter["row"], letter["partition_key"]) == (170, EMOJI_KEY)
    assert "400 UTF-16 code units" in letter["reason"] and "at most 256" in letter["reason"]


@pytest.mark.parametrize("emulator", EMULATORS)
def test_without_a_dead_letter_path_the_row_is_named_and_nothing_of_its_batch_is_put(
        request: pytest.FixtureRequest, emulator: str) -> None:
    endpoint: KinesisEndpoint = request.getfixturevalue(emulator)
    stream = endpoint.create_stream(shards=1)
    options = parse_sink_options({"streamName": stream, "endpointUrl": endpoint.endpoint_url})
    with pytest.raises(InvalidRecordError, match=r"row 200 of task 4 cannot be written .* partition key has 258 "
                                                 r"UTF-16 code units \(Kinesis takes at most 256"):
        write_task(three_hundred_rows(200, LONG_KEY), options, COLUMNS, endpoint.client(), "task 4")
    assert len(written_rows(endpoint, stream, False)) == 150, "the first batch only"


@pytest.mark.parametrize("emulator", EMULATORS)
def test_a_call_refused_for_an_entry_the_checks_should_have_caught_names_the_entry_and_why(
        request: pytest.FixtureRequest, emulator: str) -> None:
    endpoint: KinesisEndpoint = request.getfixturevalue(emulator)
    stream = endpoint.create_stream(shards=1)
    putter: RecordPutter[int] = RecordPutter(stream, endpoint.client(), RetryPolicy(initial_s=0.01, deadline_s=5.0),
                                             name=lambda row: f"row {row} of task 9")
    items = [(n, PutEntry(b"x", LONG_KEY if n == 3 else "k")) for n in range(5)]
    with pytest.raises(PutRecordsError, match=r"PutRecords of 5 records .* failed: .*; row 3 of task 9 \(entry 3 of "
                                              r"the call\): its partition key has 258 UTF-16 code units") as raised:
        putter.put(items)
    assert raised.value.refused == (0, 1, 2, 3, 4) and not raised.value.retriable, "the same call fails again"
    assert written_rows(endpoint, stream, False) == []


def test_a_spark_write_with_a_dead_letter_path_writes_299_rows_and_sets_aside_the_emoji_keyed_one(
        kinesis_local: KinesisEndpoint, spark: Any, tmp_path: Path) -> None:
    register(spark)
    stream = kinesis_local.create_stream(shards=2)
    df = spark.range(0, 300, 1, 2).selectExpr(
        f"CASE WHEN id = 123 THEN '{EMOJI_KEY}' ELSE concat('k', CAST(id % 7 AS STRING)) END AS partitionKey",
        "CAST(id AS STRING) AS data")
    (df.write.format("kinesis_spout").option("streamName", stream).option("endpointUrl", kinesis_local.endpoint_url)
     .option("deadLetterPath", str(tmp_path / "rejects")).mode("append").save())
    assert sorted(int(d) for d in written_rows(kinesis_local, stream, False)) == [n for n in range(300) if n != 123]
    letters = [json.loads(line) for f in (tmp_path / "rejects").iterdir() for line in f.read_text().splitlines()]
    assert [(x["partition_key"], "400 UTF-16 code units" in x["reason"]) for x in letters] == [(EMOJI_KEY, True)]
