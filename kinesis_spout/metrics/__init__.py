"""Prometheus metrics (opt-in; needs the ``metrics`` extra, prometheus-client, imported only when used).

``SpoutConfig(metrics_port=9108)`` serves a spout's metrics from ``open()`` to ``close()``;
:func:`start_metrics_server` serves any spouts and pipelines; :class:`SpoutCollector` goes into a registry of your
own. The names are listed in :mod:`kinesis_spout.metrics.names`.
"""

from kinesis_spout.metrics.collector import SpoutCollector
from kinesis_spout.metrics.names import (
    METRICS,
    PIPELINE_METRICS,
    QUERY_METRICS,
    SHARD_METRICS,
    SPOUT_METRICS,
    MetricSpec,
)
from kinesis_spout.metrics.server import MetricsServer, start_metrics_server
from kinesis_spout.metrics.shard import ShardMetrics

__all__ = ["METRICS", "PIPELINE_METRICS", "QUERY_METRICS", "SHARD_METRICS", "SPOUT_METRICS", "MetricSpec",
           "MetricsServer", "ShardMetrics", "SpoutCollector", "start_metrics_server"]
