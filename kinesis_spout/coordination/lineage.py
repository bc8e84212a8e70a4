"""Shard lineage: where each shard starts, decided from the stored checkpoints and the shards' parents.

PURE: standard library and the project's value types only; no clock (``now`` is an argument) and no I/O. The spout
(:mod:`kinesis_spout.coordination.starts` and :mod:`kinesis_spout.coordination.sync`) and the Structured Streaming
source (:mod:`kinesis_spout.spark.offsets`) both ask :func:`start_positions`, so a shard starts at the same place
whichever of them reads it, and whether its parents were decided in the same call or read to their end first.

The rule, for each shard (KCL's shard-sync rules):

1. A stored checkpoint wins: the shard resumes after its sequence number; a finished shard (``shard_end``) is not
   read again; a stored start position (an operator's reset, or a pin, see below) starts there.
2. Without one, the shard starts where its parents (``ParentShardId``, ``AdjacentParentShardId``) hand it down
   (:func:`handed_down`), from their stored checkpoints (listed or not: a parent past the stream's retention still
   tells through its checkpoint) or, for a parent decided in the same call, from that decision:

   - a parent the app read records of (a sequence number stored, its end included), or read from
     ``TRIM_HORIZON``: the child starts at ``TRIM_HORIZON`` (its records all came after the parent's);
   - a parent pinned to a time and nothing read since (``AT_TIMESTAMP``, or its end stored with the pin): the child
     starts at the pin. So a ``LATEST`` or ``AT_TIMESTAMP`` start travels down the lineage, and the records a
     child received before the app started are not delivered;
   - a parent at (or reset to) an unpinned ``LATEST``: the child starts at ``LATEST`` too.

   Of a merge's two parents the earlier start wins (``TRIM_HORIZON`` < ``AT_TIMESTAMP`` by time < ``LATEST``), so
   nothing either parent hands down is skipped.
3. A shard that nothing is handed down to starts at the configured initial position.
4. A closed shard (listed in ``closed``) whose start is an unpinned ``LATEST`` is not read at all
   (:func:`never_read`): it ended before the app started, so ``LATEST`` has nothing there, and its children start
   at ``LATEST`` at once, without waiting for it.

**Pins.** ``LATEST`` means "records that arrive from now on", and "now" must survive a crash: a consumer that
dies before the shard's first checkpoint and starts at a new ``LATEST`` skips what was read but not acked and what
arrived while it was down. So a start that is ``LATEST`` (or ``AT_TIMESTAMP`` from the configuration) is pinned,
:meth:`ShardStart.pin`, to ``AT_TIMESTAMP`` and stored as the shard's checkpoint (:meth:`Checkpoint.pinned`)
before the shard's first record is delivered. A closed shard read to its end with nothing in it after its pin
keeps the pin in its end (:func:`end_checkpoint`), for its children.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Collection, Mapping, Sequence

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import InitialPosition
from kinesis_spout.records import SequenceKey

__all__ = ["AFTER_SEQUENCE_NUMBER", "AT_SEQUENCE_NUMBER", "AT_TIMESTAMP", "LATEST", "PIN_MARGIN", "SHARD_END",
           "TRIM_HORIZON", "ShardStart", "end_checkpoint", "handed_down", "never_read", "start_positions",
           "waiting_for_parents"]

TRIM_HORIZON = "TRIM_HORIZON"
LATEST = "LATEST"
AT_TIMESTAMP = "AT_TIMESTAMP"
AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"
AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
SHARD_END = "SHARD_END"

#: A pinned LATEST starts this long before the pin was taken: an allowance for clock skew between this machine and
#: Kinesis' arrival timestamps. Records of the margin may be delivered; none after the pin are skipped.
PIN_MARGIN = timedelta(seconds=1)

#: The reasons of the starts rule 2 and rule 4 decide (what the logs say about a shard's start).
CHILD = "child of a reshard"
CHILD_OF_PIN = "child of a pinned shard"
CHILD_OF_LATEST = "child of a shard started at LATEST"
CLOSED_BEFORE_LATEST = "closed before the app started at LATEST"


@dataclass(frozen=True, slots=True)
class ShardStart:
    """Where one shard starts, and why.

    ``position`` is ``AFTER_SEQUENCE_NUMBER`` (with ``sequence_number``), ``AT_SEQUENCE_NUMBER`` (a checkpoint
    inside a KPL aggregate: ``sequence_number`` is read again and its user records up to ``sub_sequence_number``
    are skipped), ``TRIM_HORIZON``, ``LATEST``,
    ``AT_TIMESTAMP`` (with ``timestamp``) or ``SHARD_END`` (finished: do not read). ``reason`` says which rule
    decided it (for logs). ``durable`` is True when starting again from the same stored state gives the same
    records: a sequence number, a stored pin, ``TRIM_HORIZON``; not a ``LATEST`` or a configured timestamp that was
    never stored.
    """

    position: str
    sequence_number: str | None = None
    sub_sequence_number: int | None = None
    timestamp: datetime | None = None
    reason: str = ""
    durable: bool = True

    @property
    def finished(self) -> bool:
        return self.position == SHARD_END

    @property
    def needs_pin(self) -> bool:
        """True when this start must be pinned and stored before the shard's first record is delivered."""
        return not self.durable and self.position in (LATEST, AT_TIMESTAMP)

    def pin(self, now: datetime) -> "ShardStart":
        """This start as a durable ``AT_TIMESTAMP``: ``LATEST`` becomes ``now - PIN_MARGIN``."""
        if self.position == LATEST:
            return replace(self, position=AT_TIMESTAMP, timestamp=now - PIN_MARGIN, durable=True)
        return replace(self, durable=True)

    def describe(self) -> str:
        if self.position == AFTER_SEQUENCE_NUMBER:
            return f"after {self.sequence_number} ({self.reason})"
        if self.position == AT_SEQUENCE_NUMBER:
            return f"at {self.sequence_number}, after its user record {self.sub_sequence_number} ({self.reason})"
        if self.timestamp is not None:
            return f"{self.position} {self.timestamp.isoformat()} ({self.reason})"
        return f"{self.position} ({self.reason})"


