"""The at-least-once runner of :class:`~kinesis_spout.spark.SpoutPipeline` (the default mode).

Each batch is taken from a :class:`~kinesis_spout.KinesisSpout` as a columnar batch (``next_columns()``), turned
into a DataFrame through Arrow (columns of :data:`kinesis_spout.spark.shared.schema.COLUMNS`, built from the columns the
readers decoded: no record or tuple per record; a ``MultiStreamSpout``'s batches are tuples, see
:mod:`~kinesis_spout.spark.pipeline.views`) and handed to ``process(df, batch)``. Its answer decides each
record's fate: ``None`` acks them all; a list of message ids, or a DataFrame with a ``message_id`` column, fails
those records (rows derived from a record keep its ``message_id``, so failing a derived row fails its root
record: anchoring, Spark style) and acks the rest. Failed records go through the spout's retry queue
(``retry_limit``, ``retry_backoff``) and then to its dead-letter handler, and come back in later batches with
``attempt`` 2, 3, ...

- **An exception of** ``process`` (or a malformed answer) fails the BATCH, not its records
  (:mod:`~kinesis_spout.spark.pipeline.batch_retry`): the batch is tried again with the same tuples under the
  same batch id (``batch.attempt`` 2, 3, ...) after a jittered backoff; past ``batch_retry_limit`` or
  ``batch_retry_deadline_s``, ``run()`` ends with :class:`~kinesis_spout.errors.BatchFailedError`, the batch's
  records neither acked nor failed (the next run reads them again), the acks of earlier batches kept. While a
  batch waits for its next try the spout is not polled: no record is taken and no message timeout fires.
- **Batch ids** are stored before ``process`` runs, once per batch (its tries share it); see
  :class:`~kinesis_spout.spark.pipeline.batch.Batch` for the guarantee that gives a sink.
- **Errors** of the pipeline itself (the stream is gone, Spark cannot build the DataFrame, the checkpoint store
  refuses for good) end ``run()`` with that error; records in flight are then not acked and are read again.
  While ZooKeeper cannot store the next batch id, the batch waits (its records held) and the write is retried,
  for at most ``zookeeper_deadline_s`` (then ``run()`` ends with a ``CheckpointError``) and never past the run's
  own limits.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from kinesis_spout.errors import CheckpointConflict, CheckpointError
from kinesis_spout.retry import Backoff, RetryPolicy
from kinesis_spout.schemes import RawScheme
from kinesis_spout.spark.bookkeeping.batch_store import BatchIds, batch_store_for
from kinesis_spout.spark.pipeline.batch import Batch, failed_message_ids
from kinesis_spout.spark.pipeline.batch_retry import BatchRetry, summary
from kinesis_spout.spark.pipeline.loop import RunLoop
from kinesis_spout.spark.pipeline.settings import PipelineSettings
from kinesis_spout.spark.pipeline.views import BatchView, ColumnView, TupleView
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.spout.multi import MultiStreamSpout

__all__ = ["AtLeastOnceRunner"]

log = logging.getLogger(__name__)

#: The pauses between two tries of storing the next batch id: 0.2 s, doubling, at most 5 s, for at most
#: ``zookeeper_deadline_s`` (given per run).
STORE_RETRY = RetryPolicy(initial_s=0.2, multiplier=2.0, max_s=5.0)


class AtLeastOnceRunner:
    """One at-least-once run: opens a spout, processes batches until the loop is finished, flushes and closes.

    Who calls: ``SpoutPipeline.run``, on its run thread; everything here happens on that thread.
    """

    def __init__(self, settings: PipelineSettings, loop: RunLoop) -> None:
        self.settings = settings
        self.config = settings.config
        self.loop = loop

    def run(self) -> None:
        cfg, loop, settings = self.config, self.loop, self.settings
        store = settings.make_store(cfg)
        several = "," in cfg.stream_name
        # several streams: a spout per stream keeps its own checkpoints; the store of the set keeps the batch ids
        spout: KinesisSpout | MultiStreamSpout = MultiStreamSpout(cfg) if several else KinesisSpout(cfg, store)
        try:
            if several:
                store.open()
            spout.open()
            loop.watch(spout)
            batch_ids = batch_store_for(store)
            last_id = batch_ids.load_batch_id()
            loop.recorder.reset(last_id, spout.metrics())
            log.info("pipeline %s on stream %r: %d shards, batches from id %d, trigger %.3g s, at most %d records "
                     "or %d bytes per batch", cfg.app_name, cfg.stream_name, len(spout.shard_ids), last_id + 1,
                     settings.trigger_interval_s, settings.max_batch_records, settings.max_batch_bytes)
            for view, started in loop.batches(lambda: self._collect(spout), settings.trigger_interval_s):
                batch_id = self._store_batch_id(batch_ids, last_id)
                if batch_id is None:
                    break  # the run ends while the id cannot be stored: these records are read again next run
                last_id = batch_id
                if not self._run_batch(spout, batch_id, view, started):
                    break  # the run ends while the batch waits for its next try: its records are read again
                loop.processed += 1
            loop.log_stop_reason(cfg.app_name)
        finally:
            try:
                loop.close(spout)
            finally:
                if several:
                    store.close()

    def _collect(self, spout: KinesisSpout | MultiStreamSpout) -> tuple[BatchView | None, float]:
        """The next batch and when its first record was taken; None if the run should end first. A spout on one
        stream hands a columnar batch (no record or tuple made per record on the way to the DataFrame); a
        ``MultiStreamSpout`` has none, and hands its tuples, as does a spout with a scheme of its own (a columnar
        batch applies none: a record the scheme refuses must be dead-lettered, not handed to ``process``)."""
        settings, loop = self.settings, self.loop
        if isinstance(spout, KinesisSpout) and type(self.config.reading.scheme) is RawScheme:
            columns, started = loop.collect_columns(spout, settings.max_batch_records, settings.max_batch_bytes)
            return (ColumnView(columns, self.config.stream_name) if columns is not None else None), started
        tuples, started = loop.collect(spout, settings.max_batch_records, settings.max_batch_bytes)
        return (TupleView(spout, tuples, self.config.stream_name) if tuples else None), started

    def _store_batch_id(self, store: BatchIds, last_id: int) -> int | None:
        """Store the id of the batch about to be processed and return it; None if the run ends first.

        Called after the batch's records were taken and before ``process``. The id is one more than the last
        id used; if another writer stored a higher one (``CheckpointConflict``), one more than that. While the store
        fails with a retriable error the records are held (not acked, not failed) and the write is retried with
        backoff up to 5 s, for at most ``zookeeper_deadline_s``: then, or on a non-retriable error, the run ends
        with a ``CheckpointError`` (the held records are read again by the next run). Each try is bounded in time
        by the store, so the run's own limits (``timeout_s``, ``stop()``) end the wait too.
        """
        deadline_s = self.config.zk.deadline_s
        backoff = Backoff(replace(STORE_RETRY, deadline_s=deadline_s))
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
                pause = backoff.next_delay()
                failing_for = backoff.failing_for()
                if backoff.expired:
                    raise CheckpointError(
                        f"the next batch id could not be stored for {failing_for:.0f} s (zookeeper_deadline_s "
                        f"{deadline_s:g} s): {exc}. The batch's records were not processed; they are read again by "
                        f"the next run. Check that ZooKeeper is running and reachable, or raise zookeeper_deadline_s",
                        retriable=True) from exc
                log.warning("cannot store the next batch id; the batch waits until it is stored (retrying in "
                            "%.1f s, for at most %.0f s more): %s", pause, deadline_s - failing_for, exc)
                if not self.loop.wait_until(time.monotonic() + pause):
                    return None

    def _run_batch(self, spout: KinesisSpout | MultiStreamSpout, batch_id: int, view: BatchView,
                   started: float) -> bool:
        """Process one batch until ``process`` returns, then ack or fail each record as it answered; record and log
        the figures of each try. True once done; False if the run ends while the batch waits for another try (its
        records neither acked nor failed). Raises BatchFailedError when its tries run out (nothing acked or
        failed). Every try hands ``process`` a new DataFrame of the same records under ``batch_id``."""
        retry = BatchRetry(self.settings.batch_retry, self.loop, batch_id, view.records,
                           "the next run reads them again")
        while True:
            batch = Batch(id=batch_id, records=view.records, bytes=view.bytes, retries=view.retries,
                          max_attempt=view.max_attempt, shards=view.shards,
                          started_at=datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - started),
                          attempt=retry.attempt)
            t0 = time.monotonic()
            df = self.settings.spark.createDataFrame(view.table())
            t1 = time.monotonic()
            try:
                failed = failed_message_ids(self.settings.process(df, batch))
            except Exception as exc:  # noqa: BLE001 - user code failed: the batch is tried again, no record failed
                self.loop.record(spout, batch, 0, 0, summary(exc), t1 - t0, time.monotonic() - t1,
                                 started if retry.attempt == 1 else t0)
                if not retry.failed(exc):
                    return False
                continue
            break
        process_s = time.monotonic() - t1
        n_failed, strays = view.settle(failed)
        if strays:
            log.warning("batch %d: process() returned %d failed message ids that are not in the batch (e.g. %s); "
                        "ignored", batch_id, len(strays), ", ".join(strays[:3]))
        # a later try's latency is its own: the earlier tries and the backoff before it are not part of it
        self.loop.record(spout, batch, view.records - n_failed, n_failed, None, t1 - t0, process_s,
                         started if batch.attempt == 1 else t0)
        return True
