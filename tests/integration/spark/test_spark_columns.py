"""The Spark paths built from columns give what the record paths gave, on kinesalite (real sequence numbers).

One 3-shard stream holds plain records (random keys, one of 300 KB), KPL aggregates (one with an empty user record)
and an aggregate whose user records hash to every shard, put on the middle one (the foreign ones are dropped). The
record path is each shard read by a GetRecords getter into records, made rows by ``records_to_arrow``; against it:

- ``readMode=driver`` (cut by a record limit under AvailableNow, so batches end inside aggregates and rows wait in the
  driver between batches), side by side with the same reader on the planner that keeps records: the same offsets
  batch by batch, the same rows, the same checkpoints in ZooKeeper; and each batch replayed by a new process;
- ``readMode=executors`` and the batch reader (``spark.read``): the same rows;
- the pipeline's columnar batch (``next_columns``) and its tuples (``next_batch``): the same DataFrame rows.

Every column is compared: stream name, shard, sequence and sub-sequence numbers, partition key, data, arrival time,
message id, attempt. No Spark session: the readers are driven as Spark drives them.
"""

from __future__ import annotations

import os
import pickle
import random
import time
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.kinesis.client import kinesis_client
from kinesis_spout.kinesis.retrieval.factory import polling_getter
from kinesis_spout.kinesis.shards import drop_range, list_shards
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.spark.pipeline.views import ColumnView, TupleView
from kinesis_spout.spark.shared.schema import records_to_arrow
from kinesis_spout.spark.source import ExecutorStreamReader, KinesisBatchReader, KinesisSpoutStreamReader
from kinesis_spout.spark.source.driver_planner import DriverPlanner
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import executor_options, source_options, stored_checkpoints

Row = dict[str, Any]


class RecordReader(KinesisSpoutStreamReader):
    """The driver-read source on the planner that keeps records (the record path)."""

    planner_type = DriverPlanner


def _agg(users: list[tuple[str, bytes]]) -> bytes:
    aggregator = RecordAggregator()
    for pk, data in users:
        assert aggregator.add_user_record(pk, data) is None
    return bytes(aggregator.clear_and_get().get_contents()[2])


def _put(kinesalite: KinesisEndpoint, stream: str) -> None:
    rnd = random.Random(44)
    client = kinesalite.client()
    shards = list_shards(client, stream)
    middle = shards[1].hash_range
    assert middle is not None
    entries: list[dict[str, Any]] = []
    for i in range(40):
        entries.append({"Data": rnd.randbytes(rnd.randint(1, 200)), "PartitionKey": f"k{rnd.randint(0, 10**6)}"})
        if i % 9 == 0:  # aggregates on the middle shard: user records of every shard (the foreign ones dropped)
            users = [(f"u{rnd.randint(0, 10**6)}", rnd.randbytes(rnd.randint(0, 60)))
                     for _ in range(rnd.randint(2, 30))]
            entries.append({"Data": _agg(users), "PartitionKey": "agg", "ExplicitHashKey": str(middle.start + i)})
    entries.append({"Data": _agg([("e", b""), ("f", b"after an empty one")]), "PartitionKey": "empty-inside"})
    entries.append({"Data": rnd.randbytes(300 << 10), "PartitionKey": "large"})
    for i in range(0, len(entries), 20):
        reply = client.put_records(StreamName=stream, Records=entries[i:i + 20])
        assert reply.get("FailedRecordCount", 0) == 0


def _key(row: Row) -> tuple[str, int, int]:
    return row["shard_id"], int(row["sequence_number"]), row["sub_sequence_number"] or 0


def _record_path(kinesalite: KinesisEndpoint, stream: str, config: SpoutConfig) -> list[Row]:
    """Each shard read to its tip by a GetRecords getter into records, made rows from the records."""
    client = kinesis_client(config.kinesis)
    rows: list[Row] = []
    for shard in list_shards(client, stream):
        getter = polling_getter(client, stream, shard.shard_id, TRIM_HORIZON, config.reading,
                                hash_range=drop_range(stream, shard.shard_id, shard, True))
        records = []
        while True:
            got = getter.fetch()
            records += got.records
            if got.shard_end or not got.fetched and got.millis_behind_latest in (0, None):
                break
        rows += records_to_arrow(stream, records).to_pylist()
    return sorted(rows, key=_key)