def from_checkpoint(checkpoint: Checkpoint) -> ShardStart:
    """The start a stored checkpoint stands for (rule 1)."""
    if checkpoint.shard_end:
        return ShardStart(SHARD_END, checkpoint.sequence_number, checkpoint.sub_sequence_number,
                          reason="finished earlier")
    if checkpoint.sequence_number is not None and checkpoint.sub_sequence_number is not None:
        # inside a KPL aggregate: read the aggregate again; its user records up to the checkpoint are skipped
        return ShardStart(AT_SEQUENCE_NUMBER, checkpoint.sequence_number, checkpoint.sub_sequence_number,
                          reason="checkpoint inside an aggregate")
    if checkpoint.sequence_number is not None:
        return ShardStart(AFTER_SEQUENCE_NUMBER, checkpoint.sequence_number, reason="checkpoint")
    if checkpoint.reset_to == AT_TIMESTAMP:
        return ShardStart(AT_TIMESTAMP, timestamp=checkpoint.timestamp, reason="pinned start")
    if checkpoint.reset_to == LATEST:
        return ShardStart(LATEST, reason="reset", durable=False)
    return ShardStart(TRIM_HORIZON, reason="reset")


def handed_down(checkpoint: Checkpoint) -> ShardStart:
    """Where the children of a shard with this stored checkpoint start when they have none of their own (rule 2).

    A sequence number (read records, its end included), an end without one, or a reset to ``TRIM_HORIZON``: the
    app followed the shard from its start or read into it, so the children start at ``TRIM_HORIZON``. A pin (with
    or without the end): at the pin. A reset to ``LATEST``: at ``LATEST``.
    """
    if checkpoint.sequence_number is None and checkpoint.reset_to == AT_TIMESTAMP:
        return ShardStart(AT_TIMESTAMP, timestamp=checkpoint.timestamp, reason=CHILD_OF_PIN)
    if checkpoint.sequence_number is None and checkpoint.reset_to == LATEST:
        return ShardStart(LATEST, reason=CHILD_OF_LATEST, durable=False)
    return ShardStart(TRIM_HORIZON, reason=CHILD)


def _handed_down_by_start(start: ShardStart) -> ShardStart:
    """What a parent decided in the same call (no checkpoint of its own) hands down to its children."""
    if start.position == AT_TIMESTAMP:
        return ShardStart(AT_TIMESTAMP, timestamp=start.timestamp, reason=CHILD_OF_PIN, durable=start.durable)
    if start.position == LATEST or start.reason == CLOSED_BEFORE_LATEST:
        return ShardStart(LATEST, reason=CHILD_OF_LATEST, durable=False)
    return ShardStart(TRIM_HORIZON, reason=CHILD)


