"""Shard lineage: where each shard starts, decided from the stored checkpoints and the shards' parents.

PURE: standard library and the project's value types only; no clock (``now`` is an argument) and no I/O. The spout
(:mod:`kinesis_spout.spout`) and the Structured Streaming source (:mod:`kinesis_spout.spark.offsets`) both ask
:func:`start_positions`, so a shard starts at the same place whichever of them reads it.

The rule, for each shard:

1. A stored checkpoint wins: the shard resumes after its sequence number; a finished shard (``shard_end``) is not
   read again; a stored start position (an operator's reset, or a pin, see below) starts there.
2. Without one, a shard whose parent (``ParentShardId`` or ``AdjacentParentShardId``) has a stored checkpoint is a
   child of a reshard this app followed: it starts at ``TRIM_HORIZON``, because its records come after its
   parent's. The parent need not be listed any more: after it ages out of the stream's retention its checkpoint
   still tells. (A parent an operator reset to ``LATEST`` does not count: the reset asked to skip its data.)
3. Any other shard starts at the configured initial position.

**Pins.** ``LATEST`` means "records that arrive from now on", and "now" must survive a crash: a consumer that
dies before the shard's first checkpoint and starts at a new ``LATEST`` skips what was read but not acked and what
arrived while it was down. So a start that is ``LATEST`` (or ``AT_TIMESTAMP`` from the configuration) is pinned,
:meth:`ShardStart.pin`, to ``AT_TIMESTAMP`` and stored as the shard's checkpoint (:meth:`Checkpoint.pinned`)
before the shard's first record is delivered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Collection, Mapping, Sequence

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import InitialPosition

__all__ = ["AFTER_SEQUENCE_NUMBER", "AT_SEQUENCE_NUMBER", "AT_TIMESTAMP", "LATEST", "PIN_MARGIN", "SHARD_END",
           "TRIM_HORIZON", "ShardStart", "start_positions", "waiting_for_parents"]

TRIM_HORIZON = "TRIM_HORIZON"
LATEST = "LATEST"
AT_TIMESTAMP = "AT_TIMESTAMP"
AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"
AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
SHARD_END = "SHARD_END"

#: A pinned LATEST starts this long before the pin was taken: an allowance for clock skew between this machine and
#: Kinesis' arrival timestamps. Records of the margin may be delivered; none after the pin are skipped.
PIN_MARGIN = timedelta(seconds=1)


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


def _followed(checkpoint: Checkpoint | None) -> bool:
    """Whether a parent's stored checkpoint shows that this app read (or started to read) the parent."""
    return checkpoint is not None and checkpoint.reset_to != LATEST


def start_positions(parents: Mapping[str, Sequence[str]], stored: Mapping[str, Checkpoint],
                    initial_position: InitialPosition, initial_timestamp: datetime | None = None
                    ) -> dict[str, ShardStart]:
    """Where each shard of ``parents`` (shard id -> its parent shard ids) starts, by the module's rule.

    ``stored`` holds the app's checkpoints of these shards and of their parents (listed or not); all shards are
    decided from the same ``stored`` state, so pins written afterwards do not change the decision for a child.
    """
    out: dict[str, ShardStart] = {}
    for shard_id, shard_parents in parents.items():
        checkpoint = stored.get(shard_id)
        if checkpoint is not None:
            out[shard_id] = from_checkpoint(checkpoint)
        elif any(_followed(stored.get(p)) for p in shard_parents):
            out[shard_id] = ShardStart(TRIM_HORIZON, reason="child of a reshard")
        elif initial_position is InitialPosition.AT_TIMESTAMP:
            out[shard_id] = ShardStart(AT_TIMESTAMP, timestamp=initial_timestamp, reason="initial position",
                                       durable=False)
        elif initial_position is InitialPosition.LATEST:
            out[shard_id] = ShardStart(LATEST, reason="initial position", durable=False)
        else:
            out[shard_id] = ShardStart(TRIM_HORIZON, reason="initial position")
    return out


def waiting_for_parents(parents: Mapping[str, Sequence[str]], listed: Collection[str],
                        finished: Collection[str]) -> set[str]:
    """The shards of ``parents`` that must not be read yet: a parent of theirs is still ``listed`` and not in
    ``finished`` (read to its end, the end stored). Reading a child only after its parents keeps each partition
    key's records in order across a reshard; a parent that is no longer listed (expired) holds nobody back."""
    return {shard for shard, shard_parents in parents.items()
            if any(p in listed and p not in finished for p in shard_parents)}
