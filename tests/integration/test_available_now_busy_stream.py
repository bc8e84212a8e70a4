"""Trigger.AvailableNow on a stream that keeps receiving records: the run still ends, at what the stream held when
it started, whichever reader reads it (``readMode=driver`` or ``executors``)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from test_spark_source import message_ids, run_batches, source_options

from kinesis_spout.spark.source import KinesisSpoutDataSource
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until


@pytest.mark.parametrize("mode", ["driver", "executors"])
def test_an_available_now_run_ends_at_the_records_present_when_it_started(moto_kinesis: KinesisEndpoint,
                                                                          zookeeper: Any, mode: str) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    present = moto_kinesis.put(stream, [f"old{i}".encode() for i in range(40)])
    options = source_options(moto_kinesis, zookeeper, stream, maxRecordsPerTrigger="15", readMode=mode)
    reader = KinesisSpoutDataSource(options).streamReader(None)
    reader.available_now_margin = timedelta(0)  # moto's timestamps come from this machine's clock
    reader.prepareForTriggerAvailableNow()
    began = datetime.now(timezone.utc)  # the run's cutoff is no later than this
    assert wait_until(lambda: datetime.now(timezone.utc) > began, 1, interval_s=0.001)
    stop = threading.Event()
    later: list[tuple[str, str]] = []

    def produce() -> None:  # a busy stream must not keep an AvailableNow run going
        while not stop.is_set():
            later.extend(moto_kinesis.put(stream, [b"new"]))
            stop.wait(0.01)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        assert wait_until(lambda: len(later) >= 5, 5)
        batches, _ = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit(), max_batches=30)
    finally:
        stop.set()
        producer.join(5)
        reader.stop()
    assert sorted(mid for *_, ids in batches for mid in ids) == sorted(message_ids(present))
