"""Ack routing: message ids back to their shard's lifecycle, acks and fails applied, moved checkpoints offered.

A message id names a record, whatever its attempt; a :class:`~kinesis_spout.records.SpoutTuple` given instead names
one emission of it: it is acked or failed only while the record is in flight at the tuple's ``attempt``.

:class:`AckRouter` takes the registry's lock for each call (any thread may ack or fail) and owns the count of
unknown message ids, guarded by that lock. A shard no longer read (handed back, dropped) is not in the registry:
its ids count as unknown and move nothing; the shard's lifecycle refuses acks outside its ack phases as well.

The per-record path is short: an id ``"shardId:sequenceNumber"`` of a shard read now is split once
(``str.partition``), its shard found with one dict look-up and its rank made with one ``int()`` (:func:`_rank`).
Everything else (tuples, ids with a sub-sequence number, malformed ids, ids of shards not read, a spout that is not
open) takes the checked path, :meth:`AckRouter.lookup`, which keeps the same answers and counts.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterable

from kinesis_spout.records import RANK_BASE, SpoutTuple, parse_message_id_rank
from kinesis_spout.tracker import FailOutcome

if TYPE_CHECKING:
    from kinesis_spout.spout.dead_letters import DeadLetterGlue
    from kinesis_spout.spout.registry import ShardRegistry
    from kinesis_spout.spout.shards import ShardLifecycle

__all__ = ["AckRouter"]

log = logging.getLogger(__name__)

_DIGITS = frozenset("0123456789")


def _rank(sequence: str) -> int | None:
    """The rank of a message id's sequence part when it is ASCII decimal digits (the sequence numbers Kinesis hands
    out), else None (the caller takes the checked path, which decides). Cheaper than ``str.isdecimal``, which looks
    at every digit: ``int()`` takes an ASCII string whose first and last characters are digits and that has no "_"
    exactly when all its characters are digits (it refuses inner blanks, signs and colons)."""
    if sequence[:1] in _DIGITS and sequence[-1:] in _DIGITS and "_" not in sequence and sequence.isascii():
        try:
            return int(sequence) * RANK_BASE
        except ValueError:  # e.g. "sequence:sub", an id with a sub-sequence number
            return None
    return None


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
            if mid.__class__ is str and registry.phase == "open":
                shard_id, _, sequence = mid.partition(":")
                state = registry.shards.get(shard_id)
                rank = None if state is None else _rank(sequence)
                if state is not None and rank is not None:  # "shardId:sequenceNumber" of a shard read now
                    if state.ack(rank):
                        registry.offer_checkpoint(state)
                    registry.notify_settled()  # a hand-back may be waiting for this
                    return
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
        """Many acks under one lock hold: the ids of each shard acked in one call of its tracker, tuples (their
        emissions only) first, each shard's checkpoint offered once."""
        registry = self.registry
        mids = mids if isinstance(mids, list) else list(mids)
        with registry.lock:
            if mids:
                registry.check_open()
            shards = registry.shards
            groups: dict[str, list[int]] = {}  # shard id -> ranks acked, in the order given
            checked: list[str | SpoutTuple] = []  # tuples and the ids the per-record path does not take
            for mid in mids:
                if mid.__class__ is str:
                    shard_id, _, sequence = mid.partition(":")
                    rank = _rank(sequence)
                    if rank is not None:
                        ranks = groups.get(shard_id)
                        if ranks is not None:
                            ranks.append(rank)
                            continue
                        if shard_id in shards:
                            groups[shard_id] = [rank]
                            continue
                checked.append(mid)
            moved: dict[str, ShardLifecycle] = {}
            for mid in checked:
                if isinstance(mid, SpoutTuple):  # one emission each, before the ids (as acked one by one)
                    found = self.lookup(mid.message_id)
                    if found is not None and found[0].ack_attempt(found[1], mid.attempt):
                        moved[found[0].shard_id] = found[0]
                    continue
                found = self.lookup(mid)
                if found is not None:
                    groups.setdefault(found[0].shard_id, []).append(found[1])
            for shard_id, ranks in groups.items():
                state = shards[shard_id]
                if state.ack_many(ranks):
                    moved[shard_id] = state
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
