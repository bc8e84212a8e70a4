"""The Prometheus metrics of kinesis_spout: names, types, help texts and labels, in one table.

Pure data (no prometheus_client import): the collector builds its families from it, the README lists it, and a
test pins it, so a name never changes by accident. Conventions: the ``kinesis_spout_`` prefix, ``_total`` on
counters, seconds and bytes as base units, labels ``stream``, ``app`` and (per shard) ``shard``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["LATENCY_BUCKETS_S", "METRICS", "PIPELINE_METRICS", "QUERY_METRICS", "SHARD_METRICS", "SPOUT_METRICS",
           "MetricSpec"]

#: Upper bounds (seconds) of the batch-latency histogram of a pipeline's figures (Prometheus' ``le``).
LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, math.inf)

SHARD_LABELS = ("stream", "app", "shard")
SPOUT_LABELS = ("stream", "app")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``kind`` is ``counter``, ``gauge`` or ``histogram``; ``source`` names what it is read from."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]
    source: str


def _shard(name: str, kind: str, source: str, help_text: str) -> MetricSpec:
    return MetricSpec(name, kind, help_text, SHARD_LABELS, source)


def _spout(name: str, kind: str, source: str, help_text: str) -> MetricSpec:
    return MetricSpec(name, kind, help_text, SPOUT_LABELS, source)


#: Per shard read by the spout, from ``KinesisSpout.metrics()`` (a pipeline's: ``PipelineMetrics.shards``).
SHARD_METRICS: tuple[MetricSpec, ...] = (
    _shard("kinesis_spout_shard_owned", "gauge", "1",
           "1 for each shard this spout reads now (with leases: holds)"),
    _shard("kinesis_spout_behind_latest_seconds", "gauge", "millis_behind_latest",
           "MillisBehindLatest of the shard's last GetRecords reply or fan-out event, in seconds (absent until the "
           "first call)"),
    _shard("kinesis_spout_checkpoint_age_seconds", "gauge", "checkpoint_age_s",
           "Seconds since the shard's stored checkpoint last moved"),
    _shard("kinesis_spout_inflight_records", "gauge", "inflight",
           "Records emitted and not done (waiting retries and dead letters included)"),
    _shard("kinesis_spout_inflight_bytes", "gauge", "inflight_bytes", "Bytes of the records in flight"),
    _shard("kinesis_spout_buffered_records", "gauge", "buffered", "Records read ahead and not emitted yet"),
    _shard("kinesis_spout_retry_queue_records", "gauge", "retry_queue", "Failed records waiting for their retry"),
    _shard("kinesis_spout_dead_letters_pending", "gauge", "dead_letters_pending",
           "Dead letters not written yet (they hold the checkpoint back)"),
    _shard("kinesis_spout_shard_finished", "gauge", "finished", "1 once a closed shard was read to its end and done"),
    _shard("kinesis_spout_records_read_total", "counter", "records_read", "Records fetched by GetRecords"),
    _shard("kinesis_spout_emitted_records_total", "counter", "emitted", "New records emitted (retries not counted)"),
    _shard("kinesis_spout_emitted_bytes_total", "counter", "emitted_bytes",
           "Bytes (data and partition key) of the new records emitted"),
    _shard("kinesis_spout_acked_records_total", "counter", "acked", "Records acked"),
    _shard("kinesis_spout_failed_records_total", "counter", "failed", "Record failures acted upon (timeouts included)"),
    _shard("kinesis_spout_timed_out_records_total", "counter", "timed_out",
           "Record failures caused by the message timeout"),
    _shard("kinesis_spout_retried_records_total", "counter", "retried", "Failed records emitted again"),
    _shard("kinesis_spout_dead_letters_total", "counter", "dead_lettered", "Dead letters written"),
    _shard("kinesis_spout_getrecords_calls_total", "counter", "getrecords_calls", "GetRecords calls"),
    _shard("kinesis_spout_getrecords_retried_errors_total", "counter", "getrecords_retried_errors",
           "GetRecords errors retried after a backoff (throttles, 5xx, lost connections)"),
    _shard("kinesis_spout_expired_iterators_total", "counter", "expired_iterators",
           "Shard iterators that expired and were renewed"),
    _shard("kinesis_spout_corrupt_aggregates_total", "counter", "corrupt_aggregates",
           "Records with the KPL magic that did not decode (delivered whole)"),
    _shard("kinesis_spout_foreign_user_records_total", "counter", "foreign_user_records",
           "User records of KPL aggregates dropped: their hash keys belong to other shards (a producer with a stale "
           "shard map put them here; it puts them in their own shards too)"),
    _shard("kinesis_spout_subscriptions_total", "counter", "subscriptions",
           "Enhanced fan-out subscriptions made (retrieval=fanout; renewals included)"),
    _shard("kinesis_spout_subscription_renewals_total", "counter", "subscription_renewals",
           "Enhanced fan-out subscriptions that ended cleanly and were renewed"),
)

#: Per spout, from the spout's own counters (not available through a pipeline).
SPOUT_METRICS: tuple[MetricSpec, ...] = (
    _spout("kinesis_spout_checkpoint_writes_total", "counter", "checkpoint_writes", "Checkpoints written"),
    _spout("kinesis_spout_checkpoint_conflicts_total", "counter", "checkpoint_conflicts",
           "Checkpoint writes that lost to a higher stored checkpoint"),
    _spout("kinesis_spout_checkpoint_write_failures_total", "counter", "checkpoint_write_failures",
           "Checkpoint writes that failed and were retried"),
    _spout("kinesis_spout_dead_letter_write_failures_total", "counter", "dead_letter_failures",
           "Dead-letter writes that failed and were retried"),
    _spout("kinesis_spout_poison_records_total", "counter", "poison_records",
           "Records the scheme could not decode (dead-lettered)"),
    _spout("kinesis_spout_unknown_message_ids_total", "counter", "unknown_message_ids",
           "Acks and fails of message ids this spout does not own"),
)

#: Per pipeline, from ``SpoutPipeline.metrics`` (counted since the current run started).
PIPELINE_METRICS: tuple[MetricSpec, ...] = (
    _spout("kinesis_spout_pipeline_batches_total", "counter", "batches", "Batches processed"),
    _spout("kinesis_spout_pipeline_failed_batches_total", "counter", "failed_batches",
           "Tries of a batch whose process raised (each try counts)"),
    _spout("kinesis_spout_pipeline_records_total", "counter", "records", "Records in processed batches"),
    _spout("kinesis_spout_pipeline_bytes_total", "counter", "bytes", "Bytes in processed batches"),
    _spout("kinesis_spout_pipeline_acked_records_total", "counter", "acked", "Records acked by the pipeline"),
    _spout("kinesis_spout_pipeline_failed_records_total", "counter", "failed", "Records failed by the pipeline"),
    _spout("kinesis_spout_pipeline_records_per_second", "gauge", "records_per_s",
           "Records processed per second since the run started"),
    _spout("kinesis_spout_pipeline_last_batch_id", "gauge", "batch_id", "Id of the last processed batch"),
    _spout("kinesis_spout_pipeline_batch_latency_seconds", "histogram", "latency_buckets",
           "Time from a batch's first record taken to its last ack or fail"),
)

QUERY_SHARD_LABELS = ("stream", "app", "query", "shard")
QUERY_LABELS = ("stream", "app", "query")

#: Per ``format("kinesis_spout")`` query, from its progress's ``latestOffset`` (``KinesisLagListener``; ``source``
#: names a field of ``kinesis_spout.spark.source.lag.ShardLag``, or the query's total). ``query``: its name, else
#: its id.
QUERY_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("kinesis_spout_query_behind_latest_seconds", "gauge",
               "MillisBehindLatest of the shard's last read by the query's source, in seconds (absent where not "
               "known)", QUERY_SHARD_LABELS, "millis_behind_latest"),
    MetricSpec("kinesis_spout_query_records_behind", "gauge",
               "Records the query's source read from the shard and did not put in a batch yet (driver reads)",
               QUERY_SHARD_LABELS, "records_behind"),
    MetricSpec("kinesis_spout_query_last_arrival_timestamp_seconds", "gauge",
               "Arrival time at Kinesis (Unix seconds) of the last record the query's source read from the shard",
               QUERY_SHARD_LABELS, "last_arrival"),
    MetricSpec("kinesis_spout_query_max_behind_latest_seconds", "gauge",
               "The largest MillisBehindLatest of the query's shards, in seconds", QUERY_LABELS, "total"),
)

METRICS: tuple[MetricSpec, ...] = SHARD_METRICS + SPOUT_METRICS + PIPELINE_METRICS + QUERY_METRICS
