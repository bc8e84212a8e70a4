"""SpoutPipeline.run() ends with the DeadLetterStormError of its spout (local Spark, kinesalite, real ZooKeeper),
and the checkpoint in ZooKeeper stays at the last good record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import DeadLetterStormError, InitialPosition, JsonScheme, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.deadletters import JsonLinesDeadLetters
from kinesis_spout.testing.kinesis import KinesisEndpoint


def test_a_pipeline_on_the_wrong_scheme_ends_with_the_storm_and_keeps_the_checkpoint_at_the_last_good_record(
        spark: Any, kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    from kinesis_spout.spark import SpoutPipeline

    stream = kinesalite.create_stream(shards=1)
    good = kinesalite.put(stream, [json.dumps({"n": i}) for i in range(10)])
    kinesalite.put(stream, [f"a line of text {i}" for i in range(300)])
    config = SpoutConfig(stream_name=stream, app_name="pipeline-storm", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, scheme=JsonScheme(),
                         dead_letter=JsonLinesDeadLetters(str(tmp_path / "dead.jsonl")))
    pipeline = SpoutPipeline(spark, config, lambda df, batch: None, trigger_interval_s=0.0, max_batch_records=5)
    with pytest.raises(DeadLetterStormError, match="JsonScheme") as caught:
        pipeline.run(timeout_s=90)
    assert "max_dead_letters_in_a_row" in str(caught.value)
    store = ZooKeeperCheckpointStore.from_config(config)
    store.open()
    try:
        assert store.load(good[0][0]).sequence_number == good[-1][1]  # type: ignore[union-attr]
    finally:
        store.close()
