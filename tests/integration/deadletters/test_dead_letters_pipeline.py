"""SpoutPipeline (local Spark, kinesalite, real ZooKeeper) with a dead-letter destination and a metrics endpoint:
the pipeline passes its SpoutConfig to its spout, so destinations work unchanged; its batch figures are scraped
over HTTP while it runs."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kinesis_spout import InitialPosition, JsonScheme, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.deadletters import JsonLinesDeadLetters, record_from_envelope
from kinesis_spout.metrics import start_metrics_server
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

pytestmark = pytest.mark.slow


def scrape(port: int) -> dict[str, float]:
    """Samples summed over their labels, by sample name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name + (f"{{le={sample.labels['le']}}}" if "le" in sample.labels else "")
            out[key] = out.get(key, 0.0) + sample.value
    return out


def test_a_pipeline_dead_letters_into_a_file_and_serves_its_batch_metrics(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    from kinesis_spout.spark import SpoutPipeline

    stream = kinesalite.create_stream(shards=1)
    records = [json.dumps({"n": i}).encode() for i in range(20)]
    records.insert(7, b"not json")
    placed = kinesalite.put(stream, records)
    path = tmp_path / "dead.jsonl"
    config = SpoutConfig(stream_name=stream, app_name="pipeline-dead-letters", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.1, scheme=JsonScheme(), retry_limit=0,
                         dead_letter=JsonLinesDeadLetters(str(path)))
    seen: list[str] = []
    lock = threading.Lock()

    def process(df: Any, batch: Any) -> list[str]:
        rows = df.select("message_id", "data").collect()
        with lock:
            seen.extend(r.message_id for r in rows)
        return [r.message_id for r in rows if json.loads(bytes(r.data))["n"] == 3]  # fails: a dead letter

    pipeline = SpoutPipeline(spark, config, process, trigger_interval_s=0.0, max_batch_records=5)
    server = start_metrics_server(0, pipeline, addr="127.0.0.1")
    stop = threading.Event()
    runner = threading.Thread(target=pipeline.run, kwargs={"until": stop.is_set, "timeout_s": 120})
    runner.start()
    try:
        assert wait_until(lambda: scrape(server.port).get("kinesis_spout_pipeline_batches_total", 0) >= 1, 60)
        first = scrape(server.port)
        assert wait_until(lambda: len(seen) == 20, 60)
        assert wait_until(lambda: scrape(server.port).get("kinesis_spout_dead_letters_total", 0) == 2, 30)
        last = scrape(server.port)
    finally:
        stop.set()
        runner.join(60)
        server.close()
    assert last["kinesis_spout_pipeline_records_total"] == 20 > first["kinesis_spout_pipeline_records_total"] - 1
    batches = last["kinesis_spout_pipeline_batches_total"]
    assert batches >= 4 and last["kinesis_spout_pipeline_batch_latency_seconds_count"] == batches
    assert last["kinesis_spout_pipeline_batch_latency_seconds_bucket{le=+Inf}"] == batches
    assert last["kinesis_spout_pipeline_failed_records_total"] == 1
    assert last["kinesis_spout_shard_owned"] == 1
    letters = [record_from_envelope(line)[1] for line in path.read_bytes().splitlines()]
    expected = {f"{placed[i][0]}:{placed[i][1]}": records[i] for i in (3, 7)}  # {"n": 3} and the poison record
    assert {r.message_id: r.data for r in letters} == expected and len(letters) == 2
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
    finally:
        store.close()
