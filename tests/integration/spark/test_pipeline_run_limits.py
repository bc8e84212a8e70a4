"""Both runners of SpoutPipeline (at-least-once and exactly-once) end a run at the same limits: ``until``,
``max_batches``, ``stop()`` and ``timeout_s``, checked between batches."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kinesis_spout import InitialPosition, SpoutConfig
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.spark import SpoutPipeline
from kinesis_spout.state import MemoryBackingMap
from kinesis_spout.testing.kinesis import KinesisEndpoint

RECORDS = 20
PER_BATCH = 5  # so the stream holds four batches: a run that ignores a limit processes more than it allows


def pipeline(spark: Any, kinesalite: KinesisEndpoint, mode: str, process: Any) -> SpoutPipeline:
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(RECORDS)])
    config = SpoutConfig(stream_name=stream, app_name="limits", endpoint_url=kinesalite.endpoint_url,
                         region="us-east-1", initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2)
    log = MemoryBackingMap.factory(f"limits-{uuid.uuid4().hex[:10]}") if mode == "exactly_once" else None
    return SpoutPipeline(spark, config, process, trigger_interval_s=0.0, max_batch_records=PER_BATCH,
                         checkpoint_store=MemoryCheckpointStore(), exactly_once=log)


@pytest.mark.parametrize("mode", ["at_least_once", "exactly_once"])
@pytest.mark.parametrize("limit", ["until", "max_batches", "stop"])
def test_a_run_ends_at_its_limit_after_the_batch_in_progress(spark: Any, kinesalite: KinesisEndpoint, mode: str,
                                                             limit: str) -> None:
    seen: list[int] = []
    holder: dict[str, SpoutPipeline] = {}

    def process(df: Any, batch: Any) -> None:
        seen.append(df.count())
        if limit == "stop" and len(seen) == 1:
            holder["p"].stop()  # from inside the batch: the run ends after it

    p = holder["p"] = pipeline(spark, kinesalite, mode, process)
    if limit == "until":
        metrics = p.run(until=lambda: len(seen) >= 1, timeout_s=60)
    elif limit == "max_batches":
        metrics = p.run(max_batches=2, timeout_s=60)
    else:
        metrics = p.run(timeout_s=60)
    wanted = 2 if limit == "max_batches" else 1
    assert seen == [PER_BATCH] * wanted, f"{mode}: the run went past its {limit} limit: batches of {seen}"
    assert metrics.batches == wanted and metrics.acked == PER_BATCH * wanted
    # the rest is left for the next run, which a zero timeout ends before it processes anything
    assert p.run(timeout_s=0).batches == 0 and len(seen) == wanted
