"""One write task of the sink without Spark (its Arrow batches made here): rows Kinesis cannot take go to the
dead-letter directory when one is set while the others are put; calls throttled past ``putDeadlineS`` fail the task
with an error saying so, and what was accepted before stays accepted."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

from kinesis_spout.errors import PutRecordsError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.spark.sink import parse_sink_options
from kinesis_spout.spark.sink.columns import Columns
from kinesis_spout.spark.sink.task import write_task
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import raw_records

COLUMNS = Columns("data", False, "partitionKey", None)


def batch(datas: list[bytes | None], keys: list[str | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(datas, pa.binary()), pa.array(keys, pa.string())],
                                      names=["data", "partitionKey"])


def test_rows_kinesis_cannot_take_go_to_the_dead_letter_directory_and_the_others_are_put(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    options = parse_sink_options({"streamName": stream, "endpointUrl": kinesalite.endpoint_url,
                                  "deadLetterPath": str(tmp_path / "rejects")})
    big = b"x" * (1 << 20)
    batches = [batch([b"a", None, b"b"], ["k", "k", "k"]), batch([big, b"c"], ["k", ""]), batch([b"d"], ["k"])]
    counts = write_task(batches, options, COLUMNS, kinesalite.client(), "task 7")
    assert (counts.rows, counts.user_records, counts.dead_lettered) == (6, 3, 3)
    assert [r["Data"] for r in raw_records(kinesalite, stream)[kinesalite.shard_ids(stream)[0]]] == [b"a", b"b", b"d"]
    files = list((tmp_path / "rejects").iterdir())
    assert len(files) == 1 and files[0].name.startswith(f"sink-{stream}-task-7-")
    lines = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [(x["row"], x["partition_key"]) for x in lines] == [(1, "k"), (3, "k"), (4, "")]
    assert "data is null" in lines[0]["reason"] and "1048577 bytes" in lines[1]["reason"]
    assert base64.b64decode(lines[1]["data_base64"]) == big and lines[0]["data_base64"] is None


def test_calls_throttled_past_the_deadline_fail_the_task_and_earlier_records_stay_put(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        options = parse_sink_options({"streamName": stream, "endpointUrl": proxy.endpoint_url,
                                      "putDeadlineS": "1"})
        client = make_client("us-east-1", proxy.endpoint_url)
        first = batch([b"early"], ["k"])
        second = batch([b"late-1", b"late-2"], ["k", "k"])

        def batches() -> Iterator[pa.RecordBatch]:  # the throttling starts after the first batch is put
            yield first
            proxy.inject("PutRecords", "ProvisionedThroughputExceededException", times=1000)
            yield second

        with pytest.raises(PutRecordsError, match=r"refused 2 records .* \(deadline 1 s\) "
                                                  r"\(ProvisionedThroughputExceededException\)") as raised:
            write_task(batches(), options, COLUMNS, client, "task 1")
        assert raised.value.refused == (1, 2)
        assert proxy.injected["PutRecords:ProvisionedThroughputExceededException"] >= 3, "retried with backoff"
    assert [r["Data"] for r in raw_records(kinesalite, stream)[kinesalite.shard_ids(stream)[0]]] == [b"early"]