def _earlier(a: ShardStart, b: ShardStart) -> ShardStart:
    """The start that skips less: TRIM_HORIZON < AT_TIMESTAMP (the earlier time) < LATEST."""
    rank = {TRIM_HORIZON: 0, AT_TIMESTAMP: 1, LATEST: 2}
    if rank[a.position] != rank[b.position]:
        return a if rank[a.position] < rank[b.position] else b
    if a.position == AT_TIMESTAMP and a.timestamp is not None and b.timestamp is not None:
        return a if a.timestamp <= b.timestamp else b
    return a if a.durable or not b.durable else b


def start_positions(parents: Mapping[str, Sequence[str]], stored: Mapping[str, Checkpoint],
                    initial_position: InitialPosition, initial_timestamp: datetime | None = None,
                    closed: Collection[str] = ()) -> dict[str, ShardStart]:
    """Where each shard of ``parents`` (shard id -> its parent shard ids) starts, by the module's rule.

    ``stored`` holds the app's checkpoints of these shards and of their parents (listed or not); ``closed`` the
    shards of ``parents`` that are closed (ListShards gave them an ending sequence number). A parent that is
    itself a key of ``parents`` and has no checkpoint hands down its own decision, so deciding a whole listing at
    once (the Structured Streaming source's first offset) agrees with deciding each child after its parents ended
    (the spout). All shards are decided from the same ``stored`` state: pins written afterwards do not change the
    decision for a child.
    """
    out: dict[str, ShardStart] = {}
    closed_set = frozenset(closed)

    def decide(shard_id: str, path: frozenset[str]) -> ShardStart:
        if shard_id in out:
            return out[shard_id]
        checkpoint = stored.get(shard_id)
        if checkpoint is not None:
            start = from_checkpoint(checkpoint)
        else:
            inherited: ShardStart | None = None
            for parent in parents[shard_id]:
                if parent in stored:
                    given = handed_down(stored[parent])
                elif parent in parents and parent not in path:
                    given = _handed_down_by_start(decide(parent, path | {shard_id}))
                else:
                    continue  # aged out of the listing with no checkpoint, or never known: tells nothing
                inherited = given if inherited is None else _earlier(inherited, given)
            if inherited is not None:
                start = inherited
            elif initial_position is InitialPosition.AT_TIMESTAMP:
                start = ShardStart(AT_TIMESTAMP, timestamp=initial_timestamp, reason="initial position",
                                   durable=False)
            elif initial_position is InitialPosition.LATEST:
                start = ShardStart(LATEST, reason="initial position", durable=False)
            else:
                start = ShardStart(TRIM_HORIZON, reason="initial position")
            if start.position == LATEST and not start.durable and shard_id in closed_set:
                start = ShardStart(SHARD_END, reason=CLOSED_BEFORE_LATEST)
        out[shard_id] = start
        return start

    for shard_id in parents:
        decide(shard_id, frozenset())
    return out


def never_read(parents: Mapping[str, Sequence[str]], closed: Collection[str], stored: Mapping[str, Checkpoint],
               initial_position: InitialPosition, initial_timestamp: datetime | None = None) -> set[str]:
    """The closed shards of ``parents`` that are not read at all (rule 4): their start is an unpinned ``LATEST``.

    Who calls: the spout's shard sync, which counts them as ended, so their children are handed over at once.
    ``stored`` must hold the checkpoints of the closed shards and of their parents (listed or not).
    """
    starts = start_positions(parents, stored, initial_position, initial_timestamp, closed)
    return {s for s, start in starts.items() if start.reason == CLOSED_BEFORE_LATEST}


def end_checkpoint(shard_id: str, start: ShardStart, last: SequenceKey | None) -> Checkpoint:
    """The checkpoint of a shard read to its end: ``last`` is the last record done (None when none was). A shard
    that started at a pin and had nothing after it keeps the pin, which its children start at (rule 2).

    Who calls: the spout, when a closed shard is finished.
    """
    if last is None and start.position == AT_TIMESTAMP and start.timestamp is not None:
        return Checkpoint(shard_id, None, shard_end=True, reset_to=AT_TIMESTAMP, timestamp=start.timestamp)
    return Checkpoint(shard_id, str(last.sequence) if last is not None else None, None, shard_end=True)


def waiting_for_parents(parents: Mapping[str, Sequence[str]], listed: Collection[str],
                        finished: Collection[str]) -> set[str]:
    """The shards of ``parents`` that must not be read yet: a parent of theirs is still ``listed`` and not in
    ``finished`` (read to its end, the end stored). Reading a child only after its parents keeps each partition
    key's records in order across a reshard; a parent that is no longer listed (expired) holds nobody back."""
    return {shard for shard, shard_parents in parents.items()
            if any(p in listed and p not in finished for p in shard_parents)}
