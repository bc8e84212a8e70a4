"""The Prometheus metric names are part of the public API (dashboards and alerts use them): pinned here."""

from __future__ import annotations

import math

from kinesis_spout.metrics.names import METRICS, PIPELINE_METRICS, QUERY_METRICS, SHARD_METRICS, SPOUT_METRICS
from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.spark.pipeline.metrics import LATENCY_BUCKETS_S, BatchMetrics, MetricsRecorder

PINNED = {
    "kinesis_spout_shard_owned": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_behind_latest_seconds": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_checkpoint_age_seconds": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_inflight_records": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_inflight_bytes": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_buffered_records": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_retry_queue_records": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_dead_letters_pending": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_shard_finished": ("gauge", ("stream", "app", "shard")),
    "kinesis_spout_records_read_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_emitted_records_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_emitted_bytes_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_acked_records_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_failed_records_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_timed_out_records_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_retried_records_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_dead_letters_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_getrecords_calls_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_getrecords_retried_errors_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_expired_iterators_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_corrupt_aggregates_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_foreign_user_records_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_subscriptions_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_subscription_renewals_total": ("counter", ("stream", "app", "shard")),
    "kinesis_spout_checkpoint_writes_total": ("counter", ("stream", "app")),
    "kinesis_spout_checkpoint_conflicts_total": ("counter", ("stream", "app")),
    "kinesis_spout_checkpoint_write_failures_total": ("counter", ("stream", "app")),
    "kinesis_spout_dead_letter_write_failures_total": ("counter", ("stream", "app")),
    "kinesis_spout_poison_records_total": ("counter", ("stream", "app")),
    "kinesis_spout_unknown_message_ids_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_batches_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_failed_batches_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_records_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_bytes_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_acked_records_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_failed_records_total": ("counter", ("stream", "app")),
    "kinesis_spout_pipeline_records_per_second": ("gauge", ("stream", "app")),
    "kinesis_spout_pipeline_last_batch_id": ("gauge", ("stream", "app")),
    "kinesis_spout_pipeline_batch_latency_seconds": ("histogram", ("stream", "app")),
    "kinesis_spout_query_behind_latest_seconds": ("gauge", ("stream", "app", "query", "shard")),
    "kinesis_spout_query_records_behind": ("gauge", ("stream", "app", "query", "shard")),
    "kinesis_spout_query_last_arrival_timestamp_seconds": ("gauge", ("stream", "app", "query", "shard")),
    "kinesis_spout_query_max_behind_latest_seconds": ("gauge", ("stream", "app", "query")),
}


def test_metric_names_types_and_labels_are_pinned() -> None:
    assert {m.name: (m.kind, m.labels) for m in METRICS} == PINNED
    assert len(METRICS) == len(PINNED)  # no name twice


def test_names_follow_prometheus_conventions() -> None:
    for m in METRICS:
        assert m.name.startswith("kinesis_spout_"), m.name
        assert m.name.endswith("_total") == (m.kind == "counter"), m.name
        assert "millis" not in m.name and "_ms" not in m.name, f"{m.name}: seconds are the base unit"
        assert m.help and not m.help.endswith("."), m.name


def test_every_source_field_exists() -> None:
    shard_fields = set(ShardMetrics.__dataclass_fields__)
    assert {m.source for m in SHARD_METRICS} - {"1"} <= shard_fields
    from kinesis_spout.spout import KinesisSpout

    assert all(isinstance(getattr(KinesisSpout, m.source, None), property) or m.source in
               ("poison_records", "unknown_message_ids") for m in SPOUT_METRICS)
    from kinesis_spout.spark.pipeline.metrics import PipelineMetrics

    assert {m.source for m in PIPELINE_METRICS} <= set(PipelineMetrics.__dataclass_fields__)
    from kinesis_spout.spark.source.lag import ShardLag

    assert {m.source for m in QUERY_METRICS} - {"total"} <= set(ShardLag.__dataclass_fields__)


def _batch(batch_id: int, latency: float) -> BatchMetrics:
    from datetime import datetime, timezone

    return BatchMetrics(batch_id, 10, 100, 0, 10, 0, None, datetime.now(timezone.utc), 0.0, 0.0, latency)


def test_the_recorder_keeps_a_cumulative_latency_histogram_of_every_batch() -> None:
    recorder = MetricsRecorder()
    recorder.reset(0)
    assert recorder.snapshot().latency_buckets == (0,) * len(LATENCY_BUCKETS_S)
    for i, latency in enumerate([0.01, 0.07, 0.3, 0.3, 4.0, 100.0]):
        recorder.record(_batch(i + 1, latency), ())
    figures = recorder.snapshot()
    assert dict(zip(LATENCY_BUCKETS_S, figures.latency_buckets)) == {
        0.05: 1, 0.1: 2, 0.25: 2, 0.5: 4, 1.0: 4, 2.5: 4, 5.0: 5, 10.0: 5, 30.0: 5, 60.0: 5, math.inf: 6}
    assert math.isclose(figures.latency_sum_s, 104.68)
    assert figures.batches == 6
    recorder.reset(6)
    assert recorder.snapshot().latency_buckets[-1] == 0 and recorder.snapshot().latency_sum_s == 0.0
