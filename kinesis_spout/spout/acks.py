"""Ack routing: message ids back to their shard's lifecycle, acks and fails applied, moved checkpoints offered.

A message id names a record, whatever its attempt; a :class:`~kinesis_spout.records.SpoutTuple` given instead names
one emission of it: it is acked or failed only while the record is in flight at the tuple's ``attempt``.

:class:`AckRouter` takes the registry's lock for each call (any thread may ack or fail) and owns the count of
unknown message ids, guarded by that lock. A shard no longer read (handed back, dropped) is not in the registry:
its ids count as unknown and move nothing; the shard's lifecycle refuses acks outside its ack phases as well.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterable

from kinesis_spout.records import SpoutTuple, parse_message_id_rank
from kinesis_spout.tracker import FailOutcome

if TYPE_CHECKING:
    from kinesis_spout.spout.dead_letters import DeadLetterGlue
    from kinesis_spout.spout.registry import ShardRegistry
    from kinesis_spout.spout.shards import ShardLifecycle

__all__ = ["AckRouter"]

log = logging.getLogger("kinesis_spout")


class AckRouter:
    """The spout's ``ack``/``fail``/``ack_many``/``fail_many``; each raises ``SpoutStateError`` unless it is open."""

    def __init__(self, registry: ShardRegistry, dead_letters: DeadLetterGlue) -> None:
        self.registry = registry
        self.dead_letters = dead_letters
        self.unknown_message_ids = 0

    def lookup(self, mid: str) -> tuple[ShardLifecycle, int] | None:
        """The shard and key (as a rank) of a message id (lock held); None (counted) for ids of shards not read.
        Also called by :class:`~kinesis_spout.spout.batch.SpoutBatch` for tuples added to a batch from elsewhere."""
        self.registry.check_open()
        try:
            shard_id, key = parse_message_id_rank(mid)
        except ValueError:
            self.unknown_message_ids += 1
            log.debug("ignoring malformed message id %r", mid)
            return None
        state = self.registry.shards.get(shard_id)
        if state is None:
            self.unknown_message_ids += 1
            return None
        return state, key

    def ack(self, mid: str | SpoutTuple) -> None:
        """One record fully processed: the usual way to ack, once per record (no grouping). A tuple: that emission
        only."""
        registry = self.registry
        with registry.lock:
            if isinstance(mid, SpoutTuple):
                found = self.lookup(mid.message_id)
                moved = found is not None and found[0].ack_attempt(found[1], mid.attempt)
            else:
                found = self.lookup(mid)
                moved = found is not None and found[0].ack(found[1])
            if moved and found is not None:
                registry.offer_checkpoint(found[0])
            registry.notify_settled()  # a hand-back may be waiting for this

    def ack_many(self, mids: Iterable[str | SpoutTuple]) -> None:
        """Many acks under one lock hold; each shard's checkpoint offered once. Tuples: their emissions only."""
        registry = self.registry
        with registry.lock:
            by_shard: dict[str, tuple[ShardLifecycle, list[int]]] = {}
            moved: dict[str, ShardLifecycle] = {}  # shards acked by tuples (one emission each)
            for mid in mids:
                if isinstance(mid, SpoutTuple):
                    found = self.lookup(mid.message_id)
                    if found is not None and found[0].ack_attempt(found[1], mid.attempt):
                        moved[found[0].shard_id] = found[0]
                    continue
                found = self.lookup(mid)
                if found is not None:
                    state, rank = found
                    entry = by_shard.get(state.shard_id)
                    if entry is None:
                        by_shard[state.shard_id] = (state, [rank])
                    else:
                        entry[1].append(rank)
            for state, ranks in by_shard.values():
                if state.ack_many(ranks):
                    moved[state.shard_id] = state
            for state in moved.values():
                registry.offer_checkpoint(state)
            registry.notify_settled()

    def fail_many(self, mids: Iterable[str | SpoutTuple]) -> None:
        """Failed records are retried after their backoff, or dead-lettered once their retries ran out. Tuples:
        their emissions only (a tuple whose emission is over fails nothing)."""
        registry = self.registry
        with registry.lock:
            now = time.monotonic()
            for mid in mids:
                if isinstance(mid, SpoutTuple):
                    found = self.lookup(mid.message_id)
                    outcome = None if found is None else found[0].fail_attempt(found[1], mid.attempt, now)
                else:
                    found = self.lookup(mid)
                    outcome = None if found is None else found[0].fail(found[1], now)
                if found is not None and outcome is FailOutcome.DEAD_LETTER:
                    self.dead_letters.deliver(found[0], "failed")
            registry.notify_settled()