def _driven(reader: Any, limit: Any) -> list[tuple[dict[str, str], dict[str, str], list[Row]]]:
    """Spark's micro-batch loop over ``reader`` (AvailableNow): each batch's offsets and rows."""
    reader.prepareForTriggerAvailableNow()
    start, out = reader.initialOffset(), []
    for _ in range(200):
        end = reader.latestOffset(start, limit)
        if end == start:
            return out
        rows = [row for p in reader.partitions(start, end) for b in reader.read(p) for row in b.to_pylist()]
        out.append((start, end, rows))
        reader.commit(end)
        start = end
    raise AssertionError("no end after 200 batches")


@pytest.fixture(scope="module")
def filled(kinesalite_server: Any) -> tuple[str, list[Row]]:
    """The stream the module's tests read (made once: its puts and the record path take seconds), and its rows as
    the record path reads them."""
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
        os.environ.setdefault(name, value)  # as the kinesalite fixture does, for a module's fixture
    kinesalite = KinesisEndpoint("kinesalite", kinesalite_server.endpoint_url)
    stream = kinesalite.create_stream(shards=3)
    _put(kinesalite, stream)
    config = SpoutConfig(stream_name=stream, app_name="reference", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region)
    expected = _record_path(kinesalite, stream, config)
    assert len({r["shard_id"] for r in expected}) == 3 and any(r["sub_sequence_number"] for r in expected)
    assert any(r["data"] == b"" for r in expected) and any(len(r["data"]) == 300 << 10 for r in expected)
    return stream, expected


def test_driver_reads_give_the_record_paths_offsets_rows_and_checkpoints(
        kinesalite: KinesisEndpoint, zookeeper: Any, filled: tuple[str, list[Row]]) -> None:
    stream, expected = filled
    columns = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="7"))
    batches = _driven(columns, ReadMaxRows(7))
    stored = stored_checkpoints(zookeeper, stream)
    records = RecordReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="7",
                                          appName="source-test-records"))
    assert batches == _driven(records, ReadMaxRows(7))  # offsets and rows, batch by batch
    assert stored_checkpoints(zookeeper, stream) == stored  # the record path's commits wrote the same checkpoints
    assert sorted((r for *_, rows in batches for r in rows), key=_key) == expected
    assert any(":" in end for _, offsets, _ in batches for end in offsets.values())  # batches ended inside aggregates
    fresh = pickle.loads(pickle.dumps(columns))  # a new process: each batch replayed from Kinesis
    for start, end, rows in batches:
        assert [row for p in fresh.partitions(start, end) for b in fresh.read(p) for row in b.to_pylist()] == rows
    for reader in (columns, records, fresh):
        reader.stop()


def test_executor_reads_and_batch_reads_give_the_record_paths_rows(
        kinesalite: KinesisEndpoint, zookeeper: Any, filled: tuple[str, list[Row]]) -> None:
    stream, expected = filled
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="7",
                                                   appName="source-test-executors"))
    rows = [row for *_, batch in _driven(reader, ReadMaxRows(7)) for row in batch]
    reader.stop()
    assert sorted(rows, key=_key) == expected
    options = {k: v for k, v in source_options(kinesalite, zookeeper, stream).items()
               if k not in ("initialPosition", "zookeeper", "zookeeperPrefix", "checkpointIntervalS")}
    batch_reader = KinesisBatchReader(options)
    rows = [row for p in batch_reader.partitions() for b in batch_reader.read(p) for row in b.to_pylist()]
    assert sorted(rows, key=_key) == expected


def test_the_pipelines_columnar_batch_and_its_tuples_give_the_same_rows(
        kinesalite: KinesisEndpoint, filled: tuple[str, list[Row]]) -> None:
    stream, expected = filled
    config = SpoutConfig(stream_name=stream, endpoint_url=kinesalite.endpoint_url, region=kinesalite.region,
                         app_name="views", initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2)
    rows: dict[str, list[Row]] = {"columns": [], "tuples": []}
    for form, got in rows.items():
        with KinesisSpout(config, MemoryCheckpointStore()) as spout:
            deadline = time.monotonic() + 30
            while len(got) < len(expected) and time.monotonic() < deadline:
                view: ColumnView | TupleView | None = None
                if form == "columns":
                    columns = spout.next_columns(500, timeout_s=0.5)
                    view = ColumnView(columns, stream) if columns else None
                else:
                    tuples = spout.next_batch(500, timeout_s=0.5)
                    view = TupleView(spout, tuples, stream) if tuples else None
                if view is not None:
                    got += view.table().to_pylist()
                    assert view.settle(set()) == (0, [])
    assert sorted(rows["columns"], key=_key) == sorted(rows["tuples"], key=_key) == expected
