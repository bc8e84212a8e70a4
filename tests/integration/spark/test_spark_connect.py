"""Through Spark Connect: a session made with ``SparkSession.builder.remote("sc://...")`` reads, writes and runs a
SpoutPipeline, with exact counts.

The server is Spark Connect's gRPC service started in the JVM of the test session's ``spark`` (one per module, on a
free loopback port: no second JVM to start); each Connect client gets a server-side session of its own, which sees
only the data sources registered through it. The data source's readers and writers run in the server's Python
workers (this interpreter). The batch read and write are the Spark guide's Connect example, run in a client process
of its own that has no JVM at all, as a reader's would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from kinesis_spout import ConfigError, InitialPosition, SpoutConfig
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.spark import KinesisLagListener, SpoutPipeline, register
from kinesis_spout.state import (
    Count,
    MemoryBackingMap,
    OpaqueMap,
    SpoutKind,
    TxBatch,
    partition_persist,
    persistent_aggregate,
    state_query,
)
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import start_connect_service, stop_connect_service

from ..sink.support import raw_records
from .support import APP, last_by_shard, message_ids, source_options, stored_checkpoints

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "structured-streaming.md"


@pytest.fixture(scope="module")
def connect_url(spark: Any) -> Iterator[str]:
    """The address of the Connect service started in the test session's JVM for this module."""
    url = start_connect_service(spark)
    try:
        yield url
    finally:
        stop_connect_service(spark)


@pytest.fixture(scope="module")
def spark_connect(connect_url: str) -> Iterator[Any]:
    """A Spark Connect session (``pyspark.sql.connect.session.SparkSession``) of this module, with the source
    registered through it. (``pyspark.sql.SparkSession.builder.remote`` returns the same class, but refuses to
    make one in a process that has a classic session already: the test session's.)"""
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(connect_url).getOrCreate()
    try:
        source = register(session)
        assert source.spark_master == "local[2]"  # asked of the server: readMode=auto reads on the driver
        yield session
    finally:
        session.stop()


def sink_options(endpoint: KinesisEndpoint, stream: str) -> dict[str, str]:
    """The sink's options for ``stream`` on ``endpoint``."""
    return {"streamName": stream, "endpointUrl": endpoint.endpoint_url, "region": endpoint.region}


def stream_data(endpoint: KinesisEndpoint, stream: str) -> list[bytes]:
    """Every record's data in ``stream``, sorted."""
    return sorted(r["Data"] for records in raw_records(endpoint, stream).values() for r in records)


class RecordingLagListener(KinesisLagListener):
    """The lag listener, keeping every lag it saw (it forgets a query's lags when the query ends)."""

    def __init__(self) -> None:
        super().__init__(log_level=None)
        self.seen: list[Any] = []

    def onQueryProgress(self, event: Any) -> None:
        self.seen += self.observe(event.progress)


