"""A batch tried again after ``process()`` raised: the INFO line (and the metrics) of each try give that try's
time, not the time since the batch was first collected, which added the earlier tries and the backoff between
them to the latency of the try that succeeded. On the shared local Spark session, moto and the real ZooKeeper."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from kinesis_spout import InitialPosition, RetryBackoff, SpoutConfig
from kinesis_spout.spark import Batch, SpoutPipeline
from kinesis_spout.testing.kinesis import KinesisEndpoint

BACKOFF_S = 2.0  # between the two tries of batch 1
LINE = re.compile(r"batch (\d+): .* in ([0-9.]+) s \(\d+/s; DataFrame ([0-9.]+) s, process ([0-9.]+) s\)")


def test_the_latency_of_a_retried_batch_s_try_is_its_own(spark: Any, moto_kinesis: KinesisEndpoint, zookeeper: Any,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    moto_kinesis.put(stream, [f"record-{i}" for i in range(5)])
    config = SpoutConfig(stream_name=stream, app_name="retry-latency", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=moto_kinesis.endpoint_url,
                         region=moto_kinesis.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.1)
    tries: list[int] = []

    def flaky(df: Any, batch: Batch) -> None:
        tries.append(batch.attempt)
        if len(tries) == 1:
            raise RuntimeError("the sink is down")

    caplog.set_level(logging.INFO, logger="kinesis_spout.spark")
    pipeline = SpoutPipeline(spark, config, flaky, trigger_interval_s=0.0,
                             batch_retry_backoff=RetryBackoff(initial_s=BACKOFF_S, multiplier=1.0, max_s=BACKOFF_S))
    metrics = pipeline.run(until=lambda: pipeline.metrics.acked == 5, timeout_s=120)
    assert tries[:2] == [1, 2] and metrics.acked == 5
    lines = [m.groups() for m in (LINE.search(r.getMessage()) for r in caplog.records) if m and m.group(1) == "1"]
    assert len(lines) == 2, [r.getMessage() for r in caplog.records]
    _, latency, dataframe, process = (float(x) for x in lines[1])
    # the second try's own time is its DataFrame, its process() and the recording of its figures; the backoff
    # waited before it and the first try are not part of it
    assert latency < dataframe + process + BACKOFF_S, lines
    assert metrics.last is not None and metrics.last.latency_s < metrics.last.dataframe_s + \
        metrics.last.process_s + BACKOFF_S
