"""SpoutPipeline: micro-batches of Kinesis records as Spark DataFrames, with per-record ack and fail.

::

    pipeline = SpoutPipeline(spark, config, process=word_count, trigger_interval_s=1.0,
                             max_batch_records=10_000, max_batch_bytes=8 << 20)
    pipeline.run()   # until stop(), SIGINT/SIGTERM, run(until=...), run(max_batches=...) or run(timeout_s=...)

What a batch is and what ``process``'s answer does: :mod:`kinesis_spout.spark.pipeline.at_least_once` (the default)
and :mod:`kinesis_spout.spark.pipeline.exactly_once` (``exactly_once=<backing map factory>``). Decisions both modes
share:

- **Pacing**: a batch starts when a record is ready, but no sooner than ``trigger_interval_s`` after the start
  of the previous batch (0 = back to back). It takes what is ready at that moment, never waiting to fill up.
- **Limits**: a batch holds at most ``max_batch_records`` records, and stops growing once its bytes (data plus
  partition keys) reach ``max_batch_bytes``, so it passes that limit by less than one record. The spout's
  per-shard in-flight limits still apply and may make batches smaller.
- **Empty triggers** call nothing: ``process`` never sees an empty DataFrame and no batch id is used. The spout
  is still polled every 0.2 s, so retries fall due, message timeouts fire, finished shards are marked and the
  checkpoint writer keeps writing.
- **Stop** (``stop()``, the first SIGINT or SIGTERM, ``until``, ``max_batches``, ``timeout_s``): the batch in
  progress finishes (``process`` returns, its records are acked or failed), then the checkpoints are flushed
  and the spout is closed. Records waiting for a retry are not checkpointed: the next run reads them again
  (their attempt count starts over). A second SIGINT/SIGTERM aborts at once: the running batch is neither
  acked nor failed, the Spark jobs are cancelled, and its records are read again by the next run.
- **A process() that raises** fails its batch, not its records: the batch is tried again with the same records
  (``batch.attempt`` 2, 3, ...) after ``batch_retry_backoff`` (jittered), up to ``batch_retry_limit`` more tries
  within ``batch_retry_deadline_s``; then ``run()`` ends with :class:`~kinesis_spout.errors.BatchFailedError` and
  the batch's records, neither acked nor failed, are read again by the next run. A stop ends the wait between two
  tries the same way. See :mod:`kinesis_spout.spark.pipeline.batch_retry`.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any, Callable

from kinesis_spout.checkpoint.base import CheckpointStore
from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import ConfigError, SpoutStateError
from kinesis_spout.spark.bookkeeping.ownership import ownership_for
from kinesis_spout.spark.pipeline.at_least_once import AtLeastOnceRunner
from kinesis_spout.spark.pipeline.batch_retry import batch_retry_policy
from kinesis_spout.spark.pipeline.exactly_once import ExactlyOnceRunner
from kinesis_spout.spark.pipeline.loop import CAUGHT_UP, RunLoop, Until
from kinesis_spout.spark.pipeline.metrics import MetricsRecorder, PipelineMetrics
from kinesis_spout.spark.pipeline.settings import PipelineSettings, ProcessFunction
from kinesis_spout.state.base import BackingMapFactory
from kinesis_spout.tracker import RetryBackoff

__all__ = ["SpoutPipeline"]


class SpoutPipeline:
    """Runs ``process(df, batch)`` on micro-batches read by a :class:`~kinesis_spout.KinesisSpout`, or by a
    :class:`~kinesis_spout.MultiStreamSpout` when ``config.stream_name`` lists several streams (each record's
    ``stream_name`` column says its stream and its ``message_id`` names it too; each stream keeps its checkpoints in
    ZooKeeper, the batch ids are kept under the set of streams; ``exactly_once`` and ``checkpoint_store`` take one
    stream).

    ``spark`` is a SparkSession; ``config`` the spout's configuration (its ``retry_limit``, ``retry_backoff``
    and ``dead_letter`` decide what happens to failed records). ``checkpoint_store`` defaults to
    ``ZooKeeperCheckpointStore.from_config(config)``; the pipeline hands it to the spout, which opens and closes
    it, and keeps the batch id in it too. The constructor validates and stores; it does no I/O. ``run()`` opens
    a spout, processes batches until told to stop, flushes the checkpoints and closes the spout; it may be
    called again afterwards (one run at a time). Figures are in :attr:`metrics`.

    Batch ids live in one znode per app and stream and each is taken once (compare-and-set): pipelines of one
    app on one stream (``coordination="leases"`` workers, or Storm-style tasks) never use the same id.

    When ``process`` raises, the batch (not its records) failed: ``batch_retry_limit`` (4: five tries in all) is how
    many more times the same batch is tried, ``batch_retry_deadline_s`` (300 s, from its first failure; None: no
    deadline) how long, and ``batch_retry_backoff`` the delays between tries (default 1 s, doubling, at most 30 s;
    half of each drawn at random). Then ``run()`` ends with :class:`~kinesis_spout.errors.BatchFailedError`.
    """

    def __init__(self, spark: Any, config: SpoutConfig, process: ProcessFunction, *,
                 trigger_interval_s: float = 1.0, max_batch_records: int = 10_000, max_batch_bytes: int = 8 << 20,
                 checkpoint_store: CheckpointStore | None = None,
                 exactly_once: BackingMapFactory | None = None, batch_retry_limit: int = 4,
                 batch_retry_deadline_s: float | None = 300.0,
                 batch_retry_backoff: RetryBackoff | None = None) -> None:
        if not isinstance(config, SpoutConfig):
            raise TypeError(f"config must be a SpoutConfig, got {type(config).__name__}")
        if not callable(process):
            raise ConfigError(f"process must be a callable process(df, batch), got {process!r}")
        if isinstance(trigger_interval_s, bool) or not isinstance(trigger_interval_s, (int, float)) \
                or not 0 <= trigger_interval_s <= 86_400:
            raise ConfigError(f"trigger_interval_s must be a number of seconds from 0 to 86400, "
                              f"got {trigger_interval_s!r}")
        for name, value in (("max_batch_records", max_batch_records), ("max_batch_bytes", max_batch_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a whole number >= 1, got {value!r}")
        self.batch_retry = batch_retry_policy(batch_retry_limit, batch_retry_deadline_s, batch_retry_backoff)
        if "," in config.stream_name:  # several streams: a MultiStreamSpout, checkpoints in ZooKeeper per stream
            if exactly_once is not None:
                raise ConfigError(f"exactly_once reads one stream; stream_name lists {config.stream_name!r}: run one "
                                  f"exactly-once SpoutPipeline per stream")
            if checkpoint_store is not None:
                raise ConfigError(f"checkpoint_store holds one stream's checkpoints; stream_name lists "
                                  f"{config.stream_name!r}: leave checkpoint_store out (each stream's checkpoints are "
                                  f"kept in ZooKeeper under its own path)")
        if exactly_once is not None:
            if not callable(getattr(exactly_once, "make_backing_map", None)):
                raise ConfigError(f"exactly_once must be a backing map factory where the pipeline keeps its batch "
                                  f"log, e.g. RedisBackingMap.factory(url, namespace='wordcount-log'), got "
                                  f"{exactly_once!r}")
            if config.worker.coordination == "leases" or config.worker.task_count != 1:
                raise ConfigError("exactly_once needs one pipeline per app and stream (coordination 'auto' or "
                                  "'static', task_count=1): the state updates of all shards follow one txid order")
            if config.worker.coordination == "auto":
                config = config.replace(coordination="static")  # one pipeline, held by its ownership node
            if not config.tracking.reliable:
                raise ConfigError("exactly_once needs reliable=True: records must stay unacked until their txid "
                                  "committed, so that a crash can replay it")
            if checkpoint_store is not None and ownership_for(checkpoint_store) is None:
                raise ConfigError(f"exactly_once needs a checkpoint store that can own the app and stream for one "
                                  f"pipeline (take_ownership, holds_ownership, release_ownership), so that two "
                                  f"pipelines never write one batch log; {type(checkpoint_store).__name__} has none. "
                                  f"Use the default ZooKeeperCheckpointStore or MemoryCheckpointStore")
        self.exactly_once = exactly_once
        self.spark = spark
        self.config = config
        self.process = process
        self.trigger_interval_s = float(trigger_interval_s)
        self.max_batch_records = max_batch_records
        self.max_batch_bytes = max_batch_bytes
        self._store_given = checkpoint_store
        self._recorder = MetricsRecorder()
        self._stop = threading.Event()
        self._signalled = 0  # set by the signal handler: a plain int, no lock taken inside a handler
        self._running = threading.Lock()

    # -- control ----------------------------------------------------------------------------------------------
    @property
    def metrics(self) -> PipelineMetrics:
        """A frozen snapshot of the figures of the current (or last) run. Safe from any thread."""
        return self._recorder.snapshot()

    @property
    def running(self) -> bool:
        return self._running.locked()

    def stop(self) -> None:
        """Ask ``run()`` to return after the batch in progress (checkpoints flushed). Safe from any thread.

        A stop asked for while no run is going makes the next ``run()`` return at once.
        """
        self._stop.set()

    def run(self, *, until: Until = None, max_batches: int | None = None,
            timeout_s: float | None = None) -> PipelineMetrics:
        """Process batches until ``stop()``, a signal, or a limit; then flush checkpoints and close the spout.

        ``until`` is called between batches and while waiting for records (every 0.2 s); the run ends when it
        returns True. ``until="caught_up"`` ends the run once every shard was read up to the tip it had when the
        run started (an empty read at the tip, or the first record that arrived over 2 s after the start; a shard
        closed then: to its end) and every record read up to there was acked or dead-lettered: a batch job, or a
        test, that processes what the stream holds and stops, as Spark's ``Trigger.AvailableNow``. It reads the
        pipeline's static share of the shards (``coordination="auto"`` runs static for it; ``"leases"`` is refused:
        a worker's shards move while it runs). See :mod:`kinesis_spout.spout.caught_up`.

        ``max_batches`` counts processed batches (empty triggers do not count); ``timeout_s``
        bounds the run's wall-clock time. On the main thread, SIGINT and SIGTERM handlers are installed for the
        run and the previous ones restored afterwards. Returns the final :attr:`metrics`. Raises
        :class:`~kinesis_spout.errors.BatchFailedError` when a batch's ``process`` raised on every try (see
        ``batch_retry_limit``), and the pipeline's own errors (see the runners' modules).
        """
        if max_batches is not None and (isinstance(max_batches, bool) or not isinstance(max_batches, int)
                                        or max_batches < 0):
            raise ConfigError(f"max_batches must be a whole number >= 0 or None, got {max_batches!r}")
        if timeout_s is not None and not timeout_s >= 0:
            raise ConfigError(f"timeout_s must be >= 0 or None, got {timeout_s!r}")
        config = self._config_for(until)
        if not self._running.acquire(blocking=False):
            raise SpoutStateError("this SpoutPipeline is already running; call stop() and wait for run() to "
                                  "return before running it again")
        try:
            restore = self._install_signal_handlers()
            try:
                deadline = None if timeout_s is None else time.monotonic() + timeout_s
                loop = RunLoop(self._recorder, self._stop, lambda: self._signalled, until, max_batches, deadline)
                settings = PipelineSettings(self.spark, config, self.process, self.trigger_interval_s,
                                            self.max_batch_records, self.max_batch_bytes, self._store_given,
                                            self.batch_retry)
                if self.exactly_once is not None:
                    ExactlyOnceRunner(settings, loop, self.exactly_once).run()
                else:
                    AtLeastOnceRunner(settings, loop).run()
            finally:
                restore()
        finally:
            self._stop.clear()
            self._signalled = 0
            self._running.release()
        return self.metrics

    def _config_for(self, until: Until) -> SpoutConfig:
        """The spout configuration of a run with this ``until`` (checked): ``"caught_up"`` reads a static share."""
        if until is None or (callable(until) and not isinstance(until, str)):
            return self.config
        if until != CAUGHT_UP:
            raise ConfigError(f"until must be a callable that returns True when the run should end, or "
                              f"{CAUGHT_UP!r} (end once every shard is read to the tip it had at the start), "
                              f"got {until!r}")
        if self.config.worker.coordination == "leases":
            raise ConfigError("until='caught_up' needs a pipeline that reads a fixed set of shards: with "
                              "coordination='leases' the shards a worker holds move while it runs, so no worker "
                              "knows when the app has caught up. Use coordination='auto' or 'static' for this run")
        return self.config.replace(coordination="static") if self.config.worker.coordination == "auto" else self.config

    # -- signals ----------------------------------------------------------------------------------------------
    def _install_signal_handlers(self) -> Callable[[], None]:
        """On the main thread: SIGINT/SIGTERM stop the run gracefully, a second one aborts it. Returns a restorer."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def handler(signum: int, frame: FrameType | None) -> None:
            if self._signalled:
                self._cancel_spark_jobs()
                raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: pipeline aborted; the records of "
                                        f"the batch in progress will be read again")
            self._signalled = signum

        for sig in previous:
            signal.signal(sig, handler)

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old if old is not None else signal.SIG_DFL)

        return restore

    def _cancel_spark_jobs(self) -> None:
        try:
            self.spark.sparkContext.cancelAllJobs()
        except Exception:  # noqa: BLE001 - best effort while aborting (e.g. Spark Connect has no SparkContext)
            pass
