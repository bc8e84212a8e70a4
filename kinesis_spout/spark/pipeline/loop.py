"""What both runners of a pipeline share: when a run is finished, pacing, taking a batch from the spout, the
figures of a batch, and closing the spout.

One :class:`RunLoop` per ``run()``, owned by the run thread. Other threads only ask it to stop, through the
pipeline's stop event and signal number, which it reads.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable, Iterator, TypeVar

from kinesis_spout.records import SpoutTuple
from kinesis_spout.spark.pipeline.batch import Batch
from kinesis_spout.spark.pipeline.metrics import BatchMetrics, MetricsRecorder
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.spout.columns import ColumnBatch
from kinesis_spout.spout.multi import MultiStreamSpout

__all__ = ["CAUGHT_UP", "POLL_S", "RunLoop", "Until"]

log = logging.getLogger(__name__)

#: ``run(until="caught_up")``: the run ends once every shard is read up to the tip it had when the run started and
#: every record read up to there is done (see :mod:`kinesis_spout.spout.caught_up`).
CAUGHT_UP = "caught_up"
#: What ``run(until=...)`` takes: a callable (the run ends when it returns True), or :data:`CAUGHT_UP`.
Until = Callable[[], bool] | str | None

B = TypeVar("B")  # a runner's batch (a view, or tuples)

#: The longest wait between looks at stop requests and run limits.
POLL_S = 0.2
FLUSH_TIMEOUT_S = 10.0


class RunLoop:
    """One run of a pipeline: its limits (``until``, ``max_batches``, a monotonic ``deadline``), the batches it
    processed, and the helpers both runners call between batches.

    Who calls: the runner, on the run thread only (``processed`` is the run thread's). ``stop`` is set and
    ``signalled()`` changes from other threads (``stop()``, a signal handler); both are only read here.
    """

    def __init__(self, recorder: MetricsRecorder, stop: threading.Event, signalled: Callable[[], int],
                 until: Until, max_batches: int | None, deadline: float | None) -> None:
        self.recorder = recorder
        self.processed = 0
        self._stop = stop
        self._signalled = signalled
        self._caught_up = until == CAUGHT_UP
        self._until: Callable[[], bool] | None = None if isinstance(until, str) else until
        self._max_batches = max_batches
        self._deadline = deadline

    def finished(self) -> bool:
        """Whether the run should end now: ``stop()``, a signal, ``max_batches`` processed, the deadline passed,
        or ``until()`` says so."""
        if self._stop.is_set() or self._signalled():
            return True
        if self._max_batches is not None and self.processed >= self._max_batches:
            return True
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return True
        return self._until is not None and bool(self._until())

    def watch(self, spout: KinesisSpout | MultiStreamSpout) -> None:
        """The run's spout is open: with ``until="caught_up"``, the run ends once ``spout.caught_up()``. Who calls:
        the runner, right after ``spout.open()`` (the tips are those of the shards at that moment)."""
        if self._caught_up:
            self._until = spout.caught_up
            lagging = spout.lagging_shards()
            log.info("the run ends once caught up: %d shards to read up to their tips%s", len(lagging),
                     f" ({', '.join(lagging)})" if 0 < len(lagging) <= 8 else "")

    def wait_until(self, when: float) -> bool:
        """Pace batches: wait until the monotonic time ``when``; False if the run should end first."""
        while True:
            if self.finished():
                return False
            left = when - time.monotonic()
            if left <= 0:
                return True
            self._stop.wait(min(left, POLL_S))

    def batches(self, collect: Callable[[], tuple[B | None, float]], interval_s: float) -> Iterator[tuple[B, float]]:
        """The run's batches at the trigger's pace, until it should end: ``collect()`` answers a batch (None:
        nothing came, or the run should end) and when its first record was taken; a batch is yielded with that time,
        and the next is collected ``interval_s`` after it (at once when the batch took longer). Both runners' loop."""
        next_start = time.monotonic()
        while not self.finished() and self.wait_until(next_start):
            batch, started = collect()
            if batch is None:
                continue
            next_start = started + interval_s
            yield batch, started

    def collect(self, spout: KinesisSpout | MultiStreamSpout, max_records: int,
                max_bytes: int) -> tuple[list[SpoutTuple], float]:
        """Wait for a first tuple, then take what is ready within the batch limits.

        Returns the tuples and the monotonic time the first one was taken (the batch's start); no tuples if
        the run should end first.
        """
        while True:
            taken = spout.next_batch(max_records=1, timeout_s=POLL_S)
            if taken:
                break
            self.recorder.update_shards(spout.metrics())  # keep lag and checkpoints current while idle
            if self.finished():
                return [], 0.0
        started = time.monotonic()
        size = taken[0].record.size
        if len(taken) < max_records and size < max_bytes:
            taken += spout.next_batch(max_records=max_records - len(taken), timeout_s=0.0,
                                      max_bytes=max_bytes - size)
        return taken, started

    def collect_columns(self, spout: KinesisSpout, max_records: int,
                        max_bytes: int) -> tuple[ColumnBatch | None, float]:
        """:meth:`collect` as a columnar batch (``spout.next_columns()``): waits for a first record, then takes what
        is ready within the batch limits. Returns the batch and the monotonic time it was taken; None if the run
        should end first."""
        while True:
            taken = spout.next_columns(max_records=max_records, timeout_s=POLL_S, max_bytes=max_bytes)
            if taken:
                return taken, time.monotonic()
            self.recorder.update_shards(spout.metrics())  # keep lag and checkpoints current while idle
            if self.finished():
                return None, 0.0

    def record(self, spout: KinesisSpout | MultiStreamSpout, batch: Batch, acked: int, failed: int, error: str | None,
               dataframe_s: float, process_s: float, started: float) -> None:
        """Record and log the figures of one try of a batch: ``acked`` and ``failed`` of its records (both 0 for a
        try whose ``process`` raised, ``error``: its records are held, neither acked nor failed). ``started`` is
        when the try began (the monotonic time): the batch's first record taken for the first try, the try's own
        start for a later one, so the latency logged is that try's."""
        shards = spout.metrics()
        figures = BatchMetrics(batch_id=batch.id, records=batch.records, bytes=batch.bytes, retries=batch.retries,
                               acked=acked, failed=failed, error=error, started_at=batch.started_at,
                               dataframe_s=dataframe_s, process_s=process_s, latency_s=time.monotonic() - started,
                               lag_ms={s.key: s.millis_behind_latest for s in shards})
        self.recorder.record(figures, shards)
        log.info("%s", figures.describe())
        log.debug("%s", figures.describe_lags())

    def log_stop_reason(self, app_name: str) -> None:
        """Log why the run ends (called once the loop left)."""
        signalled = self._signalled()
        if signalled:
            why = f"signal {signal.Signals(signalled).name}"
        elif self._stop.is_set():
            why = "stop()"
        elif self._max_batches is not None and self.processed >= self._max_batches:
            why = f"max_batches={self._max_batches}"
        elif self._deadline is not None and time.monotonic() >= self._deadline:
            why = "timeout_s"
        elif self._caught_up:
            why = "caught up: every shard read to its tip at the start, every record done"
        else:
            why = "until()"
        log.info("pipeline %s stopping (%s) after %d batches; flushing checkpoints", app_name, why, self.processed)

    def close(self, spout: KinesisSpout | MultiStreamSpout, release: Callable[[], None] | None = None) -> None:
        """Flush the safe checkpoints, take the last shard figures, call ``release`` (the exactly-once ownership:
        after the flush, before the store closes), close the spout (also after an error)."""
        try:
            if spout.shard_ids:
                if not spout.flush_checkpoints(FLUSH_TIMEOUT_S):
                    log.warning("checkpoints not all written within %.0f s: %s", FLUSH_TIMEOUT_S,
                                spout.checkpoint_errors)
                self.recorder.update_shards(spout.metrics())
        finally:
            try:
                if release is not None:
                    release()
            finally:
                spout.close()
