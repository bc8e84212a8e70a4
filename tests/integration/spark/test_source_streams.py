"""``streamName`` listing several streams: one query reads them all, each stream with its own offsets (keyed by
stream, then as its reader keys them), initial position and ZooKeeper checkpoints; a restart from the query's offsets
resumes both; an offset of a one-stream query is refused with the fix. The readers are driven as Spark drives them
(both read modes), and one query runs on Spark."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.errors import CheckpointError, ConfigError
from kinesis_spout.spark.source import KinesisSpoutDataSource
from kinesis_spout.spark.source.lag import QueryLag, parse_latest_offset
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

from .support import collecting_sink, last_by_shard, load, source_options, stored_checkpoints


def rows_of(reader: Any, parts: list[Any]) -> list[tuple[str, str]]:
    """(stream_name, data) of every row the reader's tasks read for ``parts``."""
    return [(s, d.decode()) for part in parts for batch in reader.read(part)
            for s, d in zip(batch.column("stream_name").to_pylist(), batch.column("data").to_pylist())]


def run(options: dict[str, str], start: dict[str, Any] | None
        ) -> tuple[list[tuple[str, str]], dict[str, Any], QueryLag | None]:
    """A new stream reader (a query started, or restarted from its offsets ``start``) driven as Spark drives an
    AvailableNow run: the rows read, the last offset, and the lag it reports."""
    reader = KinesisSpoutDataSource(options).streamReader(None)
    try:
        reader.prepareForTriggerAvailableNow()
        offset = reader.initialOffset() if start is None else start
        rows: list[tuple[str, str]] = []
        for _ in range(50):
            end = reader.latestOffset(offset, reader.getDefaultReadLimit())
            if end == offset:
                return rows, end, parse_latest_offset(reader.reportLatestOffset())
            rows += rows_of(reader, list(reader.partitions(offset, end)))
            reader.commit(end)
            offset = end
        raise AssertionError("no end after 50 batches")
    finally:
        reader.stop()


@pytest.mark.parametrize("read_mode", ["driver", "executors"])
def test_two_streams_in_one_query_with_their_own_starts_checkpoints_and_a_restart(
        moto_kinesis: KinesisEndpoint, zookeeper: Any, read_mode: str) -> None:
    kinesalite = moto_kinesis  # (kinesalite never answers the AT_TIMESTAMP iterator a LATEST start is pinned to)
    clicks, orders = kinesalite.create_stream(shards=2), kinesalite.create_stream()
    kinesalite.put(clicks, ["c-old"] * 3)  # clicks start at LATEST: never read
    put_at = time.time()
    orders_put = kinesalite.put(orders, ["o1", "o2"])  # orders from TRIM_HORIZON
    assert wait_until(lambda: time.time() > put_at + 1.2, 5)  # older than LATEST's margin for clock skew
    options = source_options(kinesalite, zookeeper, f"{clicks},{orders}", readMode=read_mode,
                             initialPosition=json.dumps({orders: "TRIM_HORIZON"}))
    rows, offset, _ = run(options, None)
    assert sorted(rows) == [(orders, "o1"), (orders, "o2")]
    assert sorted(offset) == sorted([clicks, orders])  # keyed by stream, then as the stream's reader keys it

    clicks_put = kinesalite.put(clicks, ["c1", "c2"])
    orders_put += kinesalite.put(orders, ["o3"])
    rows, offset, lag = run(options, offset)  # a restart from the query's offsets resumes both streams
    assert sorted(rows) == sorted([(clicks, "c1"), (clicks, "c2"), (orders, "o3")])
    assert lag is not None and lag.stream == ",".join(sorted([clicks, orders]))
    assert {s.shard_id for s in lag.shards} == {f"{stream}/{shard}" for stream, shards in offset.items()
                                                for shard in (shards.get("shards", shards))}
    for stream, put in ((clicks, clicks_put), (orders, orders_put)):
        stored = {shard: c["sequence_number"] for shard, c in stored_checkpoints(zookeeper, stream).items()}
        assert {s: q for s, q in stored.items() if s in last_by_shard(put)} == last_by_shard(put)

    one_stream = {"shardId-000000000000": "TRIM_HORIZON"}  # a checkpoint location of a query of one stream
    with pytest.raises(CheckpointError, match="new checkpoint location"):
        run(options, one_stream)


def test_load_refuses_an_empty_or_repeated_name_a_missing_stream_and_a_batch_read_of_several(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    clicks = kinesalite.create_stream()
    options = source_options(kinesalite, zookeeper, clicks)
    for bad, problem in ((f"{clicks},,", "empty name"), (f"{clicks},{clicks}", "more than once"),
                         (f"{clicks},no-such-stream", "'no-such-stream' does not exist")):
        with pytest.raises(Exception, match=problem):  # what load() runs (ConfigError, StreamNotFoundError)
            KinesisSpoutDataSource({**options, "streamName": bad}).schema()
    batch_read = {"streamName": f"{clicks},other", "endpointUrl": kinesalite.endpoint_url, "region": "us-east-1"}
    with pytest.raises(ConfigError, match="reads one stream"):
        KinesisSpoutDataSource(batch_read).schema()


def test_a_query_of_two_streams_on_spark(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    clicks, orders = kinesalite.create_stream(), kinesalite.create_stream()
    kinesalite.put(clicks, ["c1", "c2"])
    kinesalite.put(orders, ["o1"])
    options = source_options(kinesalite, zookeeper, f"{clicks},{orders}", readMode="driver")
    batches: dict[int, list[dict[str, Any]]] = {}
    query = (load(spark, options).writeStream.foreachBatch(collecting_sink(batches)).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted((r["stream_name"], bytes(r["data"])) for rows in batches.values() for r in rows) == \
        sorted([(clicks, b"c1"), (clicks, b"c2"), (orders, b"o1")])
