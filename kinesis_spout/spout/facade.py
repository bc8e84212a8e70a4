"""KinesisSpout: the facade that wires shard readers, per-shard lifecycles and the checkpoint store.

Storm's spout contract, in Python: ``open()``, ``next_tuple()``, ``ack(message_id)``, ``fail(message_id)``,
``close()``. Records are emitted round-robin across the owned shards; failed records are emitted again (same
message id) before new records of their shard once their backoff is due; each shard's safe checkpoint is
persisted as it advances. The parts: :mod:`~kinesis_spout.spout.registry` (the shards and the lock),
:mod:`~kinesis_spout.spout.shards` (one shard's lifecycle), :mod:`~kinesis_spout.spout.starting`,
:mod:`~kinesis_spout.spout.emission`, :mod:`~kinesis_spout.spout.acks`, :mod:`~kinesis_spout.spout.dead_letters`,
:mod:`~kinesis_spout.spout.kpl`, :mod:`~kinesis_spout.spout.membership` (leases) and
:mod:`~kinesis_spout.spout.opening` (what ``open()`` builds and starts).
"""

from __future__ import annotations

import logging
import time
import warnings
from types import TracebackType
from typing import Any, Iterable

from kinesis_spout.checkpoint.base import CheckpointStore
from kinesis_spout.checkpoint.writer import CheckpointWriter, ConflictHandler
from kinesis_spout.config import SpoutConfig
from kinesis_spout.coordination.sync import ShardSync
from kinesis_spout.deadletters.base import open_writer
from kinesis_spout.errors import ConfigError, SpoutError, SpoutStateError
from kinesis_spout.kinesis.retrieval.reader import RoundRobinReader
from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns
from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.records import SpoutTuple
from kinesis_spout.spout.acks import AckRouter
from kinesis_spout.spout.batch import SpoutBatch
from kinesis_spout.spout.caught_up import lagging_shards
from kinesis_spout.spout.columns import ColumnBatch, ColumnTaker
from kinesis_spout.spout.dead_letters import DeadLetterGlue
from kinesis_spout.spout.emission import NO_BYTE_LIMIT, Emitter
from kinesis_spout.spout.figures import shard_figures
from kinesis_spout.spout.membership import LeaseMembership
from kinesis_spout.spout.opening import SpoutParts, start, wire
from kinesis_spout.spout.registry import ShardRegistry

log = logging.getLogger(__name__)

_EXPIRE_EVERY_S = 0.05
DEAD_LETTER_CLOSE_S = 10.0  # how long close() keeps trying to write the dead letters still queued


