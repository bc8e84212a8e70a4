"""The lag of a ``format("kinesis_spout")`` query: every progress carries the source's ``latestOffset`` with each
shard's lag, and ``KinesisLagListener`` turns it into log lines and Prometheus gauges while the query lags."""

from __future__ import annotations

import logging
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.spark.source import ExecutorStreamReader, KinesisSpoutStreamReader
from kinesis_spout.spark.source.lag import QueryLag, parse_latest_offset
from kinesis_spout.spark.source.lag_listener import KinesisLagListener
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

from .support import collecting_sink, executor_options, load, source_options

RECORDS, PER_BATCH = 12, 4


def scrape(url: str) -> dict[str, float]:
    """The samples of a Prometheus page whose names start with kinesis_spout_query_, by their full line key."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("kinesis_spout_query_")}


def test_a_driver_read_reports_each_shards_lag_as_its_latest_offset(kinesalite: KinesisEndpoint,
                                                                   zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(RECORDS)], ["pk"] * RECORDS)
    busy = placed[0][0]
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream,
                                                     maxRecordsPerTrigger=str(PER_BATCH)))
    try:
        reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
        lag = parse_latest_offset(reader.reportLatestOffset())
    finally:
        reader.stop()
    assert lag is not None and (lag.stream, lag.app) == (stream, "source-test")
    shards = {s.shard_id: s for s in lag.shards}
    assert shards[busy].records_behind == RECORDS - PER_BATCH  # read ahead of the batch
    assert shards[busy].position == placed[-1][1]  # the offset of a batch that would take them all
    assert shards[busy].millis_behind_latest == 0 and shards[busy].last_arrival is not None
    assert lag.records_behind == RECORDS - PER_BATCH and lag.millis_behind_latest == 0


def test_an_executor_read_reports_where_each_shard_stands_and_the_shards_at_their_tip(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(4)])
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    try:
        start = reader.initialOffset()
        reader.latestOffset(start, reader.getDefaultReadLimit())
        lag = parse_latest_offset(reader.reportLatestOffset())
    finally:
        reader.stop()
    assert lag is not None and {s.shard_id for s in lag.shards} == set(kinesalite.shard_ids(stream))
    assert all(s.position == "TRIM_HORIZON" and s.records_behind is None for s in lag.shards)


def test_every_progress_has_the_latest_offset_and_the_listener_exports_the_lag_while_the_query_lags(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout.spark.source.lag_listener")
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(RECORDS)], ["pk"] * RECORDS)
    listener = KinesisLagListener()
    seen: list[QueryLag] = []
    spark.streams.addListener(listener)
    server = listener.serve_metrics(0, addr="127.0.0.1")
    batches: dict[int, list[dict[str, Any]]] = {}
    df = load(spark, source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger=str(PER_BATCH),
                                    readMode="driver"))
    query = (df.writeStream.foreachBatch(collecting_sink(batches)).queryName("lagging")
             .trigger(processingTime="0.5 seconds").option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        def lagging() -> bool:
            seen.extend(listener.lags.values())
            return any(lag.records_behind for lag in seen)

        assert wait_until(lagging, 120), f"no lag seen: {seen}"
        samples = scrape(server.url)
        behind = {k: v for k, v in samples.items() if k.startswith("kinesis_spout_query_records_behind{")}
        assert any('query="lagging"' in k and f'stream="{stream}"' in k and v > 0 for k, v in behind.items()), samples
        assert wait_until(lambda: sum(len(b) for b in batches.values()) == RECORDS, 120)
        assert wait_until(lambda: [lag.records_behind for lag in listener.lags.values()] == [0], 60)
        assert 'kinesis_spout_query_max_behind_latest_seconds{app="source-test",query="lagging",' \
               f'stream="{stream}"}}' in scrape(server.url)
        progresses = [p for p in query.recentProgress if p.sources]
        assert progresses and all(parse_latest_offset(p.sources[0].latestOffset) is not None for p in progresses)
    finally:
        query.stop()
        spark.streams.removeListener(listener)
        server.close()
    assert any("query lagging" in r.getMessage() and "records read and not processed" in r.getMessage()
               for r in caplog.records)
