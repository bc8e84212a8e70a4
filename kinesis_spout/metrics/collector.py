"""A Prometheus collector over a spout's or a pipeline's figures, read at scrape time."""

from __future__ import annotations

from typing import Any, Iterator

from kinesis_spout.metrics.names import (
    LATENCY_BUCKETS_S,
    PIPELINE_METRICS,
    SHARD_METRICS,
    SPOUT_METRICS,
    MetricSpec,
)

__all__ = ["SpoutCollector", "require_prometheus_client"]


def require_prometheus_client() -> Any:
    """The ``prometheus_client`` module, or a clear error naming the extra that installs it."""
    try:
        import prometheus_client
        import prometheus_client.core  # noqa: F401 - the metric families live there
    except ImportError as exc:
        from kinesis_spout.errors import ConfigError

        raise ConfigError("Prometheus metrics need the prometheus-client package: "
                          "pip install 'kinesis-spout[metrics]'") from exc
    return prometheus_client


class SpoutCollector:
    """Collects the metrics of :mod:`kinesis_spout.metrics.names` from a :class:`~kinesis_spout.KinesisSpout` or a
    :class:`~kinesis_spout.spark.SpoutPipeline` each time Prometheus scrapes (nothing is kept in between).

    Register it in a registry of your own (``registry.register(SpoutCollector(spout))``) or let
    :func:`~kinesis_spout.metrics.start_metrics_server` do it. A spout gives the per-shard and per-spout metrics; a
    pipeline gives the per-pipeline ones and the per-shard ones of its spout as of its last batch (refreshed every
    0.2 s while it waits). Reading takes the spout's lock for as long as ``metrics()`` does. Safe from any thread.
    """

    def __init__(self, source: Any) -> None:
        is_spout = callable(getattr(source, "metrics", None)) and hasattr(source, "next_batch")
        is_pipeline = hasattr(type(source), "metrics") and isinstance(type(source).metrics, property)
        if not (is_spout or is_pipeline):
            raise TypeError(f"SpoutCollector needs a KinesisSpout or a SpoutPipeline, got {type(source).__name__}")
        self.source = source
        self._is_pipeline = not is_spout

    def describe(self) -> list[Any]:
        """No description up front: the registry then calls :meth:`collect` only at scrape time."""
        return []

    def collect(self) -> Iterator[Any]:
        prometheus_client = require_prometheus_client()
        core = prometheus_client.core
        config = self.source.config
        base = [config.stream_name, config.app_name]
        if self._is_pipeline:
            figures = self.source.metrics
            shards = list(figures.shards)
        else:
            figures = None
            shards = self.source.metrics()
        for spec in SHARD_METRICS:
            family = _family(core, spec)
            for shard in shards:
                value = 1 if spec.source == "1" else getattr(shard, spec.source)
                if value is None:
                    continue
                if spec.source == "millis_behind_latest":
                    value = value / 1000.0
                labels = [shard.stream_name or config.stream_name, config.app_name, shard.shard_id]
                family.add_metric(labels, float(value))
            yield family
        if figures is None:
            for spec in SPOUT_METRICS:
                family = _family(core, spec)
                family.add_metric(base, float(getattr(self.source, spec.source)))
                yield family
            return
        for spec in PIPELINE_METRICS:
            if spec.kind == "histogram":
                buckets = [(_le(bound), float(n)) for bound, n in zip(LATENCY_BUCKETS_S, figures.latency_buckets)]
                family = core.HistogramMetricFamily(_bare(spec), spec.help, labels=spec.labels)
                family.add_metric(base, buckets, figures.latency_sum_s)
            else:
                family = _family(core, spec)
                family.add_metric(base, float(getattr(figures, spec.source)))
            yield family


def _bare(spec: MetricSpec) -> str:
    """prometheus_client adds ``_total`` to counter families itself."""
    return spec.name[: -len("_total")] if spec.kind == "counter" else spec.name


def _family(core: Any, spec: MetricSpec) -> Any:
    cls = core.CounterMetricFamily if spec.kind == "counter" else core.GaugeMetricFamily
    return cls(_bare(spec), spec.help, labels=spec.labels)


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))
