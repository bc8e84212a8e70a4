"""Helpers of the Spark source tests: the source's options, a driver's micro-batch loop without Spark (on the
driver and on executors), an AvailableNow run on a busy stream, and what the queries stored in ZooKeeper."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from kinesis_spout.spark.source import ExecutorStreamReader, KinesisSpoutDataSource, KinesisSpoutStreamReader
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

#: The readStream query of the driver crash tests, run in a process of its own.
CONSUMER = Path(__file__).parents[1] / "procs" / "spark_source_consumer.py"
APP = "source-test"  # the app name of source_options


def source_options(endpoint: KinesisEndpoint, zookeeper: Any, stream: str, **extra: str) -> dict[str, str]:
    """The source's options for ``stream`` (app APP, from TRIM_HORIZON, a checkpoint at every commit); ``extra``
    adds or overrides options."""
    return {"streamName": stream, "appName": APP, "zookeeper": zookeeper.hosts, "zookeeperPrefix": zookeeper.prefix,
            "endpointUrl": endpoint.endpoint_url, "region": endpoint.region, "initialPosition": "TRIM_HORIZON",
            "checkpointIntervalS": "0", "emptyRecordBackoffS": "0.2", **extra}


def message_ids(placed: list[tuple[str, str]]) -> list[str]:
    """The message ids (``shard:sequence``) of records put, as the source's rows name them."""
    return [f"{shard}:{seq}" for shard, seq in placed]


def last_by_shard(placed: list[tuple[str, str]]) -> dict[str, str]:
    """The highest sequence number put into each shard."""
    out: dict[str, str] = {}
    for shard, seq in placed:
        if shard not in out or int(seq) > int(out[shard]):
            out[shard] = seq
    return out


def stored_checkpoints(zookeeper: Any, stream: str) -> dict[str, dict[str, Any]]:
    """The checkpoints app APP stored in ZooKeeper for ``stream``, by shard (decoded JSON)."""
    client = zookeeper.reader()
    base = f"{zookeeper.prefix}/{APP}/{stream}/checkpoints"
    if not client.exists(base):
        return {}
    return {shard: json.loads(client.get(f"{base}/{shard}")[0]) for shard in client.get_children(base)}


def read_partition(reader: KinesisSpoutStreamReader | ExecutorStreamReader, partition: Any) -> list[str]:
    """The message ids of the rows ``reader`` reads for ``partition``, in order."""
    return [mid for batch in reader.read(partition) for mid in batch.column("message_id").to_pylist()]


def run_batches(reader: KinesisSpoutStreamReader, start: dict[str, str], limit: Any, max_batches: int = 100
                ) -> tuple[list[tuple[dict[str, str], dict[str, str], list[Any], list[str]]], dict[str, str]]:
    """Drive the reader like Spark's micro-batch loop until latestOffset returns its start (AvailableNow)."""
    batches = []
    for _ in range(max_batches):
        end = reader.latestOffset(start, limit)
        if end == start:
            return batches, end
        parts = reader.partitions(start, end)
        ids = [mid for p in parts for mid in read_partition(reader, p)]
        batches.append((start, end, parts, ids))
        reader.commit(end)
        start = end
    raise AssertionError(f"no end after {max_batches} batches")


def available_now_while_producing(kinesis: KinesisEndpoint, stream: str, reader: Any, max_batches: int
                                  ) -> tuple[list[Any], dict[str, str], list[tuple[str, str]]]:
    """Run ``reader`` under Trigger.AvailableNow while a producer keeps putting records into ``stream`` (a busy
    stream must not keep the run going): returns the run's batches, its last offset, and the records put after the
    run's cutoff. The producer is stopped before it returns; the reader is left open."""
    reader.available_now_margin = timedelta(0)  # moto's timestamps come from this machine's clock
    reader.prepareForTriggerAvailableNow()
    began = datetime.now(timezone.utc)  # the run's cutoff is no later than this
    assert wait_until(lambda: datetime.now(timezone.utc) > began, 1, interval_s=0.001)
    stop = threading.Event()
    later: list[tuple[str, str]] = []

    def produce() -> None:
        while not stop.is_set():
            later.extend(kinesis.put(stream, [b"new"]))
            stop.wait(0.01)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        assert wait_until(lambda: len(later) >= 5, 5)
        batches, final = run_batches(reader, reader.initialOffset(), reader.getDefaultReadLimit(),
                                     max_batches=max_batches)
    finally:
        stop.set()
        producer.join(5)
    return batches, final, later


# -- queries on Spark --------------------------------------------------------------------------------------------
def load(spark: Any, options: dict[str, str]) -> Any:
    """A streaming DataFrame of the source (registered on ``spark``) with ``options``."""
    spark.dataSource.register(KinesisSpoutDataSource)
    return spark.readStream.format("kinesis_spout").options(**options).load()


def collecting_sink(batches: dict[int, list[dict[str, Any]]]) -> Any:
    """A foreachBatch function that keeps each batch's rows (as dicts) in ``batches`` by batch id."""
    def sink(df: Any, batch_id: int) -> None:
        batches[batch_id] = [row.asDict() for row in df.collect()]
    return sink


def executor_options(endpoint: KinesisEndpoint, zookeeper: Any, stream: str, **extra: str) -> dict[str, str]:
    """source_options with reads on the executors (readMode "executors")."""
    return source_options(endpoint, zookeeper, stream, readMode="executors", **extra)


def drive(reader: ExecutorStreamReader, start: dict[str, Any], limit: Any, max_batches: int = 200
          ) -> tuple[list[tuple[dict[str, Any], dict[str, Any], list[str]]], dict[str, Any]]:
    """Spark's micro-batch loop: plan, run every task, commit, until latestOffset returns its start."""
    batches = []
    for _ in range(max_batches):
        end = reader.latestOffset(start, limit)
        if end == start:
            return batches, end
        ids = [mid for part in reader.partitions(start, end) for mid in read_partition(reader, part)]
        batches.append((start, end, ids))
        reader.commit(end)
        start = end
    raise AssertionError(f"no end after {max_batches} batches")


def delete_stream(client: Any, stream: str) -> None:
    """Delete ``stream`` and wait until Kinesis says it does not exist."""
    client.delete_stream(StreamName=stream)

    def gone() -> bool:
        try:
            client.describe_stream_summary(StreamName=stream)
        except client.exceptions.ResourceNotFoundException:
            return True
        return False

    assert wait_until(gone, 30), f"stream {stream} was not deleted"
