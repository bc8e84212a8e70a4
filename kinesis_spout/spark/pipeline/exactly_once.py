"""The exactly-once runner of :class:`~kinesis_spout.spark.SpoutPipeline` (``exactly_once=<backing map factory>``):
the pipeline is a **transactional** Trident spout.

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
- An exception of ``process`` (or a malformed answer) fails the batch, not its records
  (:mod:`~kinesis_spout.spark.pipeline.batch_retry`): the txid is processed again with the same records after a
  jittered backoff (``batch_retry_backoff``), up to ``batch_retry_limit`` more tries within
  ``batch_retry_deadline_s``; then ``run()`` ends with :class:`~kinesis_spout.errors.BatchFailedError`, the records
  are not acked, and the next run replays the txid.
- Per-record fail/retry, folded in: a failed record fails its whole batch, as in Trident, and the batch is
  processed again under the same txid with the same records after ``retry_backoff``, up to ``retry_limit`` times.
  Records are never dead-lettered in this mode (dropping one would change the txid's records, which a
  transactional spout must not): after the last retry ``run()`` ends with a
  :class:`~kinesis_spout.state.StateError`, the records are not acked, and the next run replays the txid. Both
  kinds of failed try count in ``batch.attempt`` (2, 3, ...), each against its own limit. The message timeout
  does not apply (a batch holds its records until it commits).
- One pipeline per app and stream (``coordination="static"``, ``task_count=1``): state updates must follow one
  txid order. Batch ids are not stored in ZooKeeper in this mode; the log holds the txid. The ownership of the
  app and stream, and the replay after a restart, are in :mod:`kinesis_spout.spark.pipeline.batch_log`.
- ``batch.run_id`` is the batch log's identity: made when the log is created, the same for every run that
  resumes that log (restarts, crashes), different for a new batch log. A state can tell by it a txid of this
  log from the same number in another.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from kinesis_spout.records import SpoutTuple
from kinesis_spout.retry import Backoff
from kinesis_spout.spark.bookkeeping.ownership import ownership_for
from kinesis_spout.spark.pipeline.batch import Batch, failed_message_ids
from kinesis_spout.spark.pipeline.batch_log import RunOwnership, collect_replay, split_committed
from kinesis_spout.spark.pipeline.batch_retry import BatchRetry, summary
from kinesis_spout.spark.pipeline.loop import RunLoop
from kinesis_spout.spark.pipeline.settings import PipelineSettings
from kinesis_spout.spark.shared.schema import records_to_arrow
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.spout.batch import SpoutBatch
from kinesis_spout.state.base import BackingMapFactory, StateError
from kinesis_spout.state.txlog import BatchLog, BatchLogEntry, OwnershipLost, next_entry

__all__ = ["ExactlyOnceRunner", "TransactionalBatch"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransactionalBatch(Batch):
    """A batch of the exactly-once mode: ``id`` is its txid (the same on every replay, also after a crash),
    ``kind`` the spout kind the state operations check, ``attempt`` (inherited) how many times this txid was
    processed in this run (1 first, also for a replay after a restart). ``retries`` counts the batch's records
    when ``attempt`` > 1. ``run_id`` is the identity of the batch log the txid belongs to: the same across
    restarts that resume the log, another for a new log."""

    kind: str = "transactional"
    run_id: str | None = None


class ExactlyOnceRunner:
    """One exactly-once run: ownership first, then txids from the batch log (see the module docstring).

    Who calls: ``SpoutPipeline.run``, on its run thread; everything here happens on that thread.
    """

    def __init__(self, settings: PipelineSettings, loop: RunLoop, factory: BackingMapFactory) -> None:
        self.settings = settings
        self.loop = loop
        self.factory = factory
        self.config = settings.config.replace(message_timeout_s=None)  # a batch holds its records until it commits

    def run(self) -> None:
        cfg, loop, settings = self.config, self.loop, self.settings
        store = settings.make_store(cfg)
        owner = ownership_for(store)
        assert owner is not None  # checked by the pipeline's constructor; the ZooKeeper store has one
        holder = (f"pid {os.getpid()} on host {socket.gethostname()}, started "
                  f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC (run {uuid.uuid4().hex[:12]})")
        spout = KinesisSpout(cfg, checkpoint_store=store)
        txlog = BatchLog(self.factory, ("$batch-log", cfg.app_name, cfg.stream_name), owner=holder)
        ownership = RunOwnership(owner, holder, cfg)
        store.open()
        try:
            if not ownership.take(loop):
                return
            try:
                spout.open()
                loop.watch(spout)
                entry = txlog.take_over()
                through = entry.committed_through()
                carry: list[SpoutTuple] = []
                txid = entry.txid + 1
                loop.recorder.reset(txid - 1, spout.metrics())
                log.info("pipeline %s on stream %r, exactly-once (batch log %s, owned by %s): %d shards, txids from "
                         "%d%s", cfg.app_name, cfg.stream_name, txlog.log_id, holder, len(spout.shard_ids), txid,
                         f" after replaying txid {entry.txid}" if not entry.committed else "")
                if not entry.committed:
                    replayed = collect_replay(spout, ownership, loop, entry, settings.max_batch_records)
                    if replayed is None:
                        return
                    tuples, carry = replayed
                    if not self._run_tx_batch(spout, txlog, ownership, entry, tuples, time.monotonic()):
                        return
                    through = replace(entry, committed=True).committed_through()
                    loop.processed += 1
                def collect() -> tuple[list[SpoutTuple] | None, float]:
                    nonlocal carry  # handed to the first batch only; ``through`` is read as the loop moved it
                    tuples, started = self._collect_fresh(spout, ownership, carry, through)
                    carry = []
                    return tuples or None, started

                for tuples, started in loop.batches(collect, settings.trigger_interval_s):
                    spans: dict[str, tuple[Any, int]] = {}
                    for t in tuples:
                        last, count = spans.get(t.record.shard_id, (t.record.key, 0))
                        spans[t.record.shard_id] = (max(last, t.record.key), count + 1)
                    entry = next_entry(txid, through, spans)
                    ownership.ensure(f"the batch log of txid {txid}")
                    txlog.save(entry)  # before process sees the txid: a crash from here on replays it
                    if not self._run_tx_batch(spout, txlog, ownership, entry, tuples, started):
                        break
                    through = replace(entry, committed=True).committed_through()
                    txid += 1
                    loop.processed += 1
                loop.log_stop_reason(cfg.app_name)
            except OwnershipLost as exc:
                raise ownership.lost(exc) from exc
            finally:
                ownership.held = False
                try:
                    loop.close(spout, release=ownership.release)
                finally:
                    txlog.close()
        finally:
            store.close()  # idempotent: the spout closed it already, unless it never opened

    def _collect_fresh(self, spout: KinesisSpout, ownership: RunOwnership, carry: list[SpoutTuple],
                       through: dict[str, Any]) -> tuple[list[SpoutTuple], float]:
        """The next batch's tuples: those carried over from a replay, then what is ready (within the limits)."""
        max_records, max_bytes = self.settings.max_batch_records, self.settings.max_batch_bytes
        while True:
            if carry:
                taken, started = carry, time.monotonic()
                room = max_records - len(taken)
                size = sum(t.record.size for t in taken)
                if room > 0 and size < max_bytes:
                    taken = taken + spout.next_batch(max_records=room, timeout_s=0.0, max_bytes=max_bytes - size)
                carry = []
            else:
                taken, started = self.loop.collect(spout, max_records, max_bytes)
                if not taken:
                    return [], 0.0
            fresh = split_committed(spout, ownership, taken, through)
            if fresh:  # the live batch itself when nothing was committed before: it is acked whole on commit
                return (taken if len(fresh) == len(taken) else fresh), started

    def _run_tx_batch(self, spout: KinesisSpout, txlog: BatchLog, ownership: RunOwnership, entry: BatchLogEntry,
                      tuples: list[SpoutTuple], started: float) -> bool:
        """Process txid ``entry.txid`` until it succeeds, then mark it committed and ack its records.

        Every try processes the same records under the same txid. An exception of ``process`` is tried again
        under ``batch_retry`` (then BatchFailedError); failed records after ``retry_backoff``, up to
        ``retry_limit`` times (then StateError). Nothing is acked unless the txid commits. False if the run ends
        (stop, signal, limits) between two tries: nothing acked, the next run replays the txid.
        """
        records = [t.record for t in tuples]
        ids = [t.message_id for t in tuples]
        in_batch = set(ids)
        record_tries = self.config.tracking.retry_limit + 1
        # the tries with failed records: retry_backoff's delays, retry_limit more tries (the policy's stop rule)
        failing = Backoff(replace(self.config.tracking.retry_backoff.policy(), max_attempts=record_tries))
        raised = BatchRetry(self.settings.batch_retry, self.loop, entry.txid, len(records),
                            "the next run replays them under the same txid", kind="txid")
        attempt = 0
        while True:
            attempt += 1
            batch = TransactionalBatch(
                id=entry.txid, records=len(records), bytes=sum(r.size for r in records),
                retries=len(records) if attempt > 1 else 0, max_attempt=attempt,
                shards=tuple(sorted({r.shard_id for r in records})),
                started_at=datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - started),
                attempt=attempt, run_id=txlog.log_id or None)
            ownership.ensure(f"attempt {attempt} of txid {entry.txid} (process() and its state)", txlog)
            t0 = time.monotonic()
            df = self.settings.spark.createDataFrame(records_to_arrow(self.config.stream_name, records,
                                                                      [attempt] * len(records)))
            t1 = time.monotonic()
            error: BaseException | None = None
            try:
                failed = failed_message_ids(self.settings.process(df, batch)) & in_batch
            except Exception as exc:  # noqa: BLE001 - user code failed: the txid is tried again, as it is
                error, failed = exc, in_batch
            process_s = time.monotonic() - t1
            if not failed:
                ownership.ensure(f"the commit of txid {entry.txid}")
                txlog.save(replace(entry, committed=True))  # before the acks: checkpoints never pass an open txid
                if isinstance(tuples, SpoutBatch):  # a live batch: acked whole (a replay's tuples: by id)
                    tuples.ack()
                else:
                    spout.ack_many(ids)
                self.loop.record(spout, batch, len(records), 0, None, t1 - t0, process_s,
                                 started if attempt == 1 else t0)  # a later try's latency is its own
                return True
            what = summary(error) if error is not None else f"{len(failed)} records failed"
            self.loop.record(spout, batch, 0, 0 if error is not None else len(records), what, t1 - t0, process_s,
                             started if attempt == 1 else t0)
            # a try may fail because the ownership was lost (the state refused the write of a txid that a new owner
            # moved past): then that is the error, not the failure of process()
            ownership.ensure(f"another attempt of txid {entry.txid} (attempt {attempt} failed)", txlog)
            if error is not None:
                if not raised.failed(error):
                    return False
                continue
            failure = failing.failed()
            record_failures, wait_s = failure.attempt, failure.pause_s
            if failure.stop is not None:
                raise StateError(f"txid {entry.txid} failed {record_failures} times with failed records (last: "
                                 f"{what}); its {len(records)} records are not acked and the next run replays them "
                                 f"under the same txid. A record cannot be dead-lettered in exactly-once mode: fix "
                                 f"the cause, or raise retry_limit")
            log.warning("txid %d: %s; processing its %d records again under the same txid in %.2f s (attempt "
                        "%d; failed records %d of %d times)", entry.txid, what, len(records), wait_s, attempt + 1,
                        record_failures, record_tries)
            if not self.loop.wait_until(time.monotonic() + wait_s):
                return False
