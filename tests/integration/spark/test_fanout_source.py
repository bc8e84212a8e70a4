"""The Structured Streaming source reading through enhanced fan-out (option retrieval=fanout, readMode=driver) on
kinesis-local: every record once, a replay of a batch (read again with GetRecords between its exact offsets) the
same, and a Spark query under Trigger.AvailableNow."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.consumers import list_consumers
from kinesis_spout.spark.source import KinesisSpoutDataSource, KinesisSpoutStreamReader
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import (
    APP,
    collecting_sink,
    last_by_shard,
    load,
    message_ids,
    read_partition,
    run_batches,
    source_options,
    stored_checkpoints,
)


def test_fan_out_batches_cover_every_record_once_and_a_replay_reads_the_same(kinesis_local: KinesisEndpoint,
                                                                             zookeeper: Any) -> None:
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"r{i}".encode() for i in range(120)])
    reader = KinesisSpoutStreamReader(source_options(kinesis_local, zookeeper, stream, retrieval="fanout",
                                                     maxRecordsPerTrigger="50"))
    assert reader.getDefaultReadLimit() == ReadMaxRows(50)
    reader.prepareForTriggerAvailableNow()
    try:
        batches, final = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    finally:
        reader.stop()
    got = [mid for *_, ids in batches for mid in ids]
    assert sorted(got) == sorted(message_ids(placed)) and len(got) == len(set(got))
    assert final == last_by_shard(placed)
    consumers = list_consumers(make_client(kinesis_local.region, kinesis_local.endpoint_url), stream)
    assert [c.name for c in consumers] == [APP]  # read through the app's consumer
    fresh = pickle.loads(pickle.dumps(reader))
    for start, end, _, ids in batches:
        assert [mid for p in fresh.partitions(start, end) for mid in read_partition(fresh, p)] == ids


@pytest.mark.slow
def test_a_spark_query_reads_through_fan_out(spark: Any, kinesis_local: KinesisEndpoint, zookeeper: Any,
                                            tmp_path: Path) -> None:
    stream = kinesis_local.create_stream(shards=2)
    placed = kinesis_local.put(stream, [f"spark-{i}".encode() for i in range(60)])
    batches: dict[int, list[dict[str, Any]]] = {}
    df = load(spark, source_options(kinesis_local, zookeeper, stream, retrieval="fanout", readMode="driver"))
    query = (df.writeStream.foreachBatch(collecting_sink(batches)).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    assert query.awaitTermination(120), "the AvailableNow query did not stop"
    assert query.exception() is None
    rows = [row for batch in batches.values() for row in batch]
    assert sorted(r["message_id"] for r in rows) == sorted(message_ids(placed))
    stored = stored_checkpoints(zookeeper, stream)
    assert {s: d["sequence_number"] for s, d in stored.items()} == last_by_shard(placed)


def test_fan_out_on_the_executors_is_refused_naming_the_fix(zookeeper: Any) -> None:
    options = {"streamName": "s", "appName": APP, "zookeeper": zookeeper.hosts, "retrieval": "fanout",
               "readMode": "executors"}
    with pytest.raises(ConfigError, match="read on the driver only; set readMode=driver"):
        KinesisSpoutDataSource(options).streamReader(None)
    source = KinesisSpoutDataSource({**options, "readMode": "auto"})
    source.spark_master = "spark://cluster:7077"  # auto would read on the executors there
    assert isinstance(source.streamReader(None), KinesisSpoutStreamReader)