def test_a_stream_read_into_the_sink_through_connect_checkpoints_and_reports_lag(
        spark_connect: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    source = kinesalite.create_stream(shards=2)
    data = [f"stream-{i}".encode() for i in range(40)]
    placed = kinesalite.put(source, data)
    target = kinesalite.create_stream(shards=1)
    lag = RecordingLagListener()
    spark_connect.streams.addListener(lag)
    try:
        df = (spark_connect.readStream.format("kinesis_spout")
              .options(**source_options(kinesalite, zookeeper, source, maxRecordsPerTrigger="25")).load())
        query = (df.selectExpr("partition_key AS partitionKey", "data").writeStream.format("kinesis_spout")
                 .options(**sink_options(kinesalite, target)).option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(120), "the availableNow query did not end within 120 s"
        assert query.exception() is None
        progress = query.recentProgress
    finally:
        spark_connect.streams.removeListener(lag)
    assert stream_data(kinesalite, target) == sorted(data)
    assert sorted(p.numInputRows for p in progress if p.numInputRows) == [15, 25]  # the trigger's limit held
    stored = stored_checkpoints(zookeeper, source)  # ZooKeeper, through the server's Python workers
    assert {shard: c["sequence_number"] for shard, c in stored.items()} == last_by_shard(placed)
    assert wait_until(lambda: len(lag.seen) >= 2, 30), "the listener on the Connect session saw no progress"
    assert {(seen.stream, seen.app) for seen in lag.seen} == {(source, APP)}


def test_a_spout_pipeline_on_a_connect_session_acks_every_record_and_retries_a_failed_one(
        spark_connect: Any, kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"pipeline-{i}".encode() for i in range(25)])
    config = SpoutConfig(stream_name=stream, app_name="connect", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2)
    seen: list[str] = []

    def process(df: Any, batch: Any) -> Any:
        seen.extend(r.message_id for r in df.select("message_id").collect())
        failing = df.filter((df.data.cast("string") == "pipeline-3") & (df.attempt == 1))
        return failing.select("message_id")  # a Connect DataFrame of failed ids: retried once

    pipeline = SpoutPipeline(spark_connect, config, process, trigger_interval_s=0.0,
                             checkpoint_store=MemoryCheckpointStore())
    metrics = pipeline.run(until="caught_up", timeout_s=120)
    assert (metrics.acked, metrics.failed, metrics.dead_lettered) == (25, 1, 0)
    assert sorted(set(seen)) == sorted(message_ids(placed)) and len(seen) == 26


class AddN:
    """A StateUpdater adding each row's n to its word's count."""

    def update_state(self, state: Any, rows: list[Any]) -> None:
        for row in rows:
            state.multi_update([(row.word,)], [lambda old, n=row.n: (old or 0) + n])


def test_the_state_operations_refuse_a_connect_dataframe_and_say_why(spark_connect: Any) -> None:
    df = spark_connect.createDataFrame([("a", 1), ("b", 2)], "word string, n long")
    state = OpaqueMap.factory(MemoryBackingMap.factory(f"connect-{uuid.uuid4().hex[:8]}"))
    batch = TxBatch(1, SpoutKind.OPAQUE, run="connect")
    refusal = "Spark Connect .* no RDDs"
    with pytest.raises(ConfigError, match=refusal):
        persistent_aggregate(df, batch, state, group_by=["word"], aggregator=Count())
    with pytest.raises(ConfigError, match=refusal):
        partition_persist(df, batch, state, AddN(), partitions=1)
    with pytest.raises(ConfigError, match=refusal):
        state_query(df, state, key_columns=["word"])


def test_the_spark_guides_connect_example_reads_and_writes_every_record_once_from_a_client_without_a_jvm(
        connect_url: str, kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    """The guide's block (a batch read, then a batch write into the sink) run as a reader runs it: a Python process
    of its own, with PySpark's usual ``SparkSession.builder.remote(...)``, that starts no JVM."""
    source = kinesalite.create_stream(shards=2)
    data = [f"guide-{i}".encode() for i in range(30)]
    kinesalite.put(source, data)
    target = kinesalite.create_stream(f"{source}-copy", shards=1)
    env = {**os.environ, "SPARK_REMOTE": connect_url, "KINESIS_SPOUT_STREAM": source,
           "KINESIS_SPOUT_ENDPOINT_URL": kinesalite.endpoint_url, "KINESIS_SPOUT_TARGET": target}
    no_jvm = "\nfrom pyspark.core.context import SparkContext\nassert SparkContext._gateway is None, 'a JVM started'\n"
    done = subprocess.run([sys.executable, "-c", guide_connect_block() + no_jvm], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{len(data)} records read" in done.stdout, done.stdout
    assert stream_data(kinesalite, target) == sorted(data)


def guide_connect_block() -> str:
    """The ```python block of the Spark guide's "Spark Connect" section (its one block marked not-run there)."""
    text = GUIDE.read_text()
    section = text.split("## Spark Connect", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]
