"""The exactly-once runner's dealings with its batch log: owning it, and reading an open txid's records again.

- **Ownership** (:class:`RunOwnership`, over :func:`kinesis_spout.spark.bookkeeping.ownership.ownership_for`):
  ``run()`` first takes the ownership of the app and stream, an ephemeral ZooKeeper node
  ``{zookeeper_prefix}/{app}/{stream}/exactly_once_owner`` made through the checkpoint store, naming the process
  (pid, host, start time). While another pipeline owns it, ``run()`` waits up to :func:`previous_owner_wait_s` of
  that owner's ZooKeeper session timeout, then ends with
  :class:`~kinesis_spout.spark.bookkeeping.ownership.OwnershipTaken` naming the owner. Before each write of the log
  and each ack the runner checks (no I/O) that its session did not end and that it has not been cut off from
  ZooKeeper for longer than the session timeout; before each ``process`` attempt it also reads the batch log once to
  check that no other pipeline wrote it. A run that lost its ownership ends with
  :class:`~kinesis_spout.state.txlog.OwnershipLost` (see :meth:`RunOwnership.lost`).
- **Replay** (:func:`collect_replay`): after a restart, the records of the log's uncommitted txid are read again
  and counted; records committed before are acked without being processed (:func:`split_committed`).

The batch log itself (entries, compare-and-set writes) is :mod:`kinesis_spout.state.txlog`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kinesis_spout.config import SpoutConfig
from kinesis_spout.records import SpoutTuple
from kinesis_spout.spark.bookkeeping.ownership import OwnershipStore, OwnershipTaken
from kinesis_spout.spark.pipeline.loop import POLL_S, RunLoop
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.state.base import StateError
from kinesis_spout.state.txlog import BatchLog, BatchLogEntry, OwnershipLost, Place, ReplayCollector

__all__ = ["OWNER_NAME", "RunOwnership", "collect_replay", "previous_owner_wait_s", "split_committed"]

log = logging.getLogger(__name__)

OWNER_NAME = "exactly_once_owner"  # the ownership node, next to the app's checkpoints of the stream
OWNER_GRACE_S = 2.0  # the least waited beyond an owner's session timeout (see previous_owner_wait_s)
REPLAY_TIMEOUT_S = 120.0  # how long a restart may take to read an uncommitted txid's records again


def previous_owner_wait_s(session_timeout_s: float) -> float:
    """How long ``run()`` of an exactly-once pipeline waits for a previous owner whose ZooKeeper session timeout
    is ``session_timeout_s`` to let go: the timeout plus half of it, at least 2 s more. ZooKeeper expires sessions
    in buckets of its tickTime, so a session may outlive its timeout by up to one tick, and a session timeout is at
    least two ticks (ZooKeeper's minimum), so half of it covers a tick whatever the server's tickTime."""
    return session_timeout_s + max(OWNER_GRACE_S, session_timeout_s / 2)


class RunOwnership:
    """One run's ownership of its app and stream, under the name ``holder``.

    Who calls: the exactly-once runner, on the run thread only (``held`` is the run thread's).
    """

    def __init__(self, store: OwnershipStore, holder: str, config: SpoutConfig) -> None:
        self.store = store
        self.holder = holder
        self.config = config
        self.held = False

    def take(self, loop: RunLoop) -> bool:
        """Make this run the owner of its app and stream (store open, before the spout opens or the batch log is
        read). While another holder owns them, wait up to ``previous_owner_wait_s`` of that holder's session
        timeout (a holder that died lets go by then), then raise OwnershipTaken naming it. False if the run ends
        (stop, signal, limits) while waiting: nothing was read or written."""
        cfg = self.config
        began = time.monotonic()
        patience = 0.0  # the longest any holder seen may keep the ownership after it died
        announced = False
        while True:
            try:
                self.store.take_ownership(OWNER_NAME, self.holder)
                self.held = True
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
                        f"half of it (at least {OWNER_GRACE_S:g} s more) before this error", holder=exc.holder,
                        where=exc.where,
                        vanishes_within_s=exc.vanishes_within_s) from exc
                if not announced:
                    announced = True
                    log.warning("pipeline %s: the batch log of stream %r is owned by %s; waiting up to %.1f s for it "
                                "to let go (a driver that died lets go when its ZooKeeper session expires)",
                                cfg.app_name, cfg.stream_name, exc.holder, patience - waited)
            if not loop.wait_until(time.monotonic() + POLL_S):
                return False

    def ensure(self, what: str, txlog: BatchLog | None = None) -> None:
        """Raise OwnershipLost unless this run still owns its app and stream; ``what`` is about to be written
        (or acked, or processed). Without ``txlog`` no I/O (the store's view: its session, and how long it has
        been cut off); with it, one read of the batch log too (no other pipeline wrote it)."""
        if self.held and not self.store.holds_ownership(OWNER_NAME, self.holder):
            raise OwnershipLost(f"its ZooKeeper session ended (expired while the driver was paused or cut off, "
                                f"or closed), or it was cut off from ZooKeeper for longer than its session timeout "
                                f"(so the session may have expired, and another pipeline may own the stream); "
                                f"{what} is not done")
        if txlog is not None:
            try:
                txlog.verify()
            except OwnershipLost as exc:
                raise OwnershipLost(f"{exc}; {what} is not done") from exc

    def lost(self, exc: OwnershipLost) -> OwnershipLost:
        """The error that ends a run that lost its ownership: what happened, and what to do."""
        cfg = self.config
        message = (f"exactly-once SpoutPipeline of app {cfg.app_name!r} on stream {cfg.stream_name!r} lost its "
                   f"ownership of the batch log: {exc}. It stopped before writing the batch log or state and acked "
                   f"none of the records of its open txid: the pipeline that owns the stream now replays them. "
                   f"Start this one again only once that one stopped (it waits for it)")
        log.error("%s", message)
        return OwnershipLost(message)

    def release(self) -> None:
        """Let go of the ownership (after the last flush, before the store closes)."""
        self.store.release_ownership(OWNER_NAME, self.holder)


def split_committed(spout: KinesisSpout, ownership: RunOwnership, tuples: list[SpoutTuple],
                    through: dict[str, Any]) -> list[SpoutTuple]:
    """Ack (without processing) the tuples a committed txid already applied; return the others."""
    fresh: list[SpoutTuple] = []
    stale: list[SpoutTuple] = []
    for t in tuples:
        done = through.get(t.record.shard_id)
        (stale if done is not None and t.record.key <= done else fresh).append(t)
    if stale:
        ownership.ensure(f"the acks of {len(stale)} records committed before")
        spout.ack_many(stale)  # these emissions only (a tuple names its attempt)
        log.info("%d records read again after a restart were committed before; acked without processing",
                 len(stale))
    return fresh


def collect_replay(spout: KinesisSpout, ownership: RunOwnership, loop: RunLoop, entry: BatchLogEntry,
                   max_records: int) -> tuple[list[SpoutTuple], list[SpoutTuple]] | None:
    """Read the records of the uncommitted txid of ``entry`` again: (its tuples, tuples of later batches).

    None if the run should end first (nothing is acked but records committed before). Raises StateError when
    the replay cannot be whole within 120 s, or holds more records than logged.
    """
    collector = ReplayCollector(entry)
    batch: list[SpoutTuple] = []
    later: list[SpoutTuple] = []
    give_up = time.monotonic() + REPLAY_TIMEOUT_S
    while any(n > 0 for n in collector.missing().values()):
        if loop.finished():
            return None
        if time.monotonic() >= give_up:
            raise StateError(
                f"txid {entry.txid} cannot be replayed: after {REPLAY_TIMEOUT_S:.0f} s these shards still miss "
                f"records of it: {collector.missing()}. Were they trimmed by the stream's retention, or the "
                f"stream re-created? Its state updates may be partly applied; the batch log stays as it is",
                retriable=True)
        committed = []
        for t in spout.next_batch(max_records=max_records, timeout_s=POLL_S):
            place = entry.place(t.record.shard_id, t.record.key)
            if place is Place.COMMITTED:
                committed.append(t.message_id)
            elif place is Place.BATCH:
                batch.append(t)
                collector.add(t.record.shard_id)
            else:
                later.append(t)
        if committed:
            ownership.ensure(f"the acks of {len(committed)} records committed before")
            spout.ack_many(committed)
    extra = {s: -n for s, n in collector.missing().items() if n < 0}
    if extra:
        raise StateError(f"txid {entry.txid} replayed with more records than logged ({extra}): the stream does not "
                         f"hold the records the batch log describes (a re-created stream?)")
    log.info("replaying txid %d with its %d records, read again", entry.txid, len(batch))
    return batch, later