class KinesisSpout:
    """Reads a Kinesis stream with per-record ack/fail and checkpoints.

    ``checkpoint_store`` defaults to ZooKeeper at ``config.zookeeper``; pass a
    :class:`~kinesis_spout.MemoryCheckpointStore` for tests or embedded use. The constructor does no I/O;
    ``open()`` connects, lists the shards and starts one prefetching reader per owned shard; ``close()`` stops
    them, flushes the last safe checkpoints and is idempotent.

    Threads: methods may be called from any thread. The spout's state (the shards' lifecycles and trackers, the
    round-robin cursor, the counters, ``_deferred``) is touched only under one lock, the registry's (``_lock``);
    reader threads touch only their own buffers (under their own lock) and wake the consumer through the
    round-robin reader's condition, which is waited on without holding ``_lock``. Dead letters: see
    :mod:`~kinesis_spout.spout.dead_letters` (handlers run on the dead-letter thread, never under ``_lock``; the
    scheme runs under ``_lock`` on the caller's thread).
    """

    def __init__(self, config: SpoutConfig, checkpoint_store: CheckpointStore | None = None, *,
                 client: Any = None, on_checkpoint_conflict: ConflictHandler | None = None) -> None:
        if not isinstance(config, SpoutConfig):
            raise TypeError(f"config must be a SpoutConfig, got {type(config).__name__}")
        if "," in config.stream_name:
            raise ConfigError(f"KinesisSpout reads one stream; stream_name lists {config.stream_name!r}: read them "
                              f"with kinesis_spout.MultiStreamSpout(config) (a spout per stream, one turn over them)")
        self.config = config
        self._store = checkpoint_store
        self._client = client
        self._rr = RoundRobinReader(config.reading.reader_threads)
        self._registry = ShardRegistry(self._rr)
        self._lock = self._registry.lock
        self._shards = self._registry.shards  # shard id -> ShardLifecycle (the registry's dict, under _lock)
        self._dead = DeadLetterGlue(self._registry, config.stream_name, config.app_name, config.dead_letters,
                                    config.tracking.retry_limit, config.reading.scheme)
        self._emitter = Emitter(self._registry, config.tracking, config.reading.scheme, self._dead)
        self._acks = AckRouter(self._registry, self._dead)
        self._columns = ColumnTaker(self._emitter)
        self._membership = LeaseMembership(
            self._registry, config.stream_name, config.app_name, config.worker.worker_id,
            session_timeout_s=config.zk.session_timeout_s, message_timeout_s=config.tracking.message_timeout_s,
            settle_s=config.worker.lease_settle_s, on_conflict=on_checkpoint_conflict)
        self._writer: CheckpointWriter | None = None
        self._last_expire = 0.0
        self._deferred: BaseException | None = None  # raised by the next next_tuple/next_batch call
        self._sync: ShardSync | None = None
        self._owned_at_open: dict[str, bool] | None = None  # static mode: the shards owned at open(), closed then?
        self._metrics_server: Any = None  # the Prometheus server started for config.metrics_port

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> "KinesisSpout":
        """Connect, list the owned shards, read their checkpoints and start the readers. Idempotent."""
        with self._lock:
            if self._registry.phase == "open":
                return self
            if self._registry.phase == "closed":
                raise SpoutStateError("this spout was closed; create a new KinesisSpout to read again")
            cfg = self.config
            dead_letter_writer = open_writer(cfg.dead_letters.target, cfg)  # no I/O; may refuse the destination
            if cfg.metrics.port is not None and self._metrics_server is None:
                from kinesis_spout.metrics.server import start_metrics_server

                self._metrics_server = start_metrics_server(cfg.metrics.port, self)
            parts = SpoutParts(self._client, self._store)
            try:
                try:
                    wire(parts, cfg, self._registry, self._membership, flush=self.flush_checkpoints,
                         on_sync_error=self._on_sync_error)
                finally:  # what was built stays the spout's, also when wiring failed (see spout.opening)
                    self._client, self._store, self._writer, self._sync = (parts.client, parts.store, parts.writer,
                                                                           parts.sync)
                    self._owned_at_open = parts.owned_at_open
                start(parts, cfg, self._registry, self._membership, self._dead, dead_letter_writer)
            except BaseException:
                self._stop_metrics_server()
                raise
            return self

    def _stop_metrics_server(self) -> None:
        server, self._metrics_server = self._metrics_server, None
        if server is not None:
            server.close()

    def _on_sync_error(self, error: SpoutError) -> None:
        """The shard sync thread met an error the user must hear of: raised by the next call."""
        with self._lock:
            if self._deferred is None:
                self._deferred = error

    def close(self) -> None:
        """Stop the readers, flush the last safe checkpoints, release the store. Idempotent."""
        with self._lock:
            if self._registry.phase == "closed":
                return
            was_open = self._registry.phase == "open"
            self._registry.phase = "closed"
        if self._sync is not None:
            self._sync.close()
        self._rr.close()
        if self._dead.worker is not None:  # before the writer: the letters it writes move checkpoints
            self._dead.worker.close(min(DEAD_LETTER_CLOSE_S, self.config.dead_letters.deadline_s))
        if self._writer is not None:
            self._writer.close()
        if was_open and self._membership.active:
            self._membership.give_back_leases()
        if was_open and self._store is not None:
            self._store.close()
        self._stop_metrics_server()
        log.info("spout %s closed", self.config.app_name)

    def __enter__(self) -> "KinesisSpout":
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        registry = getattr(self, "_registry", None)
        if registry is not None and registry.phase == "open":
            warnings.warn(f"KinesisSpout for {self.config.stream_name!r} was never closed; call close() or use "
                          f"'with KinesisSpout(...)'", ResourceWarning, stacklevel=1)

    # -- emitting ---------------------------------------------------------------------------------------------
    def next_tuple(self) -> SpoutTuple | None:
        """The next tuple to process, or None at once when nothing is ready (it never waits on Kinesis).

        Due retries go first; then new records round-robin across shards that are under their in-flight
        limits. An error of a background reader (e.g. the stream was deleted) is raised here, and so is a
        ``CheckpointError`` while checkpoints could not be stored for ``zookeeper_deadline_s``, and a
        ``DeadLetterError`` while dead letters could not be written for ``dead_letter_deadline_s`` (acks keep
        working, nothing pending is dropped, the checkpoints wait; each error clears once writes succeed again).
        """
        with self._lock:
            now = self._prepare()
            if self._membership.paused():
                return None
            taken = self._emitter.take(now, True, 1, NO_BYTE_LIMIT)
            return taken[0] if taken else None

    def _prepare(self) -> float:
        """Checks and housekeeping before taking records (lock held); returns the time to take them at."""
        self._registry.check_open()
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        if self._writer is not None and self._writer.unreachable is not None:
            raise self._writer.unreachable
        if self._dead.worker is not None and self._dead.worker.unreachable is not None:
            raise self._dead.worker.unreachable
        now = time.monotonic()
        if now - self._last_expire >= _EXPIRE_EVERY_S:
            self._last_expire = now
            self._emitter.maintain(now)
        return now

    def next_batch(self, max_records: int = 500, timeout_s: float = 1.0,
                   max_bytes: int | None = None) -> SpoutBatch:
        """Up to ``max_records`` tuples; waits up to ``timeout_s`` for the first one, then returns what is ready.

        The batch is a list of tuples that can also be acked whole: ``batch.ack()`` (as acking each tuple, at the
        cost of one call per shard), ``batch.fail(ids)``, ``batch.ack_except(failed_ids)``; see
        :class:`~kinesis_spout.spout.batch.SpoutBatch`.

        With ``max_bytes`` the batch stops growing once its records' bytes reach it (so it may pass it by less than
        one record). Tuples taken are never lost to an error: if one arises after some were taken (e.g. a reader's
        error), the batch is returned and the error is raised by the next call. Errors are raised as by
        :meth:`next_tuple`.
        """
        deadline = time.monotonic() + timeout_s
        batch = SpoutBatch(self._acks)
        if max_records < 1:
            return batch
        emitter = self._emitter
        while True:
            with self._lock:  # take what is ready under one lock hold
                now = self._prepare()
                limit = 0 if self._membership.paused() else max_records
                try:
                    emitter.fill(batch, now, limit, NO_BYTE_LIMIT if max_bytes is None else max_bytes)
                except Exception as exc:
                    if not batch:
                        raise
                    log.warning("returning %d tuples taken before an error; the error is raised by the next call: "
                                "%s", len(batch), exc)
                    self._deferred = exc
                    return batch
                if batch:
                    return batch
                due = emitter.next_due(now)
            left = deadline - time.monotonic()
            if left <= 0:
                return batch
            self._rr.wait(min(left, due if due is not None else left))

    def next_columns(self, max_records: int = 500, timeout_s: float = 1.0,
                     max_bytes: int | None = None) -> ColumnBatch:
        """:meth:`next_batch` as columns: up to ``max_records`` records as a
        :class:`~kinesis_spout.spout.columns.ColumnBatch` (``to_arrow()`` gives a ``pyarrow.RecordBatch``), acked
        whole with ``ack()``, or ``fail(rows)`` / ``ack_except(rows)`` by row index. The scheme is not applied (the
        rows hold the records' data) and no tuple is made per record. Waits, limits and errors as :meth:`next_batch`.
        """
        deadline = time.monotonic() + timeout_s
        batch = SpoutBatch(self._acks)
        pieces: list[RecordColumns] = []  # the pieces taken, and each one's attempt
        attempts: list[int] = []
        if max_records < 1:
            return ColumnBatch(batch, pieces, attempts)
        while True:
            with self._lock:
                now = self._prepare()
                limit = 0 if self._membership.paused() else max_records
                try:
                    self._columns.fill(batch, pieces, attempts, now, limit,
                                       NO_BYTE_LIMIT if max_bytes is None else max_bytes)
                except Exception as exc:
                    if not pieces:
                        raise
                    log.warning("returning %d records taken before an error; the error is raised by the next call: "
                                "%s", sum(map(len, pieces)), exc)
                    self._deferred = exc
                    return ColumnBatch(batch, pieces, attempts)
                if pieces:
                    return ColumnBatch(batch, pieces, attempts)
                due = self._emitter.next_due(now)
            left = deadline - time.monotonic()
            if left <= 0:
                return ColumnBatch(batch, pieces, attempts)
            self._rr.wait(min(left, due if due is not None else left))

    # -- ack / fail -------------------------------------------------------------------------------------------
    def ack(self, mid: str | SpoutTuple) -> None:
        """The tuple ``mid`` was fully processed. Unknown or repeated ids are ignored and counted.

        A message id names the record, whatever its attempt: it is acked in flight or waiting for its retry. The
        tuple itself (a :class:`~kinesis_spout.records.SpoutTuple`) names that one emission, as Storm's acks do: it
        is acked only while the record is in flight at the tuple's ``attempt``, so a late ack of an emission that
        failed since (by :meth:`fail` or its message timeout) never acks the record's next attempt, which its own
        ack or fail decides."""
        self._acks.ack(mid)

    def fail(self, mid: str | SpoutTuple) -> None:
        """The tuple ``mid`` failed: it is emitted again after a backoff, or dead-lettered once retries run out. The
        tuple itself fails only that emission (nothing once it is over, as for :meth:`ack`)."""
        self._acks.fail_many((mid,))

    def ack_many(self, mids: Iterable[str | SpoutTuple]) -> None:
        """:meth:`ack` for many ids (or tuples) at once: one lock, and each shard's checkpoint offered once."""
        self._acks.ack_many(mids)

    def fail_many(self, mids: Iterable[str | SpoutTuple]) -> None:
        """:meth:`fail` for many ids (or tuples) at once (one lock)."""
        self._acks.fail_many(mids)

    # -- observability ----------------------------------------------------------------------------------------
    @property
    def unknown_message_ids(self) -> int:
        """Acks and fails ignored so far: malformed ids, or ids of shards this spout does not read (any more)."""
        return self._acks.unknown_message_ids

    @property
    def poison_records(self) -> int:
        """Records whose scheme raised so far (each dead-lettered)."""
        return self._emitter.poison_records

    @property
    def shard_ids(self) -> list[str]:
        """The shards this spout reads now (with leases, those it holds)."""
        with self._lock:
            return list(self._shards)

    def lease_epochs(self) -> dict[str, int]:
        """With ``coordination="leases"``: each shard this worker holds, with its lease's epoch (the version of its
        lease znode, which moves on whenever the shard changes hands). Empty in static mode."""
        leases = self._membership.leases
        return leases.held if leases is not None else {}

    def metrics(self) -> list[ShardMetrics]:
        """A snapshot per owned shard: checkpoint, in-flight, buffered, retry queue, lag and counters."""
        with self._lock:
            now = time.monotonic()
            written = self._writer.written if self._writer is not None else {}
            return [shard_figures(s, now, written) for s in self._shards.values()]

    def lagging_shards(self) -> list[str]:
        """The shards keeping this spout from being caught up: of those it owned at ``open()``, the ones not read up
        to the tip they had then, or with a record read up to there not done yet (acked, or dead-lettered and
        written); a shard closed at ``open()`` until read to its end and finished; a child of a reshard listed then
        until read so far. Empty once caught up (see :mod:`kinesis_spout.spout.caught_up`). Raises ``ConfigError``
        with ``coordination="leases"`` (the shards a worker holds move while it runs). Called by
        ``SpoutPipeline.run(until="caught_up")`` between batches; from any thread."""
        with self._lock:
            self._registry.check_open()
            if self._owned_at_open is None:
                raise ConfigError("caught up is known only to a spout that reads a fixed set of shards: use "
                                  "coordination='static' (a lease worker's shards move between workers while it runs)")
            done = self._registry.done | (self._sync.finished if self._sync is not None else set())
            return lagging_shards(self._owned_at_open, self._shards, done)

    def caught_up(self) -> bool:
        """True once :meth:`lagging_shards` is empty: every record that was in this spout's shards when it opened
        was delivered and is done."""
        return not self.lagging_shards()

    def flush_checkpoints(self, timeout_s: float = 10.0) -> bool:
        """Wait (within ``timeout_s``) for the dead letters queued to be written, then write every pending
        checkpoint now; True when all were written."""
        deadline = time.monotonic() + timeout_s
        letters_done = self._dead.worker.flush(timeout_s) if self._dead.worker else True
        written = self._writer.flush(max(0.0, deadline - time.monotonic())) if self._writer else True
        return letters_done and written

    @property
    def dead_letter_failures(self) -> int:
        """Failed writes of dead letters so far (each is retried with backoff)."""
        return self._dead.worker.failures if self._dead.worker else 0

    @property
    def dead_letter_errors(self) -> BaseException | None:
        """The last error of a dead-letter write, or None."""
        return self._dead.worker.last_error if self._dead.worker else None

    @property
    def checkpoint_errors(self) -> SpoutError | None:
        """The last error of the checkpoint writer (a conflict or a failed write), or None."""
        return self._writer.last_error if self._writer else None

    @property
    def checkpoint_writes(self) -> int:
        """Checkpoints written to the store so far."""
        return self._writer.writes if self._writer else 0

    @property
    def checkpoint_write_failures(self) -> int:
        """Checkpoint writes that failed (and were retried) so far."""
        return self._writer.failures if self._writer else 0

    @property
    def metrics_server(self) -> Any:
        """The Prometheus server started for ``config.metrics_port`` (its ``port`` is the one bound), or None."""
        return self._metrics_server

    @property
    def checkpoint_conflicts(self) -> int:
        """How many checkpoint writes lost to a higher stored checkpoint (another writer on the same shard)."""
        return self._writer.conflicts if self._writer else 0
