"""KinesisSpout: the facade that wires shard readers, per-shard trackers and the checkpoint store.

Storm's spout contract, in Python: ``open()``, ``next_tuple()``, ``ack(message_id)``, ``fail(message_id)``,
``close()``. Records are emitted round-robin across the owned shards; failed records are emitted again (same
message id) before new records of their shard once their backoff is due; each shard's safe checkpoint is
persisted as it advances.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
from kinesis_spout.checkpoint.writer import CheckpointWriter, ConflictHandler
from kinesis_spout.config import SpoutConfig
from kinesis_spout.coordination.lineage import ShardStart, end_checkpoint
from kinesis_spout.coordination.starts import resolve_starts
from kinesis_spout.coordination.sync import ShardSync
from kinesis_spout.deadletters.base import DeadLetter, open_writer
from kinesis_spout.deadletters.worker import DeadLetterWorker
from kinesis_spout.errors import (
    CheckpointConflict,
    ConfigError,
    KinesisError,
    LeaseLost,
    SpoutError,
    SpoutStateError,
)
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.getter import ShardGetter
from kinesis_spout.kinesis.reader import BufferedShardReader, RoundRobinReader
from kinesis_spout.kinesis.shards import Shard, drop_range, owned_shards
from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.positions import LATEST, Position
from kinesis_spout.records import Record, SequenceKey, SpoutTuple, message_id, parse_message_id_rank
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker

if TYPE_CHECKING:
    from kinesis_spout.coordination.leases import ZooKeeperLeases
    from kinesis_spout.coordination.rebalance import HandBack

log = logging.getLogger("kinesis_spout")


def _stored_sub(state: ShardState, key: SequenceKey) -> int | None:
    """The sub-sequence number a checkpoint at ``key`` stores (lock held): the user record's inside a KPL aggregate
    that is not done yet (even 0: the restart re-reads the aggregate and skips up to it), None when the Kinesis
    record is done as a whole (a plain record, or an aggregate's last user record). Forgets the aggregates behind
    the checkpoint."""
    aggregates = state.aggregates
    while aggregates:
        first = next(iter(aggregates))
        if first >= key.sequence:
            break
        del aggregates[first]
    size = aggregates.get(key.sequence)
    if size is None:  # not read since the start: a stored checkpoint inside an aggregate keeps its sub-sequence
        restored = state.restored
        return restored.sub_sequence_number if restored is not None and restored.key == key else None
    if key.sub_sequence >= size - 1:
        return None
    return key.sub_sequence


def _shard_end(state: ShardState) -> Checkpoint:
    """The checkpoint of a finished shard: every record done, its children may be read (from its pin, when the
    shard started at one and had nothing after it)."""
    return end_checkpoint(state.shard.shard_id, state.start, state.tracker.checkpoint)


_EXPIRE_EVERY_S = 0.05
LEASE_ROUND_S = 1.0  # how often a worker with leases looks at the workers and leases (and at once when one joins)
HANDOFF_TIMEOUT_S = 10.0  # how long a lease given back waits for the shard's in-flight records
HANDOFF_FLUSH_S = 10.0  # how long a hand-over waits for the shard's checkpoint to be written (else: a later round)
DEAD_LETTER_CLOSE_S = 10.0  # how long close() keeps trying to write the dead letters still queued
_POISON: Any = object()  # what _values returns for a record its scheme refused
TAKE_CHUNK = 100  # next_batch takes up to this many records of a shard at a time (then the next shard's turn)
_NO_BYTE_LIMIT = 1 << 62


@dataclass
class ShardState:
    """Everything the spout keeps for one owned shard."""

    shard: Shard
    tracker: InflightRecordTracker
    reader: BufferedShardReader
    start: ShardStart
    offered: SequenceKey | None = None
    finished: bool = False
    aggregates: dict[int, int] = field(default_factory=dict)  # sequence -> user records, for aggregates in flight
    emitted_bytes: int = 0  # bytes (data + partition key) of the new records emitted
    stored: Checkpoint | None = None  # the stored checkpoint last seen by metrics()
    stored_at: float = field(default_factory=time.monotonic)  # when metrics() first saw it
    restored: Checkpoint | None = None  # the stored checkpoint the shard started from
    latest: Callable[[], Checkpoint | None] = lambda: None  # what the checkpoint writer calls when the shard is due


class KinesisSpout:
    """Reads a Kinesis stream with per-record ack/fail and checkpoints.

    ``checkpoint_store`` defaults to ZooKeeper at ``config.zookeeper``; pass a
    :class:`~kinesis_spout.MemoryCheckpointStore` for tests or embedded use. The constructor does no I/O;
    ``open()`` connects, lists the shards and starts one prefetching reader per owned shard; ``close()`` stops
    them, flushes the last safe checkpoints and is idempotent.

    Threads: methods may be called from any thread. The spout's state (the per-shard trackers, the round-robin
    cursor, the counters) is touched only under one lock, ``_lock``; reader threads touch only their own buffers
    (under their own lock) and wake the consumer through the round-robin reader's condition, which is waited on
    without holding ``_lock``.

    Dead letters: a record whose retries ran out, or whose scheme raised, is queued for the dead-letter thread (a
    :class:`~kinesis_spout.deadletters.DeadLetterWorker`) and stays pending in its tracker, holding the checkpoint
    back. That thread calls the dead-letter handler or destination *without* ``_lock`` (user code never runs
    under the spout's lock there), then takes ``_lock`` to mark the written records done and offer the moved
    checkpoints. The scheme, by contrast, is still called under ``_lock`` on the caller's thread.
    """

    def __init__(self, config: SpoutConfig, checkpoint_store: CheckpointStore | None = None, *,
                 client: Any = None, on_checkpoint_conflict: ConflictHandler | None = None) -> None:
        if not isinstance(config, SpoutConfig):
            raise TypeError(f"config must be a SpoutConfig, got {type(config).__name__}")
        self.config = config
        self._store = checkpoint_store
        self._client = client
        self._on_conflict = on_checkpoint_conflict
        self._shards: dict[str, ShardState] = {}
        self._rr = RoundRobinReader(config.reader_threads)
        self._writer: CheckpointWriter | None = None
        self._lock = threading.RLock()
        self._state = "new"
        self._last_expire = 0.0
        self._retry_cursor = 0
        self._deferred: BaseException | None = None  # raised by the next next_tuple/next_batch call
        self._done: set[str] = set()  # shards found finished (shard_end stored) when they were looked at
        self._sync: ShardSync | None = None
        self._leases: ZooKeeperLeases | None = None
        self._settled = threading.Condition(self._lock)  # notified when records are acked or failed
        self._disconnected_since: float | None = None  # leases: when ZooKeeper's connection was last lost
        self._dead_letters: DeadLetterWorker | None = None
        self._metrics_server: Any = None  # the Prometheus server started for config.metrics_port
        self.unknown_message_ids = 0
        self.poison_records = 0

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> "KinesisSpout":
        """Connect, list the owned shards, read their checkpoints and start the readers. Idempotent."""
        with self._lock:
            if self._state == "open":
                return self
            if self._state == "closed":
                raise SpoutStateError("this spout was closed; create a new KinesisSpout to read again")
            cfg = self.config
            dead_letter_writer = open_writer(cfg.dead_letter, cfg)  # no I/O; may refuse the destination
            if cfg.metrics_port is not None and self._metrics_server is None:
                from kinesis_spout.metrics.server import start_metrics_server

                self._metrics_server = start_metrics_server(cfg.metrics_port, self)
            try:
                self._open(cfg, dead_letter_writer)
            except BaseException:
                self._stop_metrics_server()
                raise
            return self

    def _open(self, cfg: SpoutConfig, dead_letter_writer: Any) -> None:
        """``open()`` under the lock, once the dead-letter writer and the metrics server are ready."""
        if self._client is None:
            self._client = make_client(cfg.region, cfg.endpoint_url, credentials=cfg.credentials)
        if self._store is None:
            from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

            self._store = ZooKeeperCheckpointStore.from_config(cfg)
        self._store.open()
        try:
            self._writer = CheckpointWriter(self._store, cfg.checkpoint_interval_s, cfg.worker_id,
                                            deadline_s=cfg.zookeeper_deadline_s,
                                            on_conflict=self._on_writer_conflict)
            owns = self._owns
            if cfg.coordination == "leases":
                owns = self._join_leases()
            else:
                self._refuse_beside_lease_workers()
            self._sync = ShardSync(self._client, cfg.stream_name, self._store,
                                   interval_s=cfg.shard_sync_interval_s, owns=owns, known=self._known,
                                   add=self._add_shards, flush=self.flush_checkpoints,
                                   on_error=self._on_sync_error,
                                   round_s=LEASE_ROUND_S if self._leases is not None else None,
                                   forget=self._leases.delete if self._leases is not None else None,
                                   initial_position=cfg.initial_position, initial_timestamp=cfg.initial_timestamp,
                                   owner=cfg.worker_id)
            ready = self._sync.sync()
            self._add_shards(ready, self._sync.take_fresh_pins())
        except BaseException:
            self._store.close()
            raise
        self._writer.start()
        self._dead_letters = DeadLetterWorker(dead_letter_writer, self._on_dead_letters_written,
                                              deadline_s=cfg.dead_letter_deadline_s)
        self._dead_letters.start()
        for state in self._shards.values():
            state.reader.start()
        self._state = "open"
        self._sync.start()
        if self._leases is not None:
            self._leases.watch_workers(self._sync.wake)
        mine = self._owns(self._sync.listed)
        waiting = sorted({s.shard_id for s in mine} - self._known() - self._sync.finished)
        log.info("spout %s opened stream %r: task %d/%d owns %d of %d shards (%s)%s", cfg.app_name,
                 cfg.stream_name, cfg.task_index, cfg.task_count, len(mine), len(self._sync.listed),
                 ", ".join(f"{s.shard.shard_id} {s.start.describe()}" for s in self._shards.values())
                 or "none", f"; waiting for their parents: {', '.join(waiting)}" if waiting else "")

    def _stop_metrics_server(self) -> None:
        server, self._metrics_server = self._metrics_server, None
        if server is not None:
            server.close()

    def _join_leases(self) -> Any:
        """Leases mode (in ``open()``): register this worker in ZooKeeper and return the lease round that decides
        which shards it reads."""
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
        from kinesis_spout.coordination.leases import ZooKeeperLeases
        from kinesis_spout.coordination.rebalance import LeaseBalancer

        if not isinstance(self._store, ZooKeeperCheckpointStore):
            raise ConfigError("coordination 'leases' needs the ZooKeeper checkpoint store (the workers meet there); "
                              f"got {type(self._store).__name__}: use coordination='static' with it")
        self._leases = ZooKeeperLeases(self._store, self.config.worker_id)
        self._leases.join()
        self._store.add_listener(self._on_zookeeper_state)
        return LeaseBalancer(self._leases, hand_back=self._hand_back, drop_all=self._drop_all, drop=self._drop).owns

    def _refuse_beside_lease_workers(self) -> None:
        """Static mode (in ``open()``): refuse to read an app's stream while workers share it through leases: both
        would read the same shards, and the static spout's unfenced checkpoints would fight theirs."""
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
        from kinesis_spout.coordination.leases import ZooKeeperLeases

        if not isinstance(self._store, ZooKeeperCheckpointStore):
            return
        live = ZooKeeperLeases(self._store, self.config.worker_id).workers()
        if live:
            raise ConfigError(f"app {self.config.app_name!r} reads stream {self.config.stream_name!r} with leases "
                              f"(live workers: {', '.join(live)}), but this spout has coordination='static': both "
                              f"would read the same shards. Use coordination='leases', or another app_name")

    def _on_zookeeper_state(self, state: str) -> None:
        """Leases: note when the connection went away (kazoo's thread; no lock taken, one assignment)."""
        self._disconnected_since = None if state == "CONNECTED" else (self._disconnected_since or time.monotonic())

    def _lease_pause(self) -> bool:
        """Leases (lock held): True while ZooKeeper is unreachable, so no record is emitted from a shard whose lease
        may have moved on. Once it has been unreachable for the session timeout, the session is surely gone and
        other workers may own the shards: they are dropped (nothing more is emitted or written for them)."""
        since = self._disconnected_since
        if self._leases is None or since is None:
            return False
        if time.monotonic() - since >= self.config.zookeeper_session_timeout_s and self._shards:
            log.warning("ZooKeeper unreachable for %.0f s (the session timeout): dropping this worker's %d shards",
                        time.monotonic() - since, len(self._shards))
            self._drop_all()
        return True

    def _hand_back(self, shard_id: str) -> HandBack:
        """Leases (shard sync thread): stop taking the shard's records, wait up to ``HANDOFF_TIMEOUT_S`` for its
        records in flight (dead letters pending included), forget it and write its checkpoint. Says ``stored`` when
        the checkpoint is stored: only then does the caller release the lease, and the next owner resumes after that
        checkpoint without replays (records still in flight after the wait are replayed). ``kept`` when it could not
        be written: the lease is kept and a later round calls again; the shard is no longer read, so that call only
        waits (a round's time) for the shard's pending checkpoint. ``lost`` when the shard was dropped during the
        wait (its lease was lost: the writer met ``LeaseLost``): there is nothing to give back.

        Only the wait for the records in flight holds ``_lock`` (and releases it while waiting); the checkpoint is
        waited for without it, since the writer's thread takes it to make the shard's checkpoint."""
        lost = False
        with self._lock:
            state = self._shards.get(shard_id)
            if state is not None:
                lost = not self._settle_for_hand_back(state)
                if not lost:
                    del self._shards[shard_id]
                    if state.tracker.checkpoint != state.offered:  # else the writer has it (a failure is retried)
                        self._offer_checkpoint(state)
        if state is not None and lost:  # _drop took it out of the round-robin; its reader is ours to close
            state.reader.close()
            log.warning("hand-over of %s ended: its lease was lost while it waited for its records in flight (the "
                        "next owner reads them again)", shard_id)
            return "lost"
        assert self._writer is not None
        stored = self._writer.flush_shard(shard_id, HANDOFF_FLUSH_S if state is not None else LEASE_ROUND_S)
        if state is not None:
            state.reader.close()
        return "stored" if stored else "kept"

    def _settle_for_hand_back(self, state: ShardState) -> bool:
        """Detach a shard being handed over and wait (``_lock`` held, released while waiting) for its records in
        flight, within the hand-over's bound. False when the shard was dropped meanwhile (its lease was lost)."""
        shard_id = state.shard.shard_id
        self._detach(state)
        wait_s = min(HANDOFF_TIMEOUT_S, self.config.message_timeout_s or HANDOFF_TIMEOUT_S)
        log.info("handing %s over to another worker: waiting up to %.0f s for its %d records in flight, then "
                 "writing its checkpoint and giving its lease back", shard_id, wait_s, state.tracker.inflight_count)
        deadline = time.monotonic() + wait_s
        while self._shards.get(shard_id) is state and state.tracker.inflight_count and self._state == "open":
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("handing %s over with %d records still in flight: the next owner reads them again",
                            shard_id, state.tracker.inflight_count)
                break
            self._settled.wait(min(left, 0.5))
        return self._shards.get(shard_id) is state

    def _give_back_leases(self) -> None:
        """At ``close()``, after the last checkpoints were written: release the leases and leave, so the next owners
        start at once. Without ZooKeeper this is skipped: the leases go with the session."""
        assert self._leases is not None
        try:
            for shard_id in self._leases.held:
                if not getattr(self._store, "connected", True):
                    log.warning("closing without ZooKeeper: the leases of %s go when the session times out",
                                ", ".join(self._leases.held))
                    return
                self._leases.release(shard_id)
            self._leases.leave()
        except SpoutError as exc:
            log.warning("could not give the leases back on close (they go when the session times out): %s", exc)

    def _detach(self, state: ShardState) -> None:
        """Take no more records from a shard (lock held): its reader leaves the round-robin and stops fetching."""
        if state.reader in self._rr.readers:
            self._rr.remove(state.reader)
        state.reader._stop.set()

    def _drop_all(self) -> None:
        """Leases: stop reading every shard at once, writing nothing more for them (their leases are lost)."""
        with self._lock:
            for shard_id in list(self._shards):
                self._drop(shard_id, "this worker may have lost its ZooKeeper session")

    def _drop(self, shard_id: str, why: str = "its lease was lost to another worker") -> None:
        """Leases: stop reading one shard whose lease was lost, writing nothing more for it."""
        with self._lock:
            state = self._shards.pop(shard_id, None)
            if state is not None:
                self._detach(state)
            if self._leases is not None:
                self._leases.forget(shard_id)
                self._settled.notify_all()  # a hand-over waiting for this shard's records ends
        if state is not None:
            log.warning("shard %s dropped: %s", shard_id, why)

    def _on_writer_conflict(self, conflict: CheckpointConflict) -> None:
        """The checkpoint writer's conflicts (its thread): a lost lease drops its shard, unless the refusal was met
        at an earlier epoch and the worker holds the lease again now (ZooKeeper is asked); all go to the user's
        handler too."""
        if isinstance(conflict, LeaseLost):
            if self._leases is not None and self._leases.still_held(conflict.shard_id):
                log.warning("a checkpoint write of %s was refused at an earlier epoch of its lease; this worker holds "
                            "the lease again (epoch %s) and keeps reading the shard", conflict.shard_id,
                            self._leases.held.get(conflict.shard_id))
            else:
                self._drop(conflict.shard_id)
        if self._on_conflict is not None:
            self._on_conflict(conflict)

    def _owns(self, listed: list[Shard]) -> list[Shard]:
        """The shards of the listing this spout reads (Storm-style static split by ``task_index``/``task_count``)."""
        return owned_shards(listed, self.config.task_index, self.config.task_count)

    def _known(self) -> set[str]:
        """Shard ids being read or finished (so the shard sync does not start them again)."""
        with self._lock:
            return set(self._shards) | self._done

    def _on_sync_error(self, error: SpoutError) -> None:
        """The shard sync thread met an error the user must hear of: raised by the next call."""
        with self._lock:
            if self._deferred is None:
                self._deferred = error

    def _add_shards(self, shards: list[Shard], fresh_pins: Mapping[str, datetime] | None = None) -> None:
        """Start reading ``shards``: their starts are resolved (store I/O, no lock held), then their states are
        installed under the lock and their readers started (unless the spout is still opening: ``open()`` starts
        them). Called by ``open()`` (with the pins the app's first start wrote just now, ``fresh_pins``) and by
        the shard sync thread."""
        states = []
        assert self._store is not None
        for shard, start, checkpoint, first in resolve_starts(self._store, self.config, shards, fresh_pins):
            if first is None:
                log.info("shard %s was finished earlier (shard_end); not reading it again", shard.shard_id)
                with self._lock:
                    self._done.add(shard.shard_id)
                continue
            states.append(self._shard_state(shard, start, checkpoint, first))
        with self._lock:
            if self._state == "closed":
                for state in states:
                    state.reader.close()
                return
            for state in states:
                self._shards[state.shard.shard_id] = state
                self._rr.add([state.reader])
                if self._state == "open":
                    state.reader.start()

    def _shard_state(self, shard: Shard, start: ShardStart, checkpoint: Checkpoint | None,
                     first: Position) -> ShardState:
        """A new shard's tracker, getter and reader (the reader not started yet)."""
        cfg = self.config
        initial = checkpoint.key if checkpoint is not None else None
        tracker = InflightRecordTracker(
            shard.shard_id, retry_limit=cfg.retry_limit, backoff=cfg.retry_backoff,
            message_timeout_s=cfg.message_timeout_s, checkpoint=initial)
        getter = ShardGetter(self._client, cfg.stream_name, shard.shard_id, first, cfg.max_records_per_call,
                             deaggregate=cfg.deaggregate,
                             hash_range=drop_range(cfg.stream_name, shard.shard_id, shard,
                                                   cfg.drop_foreign_user_records))
        if first == LATEST:  # LATEST is the tip when open() runs, not when the reader thread gets to it
            try:
                getter.prepare()
            except KinesisError as exc:
                if not exc.retriable:
                    raise
                log.warning("%s; the reader of %s takes its LATEST iterator when it can", exc, shard.shard_id)
        reader = BufferedShardReader(getter, max_records=cfg.prefetch_records, max_bytes=cfg.prefetch_bytes,
                                     empty_backoff_s=cfg.empty_record_backoff_s, on_data=self._rr.notify,
                                     pool=self._rr.pool, max_empty_backoff_s=cfg.max_empty_record_backoff_s)
        state = ShardState(shard, tracker, reader, start, offered=initial, restored=checkpoint)
        state.latest = partial(self._latest_checkpoint, state)
        return state

    def close(self) -> None:
        """Stop the readers, flush the last safe checkpoints, release the store. Idempotent."""
        with self._lock:
            if self._state == "closed":
                return
            was_open = self._state == "open"
            self._state = "closed"
        if self._sync is not None:
            self._sync.close()
        self._rr.close()
        if self._dead_letters is not None:  # before the writer: the letters it writes move checkpoints
            self._dead_letters.close(min(DEAD_LETTER_CLOSE_S, self.config.dead_letter_deadline_s))
        if self._writer is not None:
            self._writer.close()
        if was_open and self._leases is not None:
            self._give_back_leases()
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
        if getattr(self, "_state", "closed") == "open":
            warnings.warn(f"KinesisSpout for {self.config.stream_name!r} was never closed; call close() or use "
                          f"'with KinesisSpout(...)'", ResourceWarning, stacklevel=1)

    # -- emitting ---------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._state != "open":
            raise SpoutStateError(f"spout is {self._state}: call open() (or use 'with KinesisSpout(...)') first"
                                  if self._state == "new" else "spout is closed")

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
            if self._paused():
                return None
            taken = self._take(now, True, 1, _NO_BYTE_LIMIT)
            return taken[0] if taken else None

    def _prepare(self) -> float:
        """Checks and housekeeping before taking records (lock held); returns the time to take them at."""
        self._check_open()
        if self._deferred is not None:
            error, self._deferred = self._deferred, None
            raise error
        if self._writer is not None and self._writer.unreachable is not None:
            raise self._writer.unreachable
        if self._dead_letters is not None and self._dead_letters.unreachable is not None:
            raise self._dead_letters.unreachable
        now = time.monotonic()
        if now - self._last_expire >= _EXPIRE_EVERY_S:
            self._maintain(now)
        return now

    def _paused(self) -> bool:
        return self._leases is not None and self._lease_pause()

    def _take(self, now: float, retries: bool, want: int, max_bytes: int) -> list[SpoutTuple]:
        """A due retry (unless ``retries`` is False: none is queued), or else up to ``want`` new records of one
        shard whose bytes stay under ``max_bytes`` (at least one record); lock held. Empty when nothing is ready."""
        if retries:
            retry = self._next_retry(now)
            if retry is not None:
                return [retry]
        cfg = self.config
        shards = self._shards

        def room(shard_id: str) -> tuple[int, int]:  # what the shard may take under its in-flight limits
            tracker = shards[shard_id].tracker
            return (cfg.max_inflight_records - tracker.inflight_count,
                    min(cfg.max_inflight_bytes - tracker.inflight_bytes, max_bytes))

        while True:
            records = self._rr.next_records(room, want)
            if not records:
                return []
            emitted = self._emit(records, now)
            if emitted:
                return emitted

    def next_batch(self, max_records: int = 500, timeout_s: float = 1.0,
                   max_bytes: int | None = None) -> list[SpoutTuple]:
        """Up to ``max_records`` tuples; waits up to ``timeout_s`` for the first one, then returns what is ready.

        With ``max_bytes`` the batch stops growing once its records' bytes reach it (so it may pass it by less than
        one record). Tuples taken are never lost to an error: if one arises after some were taken (e.g. a reader's
        error), the batch is returned and the error is raised by the next call. Errors are raised as by
        :meth:`next_tuple`.
        """
        deadline = time.monotonic() + timeout_s
        batch: list[SpoutTuple] = []
        if max_records < 1:
            return batch
        while True:
            with self._lock:  # take what is ready under one lock hold
                now = self._prepare()
                retries = any(s.tracker.retry_queue_len for s in self._shards.values())
                size = 0
                limit = 0 if self._paused() else max_records
                byte_limit = _NO_BYTE_LIMIT if max_bytes is None else max_bytes
                try:
                    while len(batch) < limit and size < byte_limit:
                        taken = self._take(now, retries, min(limit - len(batch), TAKE_CHUNK), byte_limit - size)
                        if not taken:
                            break
                        batch.extend(taken)
                        size += sum(len(t.record.data) + len(t.record.partition_key) for t in taken)
                except Exception as exc:
                    if not batch:
                        raise
                    log.warning("returning %d tuples taken before an error; the error is raised by the next call: "
                                "%s", len(batch), exc)
                    self._deferred = exc
                    return batch
                if batch:
                    return batch
                due = self._next_due(now)
            left = deadline - time.monotonic()
            if left <= 0:
                return batch
            self._rr.wait(min(left, due if due is not None else left))

    def _next_due(self, now: float) -> float | None:
        """Seconds until the next retry or message timeout of any shard (lock held: the trackers are not
        thread-safe)."""
        dues = [d for s in self._shards.values() if (d := s.tracker.next_due(now)) is not None]
        return min(dues, default=None)

    def _next_retry(self, now: float) -> SpoutTuple | None:
        states = list(self._shards.values())
        n = len(states)
        for i in range(n):
            state = states[(self._retry_cursor + i) % n]
            while state.tracker.retry_queue_len and state.tracker.has_due_retry(now):
                got = state.tracker.next_retry(now)
                if got is None:
                    break
                key, record, attempt = got
                values = self._values(state, record)
                if values is _POISON:
                    continue  # the scheme refused it this time: dead-lettered
                self._retry_cursor = (self._retry_cursor + i + 1) % n
                return SpoutTuple(message_id(state.shard.shard_id, key), record, values, attempt)
        return None

    def _values(self, state: ShardState, record: Record) -> Any:
        """The scheme's values for a record in flight, or ``_POISON`` when the scheme raised: the record is then a
        poison record, handed to the dead-letter handler with the exception, and done (whatever the exception's
        type: a record that cannot be decoded must neither stop the shard nor vanish). Lock held."""
        try:
            return self.config.scheme(record)
        except Exception as exc:  # noqa: BLE001 - any scheme error makes the record a poison record
            self.poison_records += 1
            reason = f"poison record: {exc}" if isinstance(exc, ValueError) else \
                f"poison record: the scheme raised {type(exc).__name__}: {exc}"
            self._dead_letter(state, record, reason)
            return _POISON

    def _emit(self, records: list[Record], now: float) -> list[SpoutTuple]:
        """Put records of one shard (in read order) in flight and make their tuples (lock held). Replays of
        records already emitted are dropped, and so are records the scheme refused (dead-lettered)."""
        state = self._shards[records[0].shard_id]
        tracker = state.tracker
        for record in records:
            if record.aggregated:  # how many user records its Kinesis record holds: the checkpoint needs it
                state.aggregates.setdefault(record.key.sequence, record.aggregated)
        sizes = [len(r.data) + len(r.partition_key) for r in records]
        try:
            skip = tracker.emit_many([r.rank for r in records], now, records, sizes)
        except ValueError:  # not in increasing order (never seen from one reader): one at a time, as emit decides
            kept = [(r, n) for r, n in zip(records, sizes) if tracker.emit(r.rank, now, r, n)]
        else:
            kept = list(zip(records[skip:], sizes[skip:]))
        out: list[SpoutTuple] = []
        reliable = self.config.reliable
        new = tuple.__new__  # a SpoutTuple with every field given, without its named-tuple __new__
        for record, size in kept:
            state.emitted_bytes += size
            values = self._values(state, record)
            if values is _POISON:
                continue
            if not reliable:
                tracker.ack(record.rank)
            out.append(new(SpoutTuple, (record.message_id, record, values, 1)))
        if not reliable and kept:
            self._offer_checkpoint(state)
        return out

    def _deliver_dead_letters(self, state: ShardState, how: str) -> None:
        """Queue the records whose retries ran out for the dead-letter thread (lock held). They stay pending in the
        tracker until their dead letters are written (:meth:`_on_dead_letters_written`)."""
        limit = self.config.retry_limit + 1
        self._queue_dead_letters(state, lambda attempts: f"{how} on attempt {attempts} of {limit}")

    def _dead_letter(self, state: ShardState, record: Record, reason: str) -> None:
        """Give up on a record in flight at once (its scheme refused it; lock held): queue its dead letter."""
        if state.tracker.give_up(record.key):
            self._queue_dead_letters(state, lambda attempts: reason)

    def _queue_dead_letters(self, state: ShardState, reason: Callable[[int], str]) -> None:
        cfg = self.config
        now = time.time()
        letters = [DeadLetter(record, reason(attempts), attempts, cfg.stream_name, cfg.app_name, now)
                   for _key, record, attempts in state.tracker.take_dead_letters()]
        assert self._dead_letters is not None
        self._dead_letters.put(letters)

    def _on_dead_letters_written(self, letters: Sequence[DeadLetter]) -> None:
        """The dead-letter thread wrote these letters: their records are done; offer the moved checkpoints. Letters
        of shards no longer read (lease lost, handed over) change nothing: the next owner reads them again."""
        with self._lock:
            moved: dict[str, ShardState] = {}
            for letter in letters:
                state = self._shards.get(letter.record.shard_id)
                if state is not None and state.tracker.dead_letter_written(letter.record.key):
                    moved[state.shard.shard_id] = state
            for state in moved.values():
                self._offer_checkpoint(state)
            if self._leases is not None:  # a hand-back may be waiting for these
                self._settled.notify_all()

    # -- ack / fail -------------------------------------------------------------------------------------------
    def _lookup(self, mid: str) -> tuple[ShardState, int] | None:
        """The shard state and key (as a rank) of a message id; None (counted) for ids this spout does not own."""
        self._check_open()
        try:
            shard_id, key = parse_message_id_rank(mid)
        except ValueError:
            self.unknown_message_ids += 1
            log.debug("ignoring malformed message id %r", mid)
            return None
        state = self._shards.get(shard_id)
        if state is None:
            self.unknown_message_ids += 1
            return None
        return state, key

    def ack(self, mid: str) -> None:
        """The tuple ``mid`` was fully processed. Unknown or repeated ids are ignored and counted."""
        with self._lock:  # ack_many for one id, without its grouping: the usual way to ack, once per record
            found = self._lookup(mid)
            if found is not None and found[0].tracker.ack(found[1]):
                self._offer_checkpoint(found[0])
            if self._leases is not None:  # a hand-back may be waiting for this
                self._settled.notify_all()

    def fail(self, mid: str) -> None:
        """The tuple ``mid`` failed: it is emitted again after a backoff, or dead-lettered once retries run out."""
        self.fail_many((mid,))

    def ack_many(self, mids: Iterable[str]) -> None:
        """:meth:`ack` for many ids at once: one lock, and each shard's checkpoint offered once."""
        with self._lock:
            by_shard: dict[str, tuple[ShardState, list[int]]] = {}
            for mid in mids:
                found = self._lookup(mid)
                if found is not None:
                    state, rank = found
                    entry = by_shard.get(state.shard.shard_id)
                    if entry is None:
                        by_shard[state.shard.shard_id] = (state, [rank])
                    else:
                        entry[1].append(rank)
            for state, ranks in by_shard.values():
                if state.tracker.ack_many(ranks):
                    self._offer_checkpoint(state)
            if self._leases is not None:  # a hand-back may be waiting for these
                self._settled.notify_all()

    def fail_many(self, mids: Iterable[str]) -> None:
        """:meth:`fail` for many ids at once (one lock)."""
        with self._lock:
            now = time.monotonic()
            for mid in mids:
                found = self._lookup(mid)
                if found is not None and found[0].tracker.fail(found[1], now) is FailOutcome.DEAD_LETTER:
                    self._deliver_dead_letters(found[0], "failed")
            if self._leases is not None:
                self._settled.notify_all()

    # -- housekeeping -----------------------------------------------------------------------------------------
    def _maintain(self, now: float) -> None:
        self._last_expire = now
        for state in list(self._shards.values()):
            tracker = state.tracker
            if self.config.message_timeout_s is not None and tracker.inflight_count:
                expired = tracker.expire(now)
                if expired:
                    log.warning("%d records of %s timed out after %.1f s and were failed", len(expired),
                                state.shard.shard_id, self.config.message_timeout_s)
                    self._deliver_dead_letters(state, "timed out")
            if not state.finished and state.reader.ended and state.reader.exhausted and not tracker.inflight_count:
                self._finish_shard(state)

    def _finish_shard(self, state: ShardState) -> None:
        state.finished = True
        assert self._writer is not None
        self._writer.offer(_shard_end(state))
        self._rr.remove(state.reader)
        log.info("shard %s finished: every record is done", state.shard.shard_id)
        if self._sync is not None:
            self._sync.wake()  # its children may be read now

    def _offer_checkpoint(self, state: ShardState) -> None:
        """The shard's checkpoint may have moved (lock held): the writer asks for it when the shard is due. A
        finished shard's end was offered by :meth:`_finish_shard` and stays the value to write."""
        if state.finished:
            return
        assert self._writer is not None
        self._writer.offer_latest(state.shard.shard_id, state.latest)

    def _latest_checkpoint(self, state: ShardState) -> Checkpoint | None:
        """The shard's checkpoint to write now, None when it has not moved since the last one (the writer's thread;
        takes the lock). A finished shard's is its shard end."""
        with self._lock:
            if state.finished:
                return _shard_end(state)
            key = state.tracker.checkpoint
            if key is None or key == state.offered:
                return None
            state.offered = key
            return Checkpoint(state.shard.shard_id, str(key.sequence), _stored_sub(state, key))

    # -- observability ----------------------------------------------------------------------------------------
    @property
    def shard_ids(self) -> list[str]:
        """The shards this spout reads now (with leases, those it holds)."""
        with self._lock:
            return list(self._shards)

    def lease_epochs(self) -> dict[str, int]:
        """With ``coordination="leases"``: each shard this worker holds, with its lease's epoch (the version of its
        lease znode, which moves on whenever the shard changes hands). Empty in static mode."""
        return self._leases.held if self._leases is not None else {}

    def metrics(self) -> list[ShardMetrics]:
        """A snapshot per owned shard: checkpoint, in-flight, buffered, retry queue, lag and counters."""
        with self._lock:
            out = []
            now = time.monotonic()
            written = self._writer.written if self._writer is not None else {}
            for shard_id, s in self._shards.items():
                st = s.tracker.stats
                key = s.tracker.checkpoint
                sub = _stored_sub(s, key) if key is not None else None
                text = None if key is None else str(key.sequence) if sub is None else f"{key.sequence}:{sub}"
                stored = written.get(shard_id)
                if stored is not None and stored != s.stored:
                    s.stored, s.stored_at = stored, now
                reader, getter = s.reader, s.reader.getter
                out.append(ShardMetrics(
                    shard_id, text, s.tracker.inflight_count, reader.buffered, s.tracker.retry_queue_len,
                    reader.millis_behind_latest, st.emitted, st.acked, st.failed, st.dead_lettered, s.finished,
                    reader.ended, getter.corrupt_aggregates, s.tracker.dead_letters_pending,
                    inflight_bytes=s.tracker.inflight_bytes, emitted_bytes=s.emitted_bytes, retried=st.retried,
                    timed_out=st.timed_out, records_read=reader.records_read, getrecords_calls=reader.calls,
                    getrecords_retried_errors=reader.retried_errors, expired_iterators=getter.expired_iterators,
                    foreign_user_records=getter.foreign_user_records,
                    checkpoint_age_s=now - s.stored_at))
            return out

    def flush_checkpoints(self, timeout_s: float = 10.0) -> bool:
        """Wait (within ``timeout_s``) for the dead letters queued to be written, then write every pending
        checkpoint now; True when all were written."""
        deadline = time.monotonic() + timeout_s
        letters_done = self._dead_letters.flush(timeout_s) if self._dead_letters else True
        written = self._writer.flush(max(0.0, deadline - time.monotonic())) if self._writer else True
        return letters_done and written

    @property
    def dead_letter_failures(self) -> int:
        """Failed writes of dead letters so far (each is retried with backoff)."""
        return self._dead_letters.failures if self._dead_letters else 0

    @property
    def dead_letter_errors(self) -> BaseException | None:
        """The last error of a dead-letter write, or None."""
        return self._dead_letters.last_error if self._dead_letters else None

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
