"""SpoutPipeline: micro-batches of Kinesis records as Spark DataFrames, with per-record ack and fail.

::

    pipeline = SpoutPipeline(spark, config, process=word_count, trigger_interval_s=1.0,
                             max_batch_records=10_000, max_batch_bytes=8 << 20)
    pipeline.run()   # until stop(), SIGINT/SIGTERM, run(until=...), run(max_batches=...) or run(timeout_s=...)

Each batch is taken from a :class:`~kinesis_spout.KinesisSpout`, turned into a DataFrame through Arrow (columns
of :data:`kinesis_spout.spark.schema.COLUMNS`) and handed to ``process(df, batch)``. Its answer decides each
record's fate: ``None`` acks them all; a list of message ids, or a DataFrame with a ``message_id`` column, fails
those records (rows derived from a record keep its ``message_id``, so failing a derived row fails its root
record: anchoring, Spark style) and acks the rest; an exception fails the whole batch. Failed records go
through the spout's retry queue (``retry_limit``, ``retry_backoff``) and then to its dead-letter handler, and
come back in later batches with ``attempt`` 2, 3, ...

Decisions, in one place:

- **Batch ids** are stored before ``process`` runs; see :class:`~kinesis_spout.spark.batch.Batch` for the
  guarantee that gives a sink (increasing, never reused, not a transactional replay).
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
- **Errors**: an exception of ``process`` (or a malformed answer) fails the batch and the pipeline goes on.
  Errors of the pipeline itself (the stream is gone, Spark cannot build the DataFrame, the checkpoint store
  refuses for good) end ``run()`` with that error; records in flight are then not acked and are read again.
  While ZooKeeper cannot store the next batch id, the batch waits (its records held) and the write is retried,
  for at most ``zookeeper_deadline_s`` (then ``run()`` ends with a ``CheckpointError``) and never past the run's
  own limits.

Exactly-once mode (``exactly_once=<backing map factory>``): the pipeline is a **transactional** Trident spout.

- ``batch.id`` is a txid and ``batch.kind`` is ``"transactional"``: a batch that is replayed, in the same run or
  after a crash, keeps its txid and holds exactly the same records. The pipeline keeps a batch log
  (:mod:`kinesis_spout.state.txlog`) in the given backing map: before ``process`` sees a txid, the log holds every
  shard's committed position and the txid's last record and count per shard; after ``process`` returns, the log
  marks the txid committed, and only then are its records acked. A restart reads the log: records committed
  earlier are acked without being processed, an uncommitted txid is replayed with its records (counted, so a
  replay that cannot be whole is an error, e.g. records trimmed by retention), and the rest comes after it.
- Why transactional and not opaque: Kinesis records are immutable and addressed by sequence number, so the same
  records can always be read again while the stream retains them; the spout never acks a record of an
  uncommitted txid, so its checkpoints never pass one. TransactionalMap and OpaqueMap are both exactly-once.
- Per-record fail/retry, folded in: a failed record (or an exception) fails its whole batch, as in Trident, and
  the batch is processed again under the same txid with the same records (``attempt`` 2, 3, ...; after
  ``retry_backoff``), up to ``retry_limit`` times. Records are never dead-lettered in this mode (dropping one
  would change the txid's records, which a transactional spout must not): after the last retry ``run()`` ends
  with a :class:`~kinesis_spout.state.StateError`, the records are not acked, and the next run replays the txid.
  The message timeout does not apply (a batch holds its records until it commits).
- One pipeline per app and stream (``coordination="static"``, ``task_count=1``): state updates must follow one
  txid order. Batch ids are not stored in ZooKeeper in this mode; the log holds the txid.
- **Ownership**: ``run()`` first takes the ownership of the app and stream, an ephemeral ZooKeeper node
  ``{zookeeper_prefix}/{app}/{stream}/exactly_once_owner`` made through the checkpoint store, naming the
  process (pid, host, start time). While another pipeline owns it, ``run()`` waits up to
  :func:`previous_owner_wait_s` of that owner's ZooKeeper session timeout (the timeout plus half of it, at least
  2 s more: a driver killed by SIGKILL lets go when ZooKeeper expires its session, which it does in steps of its
  tickTime, up to one tick late; a session timeout is at least two ticks), then ends with
  :class:`~kinesis_spout.checkpoint.base.OwnershipTaken` naming the owner. Only then is the batch log read, and
  taken over: the entry is rewritten under this run. The ownership is released when ``run()`` ends (its
  session's end releases it too). Every later write of the batch log is compare-and-set. Before each write of
  the log and each ack the pipeline checks (no I/O) that its session did not end and that it has not been cut off
  from ZooKeeper for longer than the session timeout (by its own clock: while cut off, kazoo cannot learn that
  the session expired); before each ``process`` attempt it also reads the batch log once to check that no other
  pipeline wrote it. A pipeline that lost its ownership (its session expired while it was paused or cut off, and
  another may have taken over) ends ``run()`` with :class:`~kinesis_spout.state.txlog.OwnershipLost` before it
  writes the log or acks, and without calling ``process`` again (its records are replayed by the new owner); an
  attempt that failed because the ownership was lost (e.g. the state refused its out-of-order write) ends so
  too, not with a StateError.
- ``batch.run_id`` is the batch log's identity: made when the log is created, the same for every run that
  resumes that log (restarts, crashes), different for a new batch log. A state can tell by it a txid of this
  log from the same number in another.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from types import FrameType
from typing import Any, Callable

from kinesis_spout.checkpoint.base import CheckpointStore
from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import CheckpointConflict, CheckpointError, ConfigError, SpoutStateError
from kinesis_spout.records import SpoutTuple
from kinesis_spout.spark.batch import Batch, failed_message_ids
from kinesis_spout.spark.batch_store import BatchIds, batch_store_for
from kinesis_spout.spark.metrics import BatchMetrics, MetricsRecorder, PipelineMetrics
from kinesis_spout.spark.ownership import OwnershipStore, OwnershipTaken, ownership_for
from kinesis_spout.spark.schema import records_to_arrow
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.state.base import BackingMapFactory, StateError
from kinesis_spout.state.txlog import BatchLog, BatchLogEntry, OwnershipLost, Place, ReplayCollector, next_entry

__all__ = ["OwnershipLost", "OwnershipTaken", "ProcessFunction", "SpoutPipeline", "TransactionalBatch",
           "previous_owner_wait_s"]

log = logging.getLogger("kinesis_spout.spark")

#: ``process(df, batch)``: returns None, failed message ids, or a DataFrame with a ``message_id`` column.
ProcessFunction = Callable[[Any, Batch], Any]

_POLL_S = 0.2  # longest wait between looks at stop requests and run limits
_STORE_BACKOFF_MAX_S = 5.0
_FLUSH_TIMEOUT_S = 10.0
_REPLAY_TIMEOUT_S = 120.0  # how long a restart may take to read an uncommitted txid's records again
_OWNER_NAME = "exactly_once_owner"  # the ownership node, next to the app's checkpoints of the stream
_OWNER_GRACE_S = 2.0  # the least waited beyond an owner's session timeout (see previous_owner_wait_s)


def previous_owner_wait_s(session_timeout_s: float) -> float:
    """How long ``run()`` of an exactly-once pipeline waits for a previous owner whose ZooKeeper session timeout
    is ``session_timeout_s`` to let go: the timeout plus half of it, at least 2 s more. ZooKeeper expires sessions
    in buckets of its tickTime, so a session may outlive its timeout by up to one tick, and a session timeout is at
    least two ticks (ZooKeeper's minimum), so half of it covers a tick whatever the server's tickTime."""
    return session_timeout_s + max(_OWNER_GRACE_S, session_timeout_s / 2)


@dataclass(frozen=True)
class TransactionalBatch(Batch):
    """A batch of the exactly-once mode: ``id`` is its txid (the same on every replay, also after a crash),
    ``kind`` the spout kind the state operations check, ``attempt`` how many times this txid was processed in
    this run (1 first). ``retries`` counts the batch's records when ``attempt`` > 1. ``run_id`` is the identity of
    the batch log the txid belongs to: the same across restarts that resume the log, another for a new log."""

    kind: str = "transactional"
    attempt: int = 1
    run_id: str | None = None


class SpoutPipeline:
    """Runs ``process(df, batch)`` on micro-batches read by a :class:`~kinesis_spout.KinesisSpout`.

    ``spark`` is a SparkSession; ``config`` the spout's configuration (its ``retry_limit``, ``retry_backoff``
    and ``dead_letter`` decide what happens to failed records). ``checkpoint_store`` defaults to
    ``ZooKeeperCheckpointStore.from_config(config)``; the pipeline hands it to the spout, which opens and closes
    it, and keeps the batch id in it too. The constructor validates and stores; it does no I/O. ``run()`` opens
    a spout, processes batches until told to stop, flushes the checkpoints and closes the spout; it may be
    called again afterwards (one run at a time). Figures are in :attr:`metrics`.

    Batch ids live in one znode per app and stream and each is taken once (compare-and-set): pipelines of one
    app on one stream (``coordination="leases"`` workers, or Storm-style tasks) never use the same id.
    """

    def __init__(self, spark: Any, config: SpoutConfig, process: ProcessFunction, *,
                 trigger_interval_s: float = 1.0, max_batch_records: int = 10_000, max_batch_bytes: int = 8 << 20,
                 checkpoint_store: CheckpointStore | None = None,
                 exactly_once: BackingMapFactory | None = None) -> None:
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
        if exactly_once is not None:
            if not callable(getattr(exactly_once, "make_backing_map", None)):
                raise ConfigError(f"exactly_once must be a backing map factory where the pipeline keeps its batch "
                                  f"log, e.g. RedisBackingMap.factory(url, namespace='wordcount-log'), got "
                                  f"{exactly_once!r}")
            if config.coordination != "static" or config.task_count != 1:
                raise ConfigError("exactly_once needs one pipeline per app and stream (coordination='static', "
                                  "task_count=1): the state updates of all shards follow one txid order")
            if not config.reliable:
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
        self._holding: tuple[OwnershipStore, str] | None = None  # the run thread's ownership (exactly-once runs)

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

    def run(self, *, until: Callable[[], bool] | None = None, max_batches: int | None = None,
            timeout_s: float | None = None) -> PipelineMetrics:
        """Process batches until ``stop()``, a signal, or a limit; then flush checkpoints and close the spout.

        ``until`` is called between batches and while waiting for records (every 0.2 s); the run ends when it
        returns True. ``max_batches`` counts processed batches (empty triggers do not count); ``timeout_s``
        bounds the run's wall-clock time. On the main thread, SIGINT and SIGTERM handlers are installed for the
        run and the previous ones restored afterwards. Returns the final :attr:`metrics`.
        """
        if max_batches is not None and (isinstance(max_batches, bool) or not isinstance(max_batches, int)
                                        or max_batches < 0):
            raise ConfigError(f"max_batches must be a whole number >= 0 or None, got {max_batches!r}")
        if timeout_s is not None and not timeout_s >= 0:
            raise ConfigError(f"timeout_s must be >= 0 or None, got {timeout_s!r}")
        if not self._running.acquire(blocking=False):
            raise SpoutStateError("this SpoutPipeline is already running; call stop() and wait for run() to "
                                  "return before running it again")
        try:
            restore = self._install_signal_handlers()
            try:
                deadline = None if timeout_s is None else time.monotonic() + timeout_s
                self._run(until, max_batches, deadline)
            finally:
                restore()
        finally:
            self._stop.clear()
            self._signalled = 0
            self._running.release()
        return self.metrics

    # -- the loop ---------------------------------------------------------------------------------------------
    def _run(self, until: Callable[[], bool] | None, max_batches: int | None, deadline: float | None) -> None:
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        if self.exactly_once is not None:
            self._run_exactly_once(until, max_batches, deadline)
            return
        cfg = self.config
        store = self._store_given if self._store_given is not None else ZooKeeperCheckpointStore.from_config(cfg)
        spout = KinesisSpout(cfg, checkpoint_store=store)
        processed = 0

        def finished() -> bool:
            if self._stop.is_set() or self._signalled:
                return True
            if max_batches is not None and processed >= max_batches:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return True
            return until is not None and bool(until())

        try:
            spout.open()
            batch_ids = batch_store_for(store)
            last_id = batch_ids.load_batch_id()
            self._recorder.reset(last_id, spout.metrics())
            log.info("pipeline %s on stream %r: %d shards, batches from id %d, trigger %.3g s, at most %d records "
                     "or %d bytes per batch", cfg.app_name, cfg.stream_name, len(spout.shard_ids), last_id + 1,
                     self.trigger_interval_s, self.max_batch_records, self.max_batch_bytes)
            next_start = time.monotonic()
            while not finished():
                if not self._wait_until(next_start, finished):
                    break
                tuples, started = self._collect(spout, finished)
                if not tuples:
                    continue
                next_start = started + self.trigger_interval_s
                batch_id = self._store_batch_id(batch_ids, last_id, finished)
                if batch_id is None:
                    break  # the run ends while the id cannot be stored: these records are read again next run
                self._run_batch(spout, batch_id, tuples, started)
                last_id = batch_id
                processed += 1
            self._log_stop_reason(processed, max_batches, deadline)
        finally:
            self._close(spout)

    def _wait_until(self, when: float, finished: Callable[[], bool]) -> bool:
        """Pace batches: wait until ``when``; False if the run should end first."""
        while True:
            if finished():
                return False
            left = when - time.monotonic()
            if left <= 0:
                return True
            self._stop.wait(min(left, _POLL_S))

    def _store_batch_id(self, store: BatchIds, last_id: int, finished: Callable[[], bool]) -> int | None:
        """Store the id of the batch about to be processed and return it; None if the run ends first.

        Called after the batch's records were taken and before ``process``. The id is one more than the last
        id used; if another writer stored a higher one (``CheckpointConflict``), one more than that. While the store
        fails with a retriable error the records are held (not acked, not failed) and the write is retried with
        backoff up to 5 s, for at most ``zookeeper_deadline_s``: then, or on a non-retriable error, the run ends
        with a ``CheckpointError`` (the held records are read again by the next run). Each try is bounded in time
        by the store, so the run's own limits (``timeout_s``, ``stop()``) end the wait too.
        """
        backoff = 0.0
        failing_since: float | None = None
        deadline_s = self.config.zookeeper_deadline_s
        while True:
            try:
                store.save_batch_id(last_id + 1)
                return last_id + 1
            except CheckpointConflict as exc:
                log.warning("another pipeline stored a higher batch id (%s); taking the next one", exc)
                last_id = max(last_id, store.load_batch_id())
                continue
            except CheckpointError as exc:
                if not exc.retriable:
                    raise
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                if now - failing_since >= deadline_s:
                    raise CheckpointError(
                        f"the next batch id could not be stored for {now - failing_since:.0f} s (zookeeper_deadline_s "
                        f"{deadline_s:g} s): {exc}. The batch's records were not processed; they are read again by "
                        f"the next run. Check that ZooKeeper is running and reachable, or raise zookeeper_deadline_s",
                        retriable=True) from exc
                backoff = min(max(2 * backoff, 0.2), _STORE_BACKOFF_MAX_S)
                log.warning("cannot store the next batch id; the batch waits until it is stored (retrying in "
                            "%.1f s, for at most %.0f s more): %s", backoff, deadline_s - (now - failing_since), exc)
                if not self._wait_until(time.monotonic() + backoff, finished):
                    return None

    def _collect(self, spout: KinesisSpout, finished: Callable[[], bool]) -> tuple[list[SpoutTuple], float]:
        """Wait for a first tuple, then take what is ready within the batch limits.

        Returns the tuples and the monotonic time the first one was taken (the batch's start); no tuples if
        the run should end first.
        """
        while True:
            taken = spout.next_batch(max_records=1, timeout_s=_POLL_S)
            if taken:
                break
            self._recorder.update_shards(spout.metrics())  # keep lag and checkpoints current while idle
            if finished():
                return [], 0.0
        started = time.monotonic()
        size = taken[0].record.size
        if len(taken) < self.max_batch_records and size < self.max_batch_bytes:
            taken += spout.next_batch(max_records=self.max_batch_records - len(taken), timeout_s=0.0,
                                      max_bytes=self.max_batch_bytes - size)
        return taken, started

    def _run_batch(self, spout: KinesisSpout, batch_id: int, tuples: list[SpoutTuple], started: float) -> None:
        """Build the DataFrame, call ``process``, ack or fail every record, record and log the figures."""
        records = [t.record for t in tuples]
        attempts = [t.attempt for t in tuples]
        batch = Batch(id=batch_id, records=len(records), bytes=sum(r.size for r in records),
                      retries=sum(1 for a in attempts if a > 1), max_attempt=max(attempts),
                      shards=tuple(sorted({r.shard_id for r in records})),
                      started_at=datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - started))
        t0 = time.monotonic()
        df = self.spark.createDataFrame(records_to_arrow(self.config.stream_name, records, attempts))
        t1 = time.monotonic()
        error: str | None = None
        try:
            failed = failed_message_ids(self.process(df, batch))
        except Exception as exc:  # noqa: BLE001 - any error of user code fails the batch, which is retried
            error = f"{type(exc).__name__}: {exc}"
            log.error("batch %d: process() raised; its %d records failed and will be retried", batch_id,
                      len(tuples), exc_info=True)
            failed = {t.message_id for t in tuples}
        process_s = time.monotonic() - t1
        to_fail = [t.message_id for t in tuples if t.message_id in failed]
        spout.fail_many(to_fail)
        spout.ack_many(t.message_id for t in tuples if t.message_id not in failed)
        acked = len(tuples) - len(to_fail)
        if error is None and len(failed) > len(tuples) - acked:
            strays = sorted(failed - {t.message_id for t in tuples})
            log.warning("batch %d: process() returned %d failed message ids that are not in the batch (e.g. %s); "
                        "ignored", batch_id, len(strays), ", ".join(strays[:3]))
        shards = spout.metrics()
        figures = BatchMetrics(batch_id=batch_id, records=len(tuples), bytes=batch.bytes, retries=batch.retries,
                               acked=acked, failed=len(tuples) - acked, error=error, started_at=batch.started_at,
                               dataframe_s=t1 - t0, process_s=process_s, latency_s=time.monotonic() - started,
                               lag_ms={s.shard_id: s.millis_behind_latest for s in shards})
        self._recorder.record(figures, shards)
        log.info("%s", figures.describe())

    # -- exactly-once mode ------------------------------------------------------------------------------------
    def _run_exactly_once(self, until: Callable[[], bool] | None, max_batches: int | None,
                          deadline: float | None) -> None:
        """The loop of the exactly-once mode (see the module docstring): ownership first, then txids from the
        batch log."""
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        assert self.exactly_once is not None
        cfg = self.config.replace(message_timeout_s=None)  # a batch holds its records until its txid commits
        store = self._store_given if self._store_given is not None else ZooKeeperCheckpointStore.from_config(cfg)
        owner = ownership_for(store)
        assert owner is not None  # checked by the constructor; the ZooKeeper store has one
        holder = (f"pid {os.getpid()} on host {socket.gethostname()}, started "
                  f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC (run {uuid.uuid4().hex[:12]})")
        spout = KinesisSpout(cfg, checkpoint_store=store)
        txlog = BatchLog(self.exactly_once, ("$batch-log", cfg.app_name, cfg.stream_name), owner=holder)
        processed = 0

        def finished() -> bool:
            if self._stop.is_set() or self._signalled:
                return True
            if max_batches is not None and processed >= max_batches:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return True
            return until is not None and bool(until())

        store.open()
        try:
            if not self._take_ownership(owner, holder, finished):
                return
            self._holding = (owner, holder)
            try:
                spout.open()
                entry = txlog.take_over()
                through = entry.committed_through()
                carry: list[SpoutTuple] = []
                txid = entry.txid + 1
                self._recorder.reset(txid - 1, spout.metrics())
                log.info("pipeline %s on stream %r, exactly-once (batch log %s, owned by %s): %d shards, txids from "
                         "%d%s", cfg.app_name, cfg.stream_name, txlog.log_id, holder, len(spout.shard_ids), txid,
                         f" after replaying txid {entry.txid}" if not entry.committed else "")
                if not entry.committed:
                    replayed = self._collect_replay(spout, entry, finished)
                    if replayed is None:
                        return
                    tuples, carry = replayed
                    if not self._run_tx_batch(spout, txlog, entry, tuples, time.monotonic(), finished):
                        return
                    through = replace(entry, committed=True).committed_through()
                    processed += 1
                next_start = time.monotonic()
                while not finished():
                    if not self._wait_until(next_start, finished):
                        break
                    tuples, started = self._collect_fresh(spout, carry, through, finished)
                    carry = []
                    if not tuples:
                        continue
                    next_start = started + self.trigger_interval_s
                    spans: dict[str, tuple[Any, int]] = {}
                    for t in tuples:
                        last, count = spans.get(t.record.shard_id, (t.record.key, 0))
                        spans[t.record.shard_id] = (max(last, t.record.key), count + 1)
                    entry = next_entry(txid, through, spans)
                    self._ensure_owned(f"the batch log of txid {txid}")
                    txlog.save(entry)  # before process sees the txid: a crash from here on replays it
                    if not self._run_tx_batch(spout, txlog, entry, tuples, started, finished):
                        break
                    through = replace(entry, committed=True).committed_through()
                    txid += 1
                    processed += 1
                self._log_stop_reason(processed, max_batches, deadline)
            except OwnershipLost as exc:
                raise self._lost(exc) from exc
            finally:
                self._holding = None
                try:
                    self._close(spout, release=lambda: owner.release_ownership(_OWNER_NAME, holder))
                finally:
                    txlog.close()
        finally:
            store.close()  # idempotent: the spout closed it already, unless it never opened

    def _take_ownership(self, store: OwnershipStore, holder: str, finished: Callable[[], bool]) -> bool:
        """Make this run the owner of its app and stream (called by the run thread, store open, before the spout
        opens or the batch log is read). While another holder owns them, wait up to ``previous_owner_wait_s`` of
        that holder's session timeout (a holder that died lets go by then), then raise OwnershipTaken naming it.
        False if the run ends
        (stop, signal, limits) while waiting: nothing was read or written."""
        cfg = self.config
        began = time.monotonic()
        patience = 0.0  # the longest any holder seen may keep the ownership after it died
        announced = False
        while True:
            try:
                store.take_ownership(_OWNER_NAME, holder)
                return True
            except OwnershipTaken as exc:
                if exc.vanishes_within_s is not None:
                    patience = max(patience, previous_owner_wait_s(exc.vanishes_within_s))
                waited = time.monotonic() - began
                if waited >= patience:
                    raise OwnershipTaken(
                        f"exactly-once SpoutPipeline of app {cfg.app_name!r} on stream {cfg.stream_name!r} cannot "
                        f"start: its batch log is owned by {exc.holder} (at {exc.where}), which did not let go "
                        f"within {waited:.1f} s. Two pipelines writing one batch log lose or double-count records: "
                        f"stop that pipeline first (in a rolling redeploy, stop the old driver before starting the "
                        f"new one), or give this one another app_name. A pipeline that died lets go by itself when "
                        f"its ZooKeeper session expires (zookeeper_session_timeout_s); run() waits that long plus "
                        f"half of it (at least {_OWNER_GRACE_S:g} s more) before this error", holder=exc.holder,
                        where=exc.where,
                        vanishes_within_s=exc.vanishes_within_s) from exc
                if not announced:
                    announced = True
                    log.warning("pipeline %s: the batch log of stream %r is owned by %s; waiting up to %.1f s for it "
                                "to let go (a driver that died lets go when its ZooKeeper session expires)",
                                cfg.app_name, cfg.stream_name, exc.holder, patience - waited)
            if not self._wait_until(time.monotonic() + _POLL_S, finished):
                return False

    def _ensure_owned(self, what: str, txlog: BatchLog | None = None) -> None:
        """Raise OwnershipLost unless this run still owns its app and stream; ``what`` is about to be written
        (or acked, or processed). Without ``txlog`` no I/O (the store's view: its session, and how long it has
        been cut off); with it, one read of the batch log too (no other pipeline wrote it). Run thread only
        (``_holding`` is the run thread's)."""
        held = self._holding
        if held is not None and not held[0].holds_ownership(_OWNER_NAME, held[1]):
            raise OwnershipLost(f"its ZooKeeper session ended (expired while the driver was paused or cut off, "
                                f"or closed), or it was cut off from ZooKeeper for longer than its session timeout "
                                f"(so the session may have expired, and another pipeline may own the stream); "
                                f"{what} is not done")
        if txlog is not None:
            try:
                txlog.verify()
            except OwnershipLost as exc:
                raise OwnershipLost(f"{exc}; {what} is not done") from exc

    def _lost(self, exc: OwnershipLost) -> OwnershipLost:
        """The error that ends a run that lost its ownership: what happened, and what to do."""
        cfg = self.config
        message = (f"exactly-once SpoutPipeline of app {cfg.app_name!r} on stream {cfg.stream_name!r} lost its "
                   f"ownership of the batch log: {exc}. It stopped before writing the batch log or state and acked "
                   f"none of the records of its open txid: the pipeline that owns the stream now replays them. "
                   f"Start this one again only once that one stopped (it waits for it)")
        log.error("%s", message)
        return OwnershipLost(message)

    def _split_committed(self, spout: KinesisSpout, tuples: list[SpoutTuple],
                         through: dict[str, Any]) -> list[SpoutTuple]:
        """Ack (without processing) the tuples a committed txid already applied; return the others."""
        fresh: list[SpoutTuple] = []
        stale: list[SpoutTuple] = []
        for t in tuples:
            done = through.get(t.record.shard_id)
            (stale if done is not None and t.record.key <= done else fresh).append(t)
        if stale:
            self._ensure_owned(f"the acks of {len(stale)} records committed before")
            spout.ack_many(t.message_id for t in stale)
            log.info("%d records read again after a restart were committed before; acked without processing",
                     len(stale))
        return fresh

    def _collect_fresh(self, spout: KinesisSpout, carry: list[SpoutTuple], through: dict[str, Any],
                       finished: Callable[[], bool]) -> tuple[list[SpoutTuple], float]:
        """The next batch's tuples: those carried over from a replay, then what is ready (within the limits)."""
        while True:
            if carry:
                taken, started = carry, time.monotonic()
                room = self.max_batch_records - len(taken)
                size = sum(t.record.size for t in taken)
                if room > 0 and size < self.max_batch_bytes:
                    taken = taken + spout.next_batch(max_records=room, timeout_s=0.0,
                                                     max_bytes=self.max_batch_bytes - size)
                carry = []
            else:
                taken, started = self._collect(spout, finished)
                if not taken:
                    return [], 0.0
            fresh = self._split_committed(spout, taken, through)
            if fresh:
                return fresh, started

    def _collect_replay(self, spout: KinesisSpout, entry: BatchLogEntry, finished: Callable[[], bool]
                        ) -> tuple[list[SpoutTuple], list[SpoutTuple]] | None:
        """Read the records of the uncommitted txid of ``entry`` again: (its tuples, tuples of later batches).

        None if the run should end first (nothing is acked but records committed before). Raises StateError when
        the replay cannot be whole within 120 s, or holds more records than logged.
        """
        collector = ReplayCollector(entry)
        batch: list[SpoutTuple] = []
        later: list[SpoutTuple] = []
        give_up = time.monotonic() + _REPLAY_TIMEOUT_S
        while any(n > 0 for n in collector.missing().values()):
            if finished():
                return None
            if time.monotonic() >= give_up:
                raise StateError(
                    f"txid {entry.txid} cannot be replayed: after {_REPLAY_TIMEOUT_S:.0f} s these shards still miss "
                    f"records of it: {collector.missing()}. Were they trimmed by the stream's retention, or the "
                    f"stream re-created? Its state updates may be partly applied; the batch log stays as it is",
                    retriable=True)
            committed = []
            for t in spout.next_batch(max_records=self.max_batch_records, timeout_s=_POLL_S):
                place = entry.place(t.record.shard_id, t.record.key)
                if place is Place.COMMITTED:
                    committed.append(t.message_id)
                elif place is Place.BATCH:
                    batch.append(t)
                    collector.add(t.record.shard_id)
                else:
                    later.append(t)
            if committed:
                self._ensure_owned(f"the acks of {len(committed)} records committed before")
                spout.ack_many(committed)
        extra = {s: -n for s, n in collector.missing().items() if n < 0}
        if extra:
            raise StateError(f"txid {entry.txid} replayed with more records than logged ({extra}): the stream does not "
                             f"hold the records the batch log describes (a re-created stream?)")
        log.info("replaying txid %d with its %d records, read again", entry.txid, len(batch))
        return batch, later

    def _run_tx_batch(self, spout: KinesisSpout, txlog: BatchLog, entry: BatchLogEntry, tuples: list[SpoutTuple],
                      started: float, finished: Callable[[], bool]) -> bool:
        """Process txid ``entry.txid`` until it succeeds, then mark it committed and ack its records.

        A failed record or an exception processes the same records again under the same txid, after the
        retry backoff, up to ``retry_limit`` times; then StateError (nothing acked). False if the run ends
        (stop, signal, limits) between two attempts: nothing acked, the next run replays the txid.
        """
        records = [t.record for t in tuples]
        ids = [t.message_id for t in tuples]
        in_batch = set(ids)
        backoff = self.config.retry_backoff
        attempts = self.config.retry_limit + 1
        error: str | None = None
        for attempt in range(1, attempts + 1):
            batch = TransactionalBatch(
                id=entry.txid, records=len(records), bytes=sum(r.size for r in records),
                retries=len(records) if attempt > 1 else 0, max_attempt=attempt,
                shards=tuple(sorted({r.shard_id for r in records})),
                started_at=datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - started),
                attempt=attempt, run_id=txlog.log_id or None)
            self._ensure_owned(f"attempt {attempt} of txid {entry.txid} (process() and its state)", txlog)
            t0 = time.monotonic()
            df = self.spark.createDataFrame(records_to_arrow(self.config.stream_name, records,
                                                             [attempt] * len(records)))
            t1 = time.monotonic()
            try:
                failed = failed_message_ids(self.process(df, batch)) & in_batch
                error = None if not failed else f"{len(failed)} records failed"
            except Exception as exc:  # noqa: BLE001 - any error of user code fails the batch, which is replayed
                error = f"{type(exc).__name__}: {exc}"
                log.error("txid %d attempt %d: process() raised", entry.txid, attempt, exc_info=True)
                failed = in_batch
            process_s = time.monotonic() - t1
            if not failed:
                self._ensure_owned(f"the commit of txid {entry.txid}")
                txlog.save(replace(entry, committed=True))  # before the acks: checkpoints never pass an open txid
                spout.ack_many(ids)
            self._record(spout, batch, 0 if failed else len(records), error, t1 - t0, process_s, started)
            if not failed:
                return True
            # an attempt may fail because the ownership was lost (the state refused the write of a txid that a
            # new owner moved past): then that is the error, not the failure of process()
            self._ensure_owned(f"another attempt of txid {entry.txid} (attempt {attempt} failed)", txlog)
            if attempt == attempts:
                break
            wait_s = min(backoff.max_s, backoff.initial_s * backoff.multiplier ** (attempt - 1))
            log.warning("txid %d: %s; processing its %d records again under the same txid in %.2f s (attempt "
                        "%d of %d)", entry.txid, error, len(records), wait_s, attempt + 1, attempts)
            if not self._wait_until(time.monotonic() + wait_s, finished):
                return False
        raise StateError(f"txid {entry.txid} failed {attempts} times (last: {error}); its {len(records)} records are "
                         f"not acked and the next run replays them under the same txid. A record cannot be "
                         f"dead-lettered in exactly-once mode: fix the cause, or raise retry_limit")

    def _record(self, spout: KinesisSpout, batch: Batch, acked: int, error: str | None, dataframe_s: float,
                process_s: float, started: float) -> None:
        shards = spout.metrics()
        figures = BatchMetrics(batch_id=batch.id, records=batch.records, bytes=batch.bytes, retries=batch.retries,
                               acked=acked, failed=batch.records - acked, error=error, started_at=batch.started_at,
                               dataframe_s=dataframe_s, process_s=process_s, latency_s=time.monotonic() - started,
                               lag_ms={s.shard_id: s.millis_behind_latest for s in shards})
        self._recorder.record(figures, shards)
        log.info("%s", figures.describe())

    def _log_stop_reason(self, processed: int, max_batches: int | None, deadline: float | None) -> None:
        if self._signalled:
            why = f"signal {signal.Signals(self._signalled).name}"
        elif self._stop.is_set():
            why = "stop()"
        elif max_batches is not None and processed >= max_batches:
            why = f"max_batches={max_batches}"
        elif deadline is not None and time.monotonic() >= deadline:
            why = "timeout_s"
        else:
            why = "until()"
        log.info("pipeline %s stopping (%s) after %d batches; flushing checkpoints", self.config.app_name, why,
                 processed)

    def _close(self, spout: KinesisSpout, release: Callable[[], None] | None = None) -> None:
        """Flush the safe checkpoints, take the last shard figures, call ``release`` (the exactly-once ownership:
        after the flush, before the store closes), close the spout (also after an error)."""
        try:
            if spout.shard_ids:
                if not spout.flush_checkpoints(_FLUSH_TIMEOUT_S):
                    log.warning("checkpoints not all written within %.0f s: %s", _FLUSH_TIMEOUT_S,
                                spout.checkpoint_errors)
                self._recorder.update_shards(spout.metrics())
        finally:
            try:
                if release is not None:
                    release()
            finally:
                spout.close()

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
