"""Ack routing: message ids back to their shard's lifecycle, acks and fails applied, moved checkpoints offered.

:class:`AckRouter` takes the registry's lock for each call (any thread may ack or fail) and owns the count of
unknown message ids, guarded by that lock. A shard no longer read (handed back, dropped) is not in the registry:
its ids count as unknown and move nothing; the shard's lifecycle refuses acks outside its ack phases as well.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterable

from kinesis_spout.records import parse_message_id_rank
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

    def ack(self, mid: str) -> None:
        """One record fully processed: the usual way to ack, once per record (no grouping)."""
        registry = self.registry
        with registry.lock:
            found = self.lookup(mid)
            if found is not None and found[0].ack(found[1]):
                registry.offer_checkpoint(found[0])
            registry.notify_settled()  # a hand-back may be waiting for this

    def ack_many(self, mids: Iterable[str]) -> None:
        """Many acks under one lock hold; each shard's checkpoint offered once."""
        registry = self.registry
        with registry.lock:
            by_shard: dict[str, tuple[ShardLifecycle, list[int]]] = {}
            for mid in mids:
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
                    registry.offer_checkpoint(state)
            registry.notify_settled()

    def fail_many(self, mids: Iterable[str]) -> None:
        """Failed records are retried after their backoff, or dead-lettered once their retries ran out."""
        registry = self.registry
        with registry.lock:
            now = time.monotonic()
            for mid in mids:
                found = self.lookup(mid)
                if found is not None and found[0].fail(found[1], now) is FailOutcome.DEAD_LETTER:
                    self.dead_letters.deliver(found[0], "failed")
            registry.notify_settled()
