"""The figures of a running pipeline: one :class:`BatchMetrics` per batch and the :class:`PipelineMetrics` totals.

Who writes: the pipeline's run loop, once per processed batch, through a :class:`MetricsRecorder`. Who reads:
anyone, from any thread, through ``SpoutPipeline.metrics``, which returns a frozen snapshot.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Mapping, Sequence

from kinesis_spout.metrics.names import LATENCY_BUCKETS_S
from kinesis_spout.metrics.shard import ShardMetrics

__all__ = ["LATENCY_BUCKETS_S", "BatchMetrics", "MetricsRecorder", "PipelineMetrics", "percentile"]

#: Batch latencies kept for the percentiles of :class:`PipelineMetrics`.
LATENCY_WINDOW = 1000


@dataclass(frozen=True)
class BatchMetrics:
    """What one batch did and how long it took.

    ``acked`` and ``failed`` count records; a try whose ``process`` raised is recorded too, with ``error`` naming
    the exception and none of its records acked or failed (they are held, and the batch is tried again).
    ``dataframe_s`` is the time spent building the DataFrame through Arrow, ``process_s`` the time in ``process``
    and collecting its failed ids; ``latency_s`` runs from the batch's first record taken to its last ack or
    fail; ``records_per_s`` is ``records / latency_s``.
    ``lag_ms`` is each owned shard's MillisBehindLatest after the batch (None while a shard has not been read yet).
    """

    batch_id: int
    records: int
    bytes: int
    retries: int
    acked: int
    failed: int
    error: str | None
    started_at: datetime
    dataframe_s: float
    process_s: float
    latency_s: float
    lag_ms: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def records_per_s(self) -> float:
        return self.records / self.latency_s if self.latency_s > 0 else float(self.records)

    def describe(self) -> str:
        """The INFO log line of the batch: its figures and the lag summed up (the largest, how many shards are
        behind, how many not read yet); :meth:`describe_lags` gives each shard's."""
        text = (f"batch {self.batch_id}: {self.records} records ({self.retries} retried, {self.bytes} B), "
                f"{self.acked} acked, {self.failed} failed in {self.latency_s:.3f} s ({self.records_per_s:.0f}/s; "
                f"DataFrame {self.dataframe_s:.3f} s, process {self.process_s:.3f} s); {self.lag_summary()}")
        return text + (f"; process() raised {self.error}" if self.error else "")

    def lag_summary(self) -> str:
        """``lag max 1400 ms, 10 of 16 shards behind`` (``lag 0 ms, ...`` when none is behind; shards not read yet
        are counted apart)."""
        if not self.lag_ms:
            return "lag: no shards"
        known = [ms for ms in self.lag_ms.values() if ms is not None]
        behind = sum(1 for ms in known if ms > 0)
        largest = max(known, default=0)
        text = (f"lag max {largest} ms" if largest else "lag 0 ms") + f", {behind} of {len(self.lag_ms)} shards behind"
        unread = len(self.lag_ms) - len(known)
        return text + (f", {unread} not read yet" if unread else "")

    def describe_lags(self) -> str:
        """The DEBUG log line of the batch: each shard's MillisBehindLatest, in shard order."""
        lags = ", ".join(f"{shard} {'? (not read yet)' if ms is None else ms}"
                         for shard, ms in sorted(self.lag_ms.items()))
        return f"batch {self.batch_id} lag ms by shard: {lags or 'no shards'}"


@dataclass(frozen=True)
class PipelineMetrics:
    """Totals of a pipeline since its current (or last) ``run()`` started, and the last batch.

    ``batches`` counts processed batches, each try of a batch once (empty triggers are not batches),
    ``failed_batches`` the tries whose ``process`` raised. ``records_per_s`` is ``records`` over the time
    ``run()`` has been running.
    ``latency_p50_s``/``latency_p95_s`` cover the last 1,000 batches; ``latency_buckets`` is a histogram of every
    batch's latency since the run started: for each bound of :data:`LATENCY_BUCKETS_S`, the batches at or under
    it (cumulative, as Prometheus wants), with ``latency_sum_s`` their total. ``batch_id`` is the id of the last
    processed batch (or the stored one before the first batch). ``shards`` is ``KinesisSpout.metrics()`` as
    of the last batch, refreshed every 0.2 s while the pipeline waits for records: checkpoint, in-flight,
    retry queue, lag and dead-letter counts per shard.
    """

    batches: int = 0
    failed_batches: int = 0
    records: int = 0
    bytes: int = 0
    acked: int = 0
    failed: int = 0
    running_s: float = 0.0
    records_per_s: float = 0.0
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    latency_sum_s: float = 0.0
    latency_buckets: tuple[int, ...] = (0,) * len(LATENCY_BUCKETS_S)
    batch_id: int = 0
    last: BatchMetrics | None = None
    shards: tuple[ShardMetrics, ...] = ()

    @property
    def dead_lettered(self) -> int:
        return sum(s.dead_lettered for s in self.shards)

    @property
    def lag_ms(self) -> dict[str, int | None]:
        return {s.key: s.millis_behind_latest for s in self.shards}


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` (0..1) percentile of ``values`` by the nearest-rank method; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


class MetricsRecorder:
    """Accumulates batch figures; thread-safe. Owned by one pipeline, reset at the start of each ``run()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = PipelineMetrics()
        self._started = time.monotonic()
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)

    def reset(self, batch_id: int, shards: Sequence[ShardMetrics] = ()) -> None:
        """Start counting afresh (called by ``run()`` once the spout is open)."""
        with self._lock:
            self._started = time.monotonic()
            self._latencies.clear()
            self._totals = PipelineMetrics(batch_id=batch_id, shards=tuple(shards))

    def record(self, batch: BatchMetrics, shards: Sequence[ShardMetrics]) -> None:
        """Add one processed batch (called by the run loop after the batch's acks and fails)."""
        with self._lock:
            t = self._totals
            self._latencies.append(batch.latency_s)
            running = time.monotonic() - self._started
            records = t.records + batch.records
            latency = batch.latency_s
            buckets = tuple(n + (latency <= bound) for n, bound in zip(t.latency_buckets, LATENCY_BUCKETS_S))
            self._totals = PipelineMetrics(
                batches=t.batches + 1, failed_batches=t.failed_batches + (batch.error is not None),
                records=records, bytes=t.bytes + batch.bytes, acked=t.acked + batch.acked,
                failed=t.failed + batch.failed, running_s=running,
                records_per_s=records / running if running > 0 else 0.0,
                latency_p50_s=percentile(self._latencies, 0.5), latency_p95_s=percentile(self._latencies, 0.95),
                latency_sum_s=t.latency_sum_s + latency, latency_buckets=buckets,
                batch_id=batch.batch_id, last=batch, shards=tuple(shards))

    def update_shards(self, shards: Sequence[ShardMetrics]) -> None:
        """Refresh the per-shard figures without a batch (called while the run waits for records, and at its end)."""
        with self._lock:
            t = self._totals
            running = time.monotonic() - self._started
            self._totals = replace(t, shards=tuple(shards), running_s=running,
                                   records_per_s=t.records / running if running > 0 else 0.0)

    def snapshot(self) -> PipelineMetrics:
        with self._lock:
            return self._totals
