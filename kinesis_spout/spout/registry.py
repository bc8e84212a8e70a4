"""The shards a spout reads now, and the one lock that guards them: :class:`ShardRegistry`.

Lock: ``lock`` (re-entrant) guards ``shards``, ``done``, ``phase`` and every :class:`ShardLifecycle` in ``shards``.
Any thread may take it: the consumer's (next_tuple/next_batch, ack, fail), the shard sync thread, the checkpoint
writer's thread (:meth:`ShardRegistry.latest_checkpoint`) and the dead-letter thread. ``settled``, a condition on
the same lock, is notified when records are acked, failed or dead-lettered, or a shard is dropped, with leases on
(``wait_settled``): a hand-back waits on it for its shard's records in flight; while nobody waits, acks notify
nobody (a notify costs as much as the rest of an ack). Nothing here does I/O but the checkpoint writer's offers (a
dict write under the writer's own lock), made once per shard until the writer takes the value (see
:meth:`ShardRegistry.offer_checkpoint`).
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import TYPE_CHECKING, Callable

from kinesis_spout.errors import SpoutStateError
from kinesis_spout.kinesis.retrieval.reader import RoundRobinReader
from kinesis_spout.spout.shards import ShardLifecycle

if TYPE_CHECKING:
    from kinesis_spout.checkpoint.base import Checkpoint
    from kinesis_spout.checkpoint.writer import CheckpointWriter

__all__ = ["ShardRegistry"]

log = logging.getLogger(__name__)


class ShardRegistry:
    """The owned shards (``shards``: shard id -> lifecycle, in the order they were added), the shards found finished
    when they were looked at (``done``), the spout's own phase (``phase``: ``new``, ``open`` or ``closed``), the
    round-robin over their readers (``rr``) and the checkpoint writer (``writer``, set by ``open()``)."""

    def __init__(self, rr: RoundRobinReader) -> None:
        self.lock = threading.RLock()
        self.settled = threading.Condition(self.lock)
        self.shards: dict[str, ShardLifecycle] = {}
        self.done: set[str] = set()
        self.phase = "new"
        self.rr = rr
        self.writer: CheckpointWriter | None = None
        self.waiting = 0  # threads waiting on ``settled`` now (hand-backs, see wait_settled)
        self._offered: set[ShardLifecycle] = set()  # shards whose ``latest`` the writer holds and has not called yet
        self.on_finished: Callable[[], None] = lambda: None  # a shard finished: its children may be read

    def check_open(self) -> None:
        """Raise unless the spout is open (lock held)."""
        if self.phase != "open":
            raise SpoutStateError(f"spout is {self.phase}: call open() (or use 'with KinesisSpout(...)') first"
                                  if self.phase == "new" else "spout is closed")

    def known(self) -> set[str]:
        """Shard ids being read or finished (so the shard sync does not start them again). Takes the lock."""
        with self.lock:
            return set(self.shards) | self.done

    def install(self, state: ShardLifecycle) -> None:
        """Start tracking a new shard (lock held): its reader joins the round-robin, and starts at once when the
        spout is open (``open()`` starts the others)."""
        state.latest = partial(self.latest_checkpoint, state)
        self._offered = {s for s in self._offered if s.shard_id != state.shard_id}  # an earlier owner's offer
        self.shards[state.shard_id] = state
        self.rr.add([state.reader])
        if self.phase == "open":
            state.start_reading()

    def notify_settled(self) -> None:
        """Records were acked, failed or dead-lettered (lock held): wake the hand-backs waiting for them, if any."""
        if self.waiting:
            self.settled.notify_all()

    def wait_settled(self, timeout_s: float) -> None:
        """Wait (lock held, released while waiting) until records are acked, failed or dead-lettered or a shard is
        dropped, or ``timeout_s`` passes. Called by a hand-back waiting for its shard's records in flight; counted
        in ``waiting`` so that :meth:`notify_settled` wakes it."""
        self.waiting += 1
        try:
            self.settled.wait(timeout_s)
        finally:
            self.waiting -= 1

    def offer_checkpoint(self, state: ShardLifecycle) -> None:
        """The shard's checkpoint may have moved (lock held): the writer asks for it when the shard is due. Only
        while the shard reads or drains: a finished shard's end was offered by :meth:`finish` and stays the value to
        write; a shard handed back or dropped moves nothing.

        Offered once until the writer takes it: while the writer holds the shard's ``latest`` and has not called
        it, a new offer would change nothing (the writer calls ``latest`` under this lock, after this ack, so the
        value it makes has every ack made before); :meth:`latest_checkpoint` ends the offer when it is called."""
        if state in self._offered or not state.moves_checkpoint:
            return
        assert self.writer is not None
        self._offered.add(state)
        self.writer.offer_latest(state.shard_id, state.latest)

    def latest_checkpoint(self, state: ShardLifecycle) -> Checkpoint | None:
        """The shard's checkpoint to write now, None when it has not moved since the last one (the writer's thread;
        takes the lock). A finished shard's is its shard end. The shard's offer ends: its next move offers again."""
        with self.lock:
            self._offered.discard(state)
            return state.checkpoint_to_write()

    def finish(self, state: ShardLifecycle) -> None:
        """The shard was read to its end and every record is done (lock held): offer its shard end."""
        end = state.finish(self.rr)
        self._offered.discard(state)  # the shard end replaces the value offered
        assert self.writer is not None
        self.writer.offer(end)
        log.info("shard %s finished: every record is done", state.shard_id)
        self.on_finished()
