"""Trigger.AvailableNow on a stream that keeps receiving records, with ``readMode=executors``: the run still ends,
at what the stream held when it started (``readMode=driver``: test_spark_source.py, which also resumes from
ZooKeeper after the run)."""

from __future__ import annotations

from typing import Any

from kinesis_spout.spark.source import KinesisSpoutDataSource
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import available_now_while_producing, message_ids, source_options


def test_an_available_now_run_on_executors_ends_at_the_records_present_when_it_started(
        moto_kinesis: KinesisEndpoint, zookeeper: Any) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    present = moto_kinesis.put(stream, [f"old{i}".encode() for i in range(40)])
    options = source_options(moto_kinesis, zookeeper, stream, maxRecordsPerTrigger="15", readMode="executors")
    reader = KinesisSpoutDataSource(options).streamReader(None)
    try:
        batches, _, _ = available_now_while_producing(moto_kinesis, stream, reader, max_batches=30)
    finally:
        reader.stop()
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(present))
