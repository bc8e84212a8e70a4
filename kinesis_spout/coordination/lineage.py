"""Shard lineage: where each shard starts, decided from the stored checkpoints and the shards' parents.

PURE: standard library and the project's value types only; no clock (``now`` is an argument) and no I/O. The spout
(:mod:`kinesis_spout.coordination.starts` and :mod:`kinesis_spout.coordination.sync`) and the Structured Streaming
source (:mod:`kinesis_spout.spark.source.offsets`) both ask :func:`start_positions`, so a shard starts at the same place
whichever of them reads it, and whether its parents were decided in the same call or read to their end first.

The rule, for each shard (KCL's shard-sync rules):

1. A stored checkpoint wins: the shard resumes after its sequence number; a finished shard (``shard_end``) is not
   read again; a stored start position (an operator's reset, or a pin, see below) starts there.
2. Without one, the shard starts where its parents (``ParentShardId``, ``AdjacentParentShardId``) hand it down
   (:func:`handed_down`), from their stored checkpoints (listed or not: a parent past the stream's retention still
   tells through its checkpoint) or, for a parent decided in the same call, from that decision:

   - a parent the app read records of (a sequence number stored, its end included), or read from
     ``TRIM_HORIZON``: the child starts at ``TRIM_HORIZON`` (its records all came after the parent's);
   - a parent closed when its start was decided, started at a time with nothing read after it (its end stored
     with the time, or decided in the same call): the child starts at that time. So an ``AT_TIMESTAMP`` start
     travels down a lineage that ended before the app started, and the records a child received before the
     time are not delivered. A parent pinned while open (a stored pin, ended or not) hands down ``TRIM_HORIZON``;
   - a parent at (or reset to) an unpinned ``LATEST``: the child starts at ``LATEST`` too.

   Of a merge's two parents the earlier start wins (``TRIM_HORIZON`` < ``AT_TIMESTAMP`` by time < ``LATEST``), so
   nothing either parent hands down is skipped.
3. A shard that nothing is handed down to starts at the configured initial position.
4. A closed shard (listed in ``closed``) without a checkpoint whose start is an unpinned ``LATEST``: at the app's
   first start (``first_start``: no checkpoint of any listed shard or parent is stored) it ended before the app
   started, so ``LATEST`` has nothing there: it is not read at all (:func:`never_read`), and its children start
   at ``LATEST`` at once, without waiting for it. The first start stores that (:func:`first_start_writes`: an end
   marked ``reset_to=LATEST`` for each such shard, a pin for each open shard, owned by the worker or not), so
   later a closed shard at an unpinned ``LATEST`` without a checkpoint was open when the app started and never
   pinned (its pin was not written): it is read from ``TRIM_HORIZON`` (loses nothing of what came after the
   start, may deliver older records).

**Pins.** ``LATEST`` means "records that arrive from now on", and "now" must survive a crash: a consumer that
dies before the shard's first checkpoint and starts at a new ``LATEST`` skips what was read but not acked and what
arrived while it was down. So a start that is ``LATEST`` (or ``AT_TIMESTAMP`` from the configuration) is pinned,
:meth:`ShardStart.pin`, to ``AT_TIMESTAMP`` and stored as the shard's checkpoint (:meth:`Checkpoint.pinned`)
before the shard's first record is delivered. Only an open shard is pinned: a closed shard's start is decided
again the same way from the configuration and its parents' stored state. A shard that was closed when its start
was decided and is read to its end with nothing in it after an ``AT_TIMESTAMP`` start keeps that time in its end
(:func:`end_checkpoint`), for its children (they started before it). A shard followed while open hands down
``TRIM_HORIZON`` whatever its start (KCL's rule: its children were created while the app read it), so a pin
taken by a clock ahead of Kinesis' does not skip the children's first records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Collection, Mapping, Sequence

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import InitialPosition
from kinesis_spout.positions import LATEST, TRIM_HORIZON, Kind, Position, at_timestamp, shard_end
from kinesis_spout.records import WHOLE, SequenceKey

__all__ = ["PIN_MARGIN", "ShardStart", "end_checkpoint", "first_start_writes", "from_checkpoint", "handed_down",
           "is_first_start", "never_read", "never_read_checkpoint", "start_positions", "waiting_for_parents"]

#: A pinned LATEST starts this long before the pin was taken: an allowance for clock skew between this machine and
#: Kinesis' arrival timestamps. Records of the margin may be delivered; none after the pin are skipped.
PIN_MARGIN = timedelta(seconds=1)

#: The reasons of the starts rule 2 and rule 4 decide (what the logs say about a shard's start).
CHILD = "child of a reshard"
CHILD_OF_PIN = "child of a pinned shard"
CHILD_OF_LATEST = "child of a shard started at LATEST"
CLOSED_BEFORE_LATEST = "closed before the app started at LATEST"
CLOSED_UNPINNED = "closed, its LATEST start never stored: read from its first record"


@dataclass(frozen=True, slots=True)
class ShardStart:
    """Where one shard starts, and why.

    ``position`` (a :class:`kinesis_spout.positions.Position`) is where reading starts: after a checkpoint's key
    (inside a KPL aggregate, the aggregate is read again and its user records up to the key are skipped),
    ``TRIM_HORIZON``, ``LATEST``, ``AT_TIMESTAMP`` or ``SHARD_END`` (finished: do not read; an end that hands
    ``LATEST`` down was closed before the app first started at ``LATEST``). ``reason`` says which rule decided it
    (for logs). ``durable`` is True when starting again from the same stored state gives the same records: a
    sequence number, a stored pin, ``TRIM_HORIZON``; not a ``LATEST`` or a configured timestamp that was never
    stored. ``closed`` is True when the shard was closed and had no checkpoint when this start was decided: such a
    start is not pinned (it is decided again the same way) and an ``AT_TIMESTAMP`` one is kept in the shard's end
    when nothing came after it (:func:`end_checkpoint`).
    """

    position: Position
    reason: str = ""
    durable: bool = True
    closed: bool = False

    @property
    def finished(self) -> bool:
        return self.position.ended

    @property
    def needs_pin(self) -> bool:
        """True when this start must be pinned and stored before the shard's first record is delivered."""
        return not self.durable and not self.closed and self.position.kind in (Kind.LATEST, Kind.AT_TIMESTAMP)

    def pin(self, now: datetime) -> "ShardStart":
        """This start as a durable ``AT_TIMESTAMP``: ``LATEST`` becomes ``now - PIN_MARGIN``."""
        if self.position.kind is Kind.LATEST:
            return replace(self, position=at_timestamp(now - PIN_MARGIN), durable=True)
        return replace(self, durable=True)

    def describe(self) -> str:
        return f"{self.position.describe()} ({self.reason})"


def from_checkpoint(checkpoint: Checkpoint) -> ShardStart:
    """The start a stored checkpoint stands for (rule 1)."""
    position = checkpoint.position
    if position.ended:
        return ShardStart(position, reason="finished earlier")
    if position.inside_aggregate:
        # inside a KPL aggregate: read the aggregate again; its user records up to the checkpoint are skipped
        return ShardStart(position, reason="checkpoint inside an aggregate")
    if position.kind is Kind.AFTER:
        return ShardStart(position, reason="checkpoint")
    if position.kind is Kind.AT_TIMESTAMP:
        return ShardStart(position, reason="pinned start")
    return ShardStart(position, reason="reset", durable=position.kind is not Kind.LATEST)


def handed_down(checkpoint: Checkpoint) -> ShardStart:
    """Where the children of a shard with this stored checkpoint start when they have none of their own (rule 2).

    A sequence number (read records, its end included), an end without one, a reset to ``TRIM_HORIZON``, or a pin
    not ended (pins are taken on open shards only, so the children were created after it): the app followed the
    shard, so the children start at ``TRIM_HORIZON``. An end that kept its start time (a shard closed when its
    start was decided, :func:`end_checkpoint`): at that time. A reset to ``LATEST`` (an end marked so included):
    at ``LATEST``.
    """
    position = checkpoint.position
    handed = position.then if position.ended else position if position.kind is Kind.LATEST else None
    if handed is not None and handed.kind is Kind.AT_TIMESTAMP:
        return ShardStart(handed, reason=CHILD_OF_PIN)
    if handed is not None and handed.kind is Kind.LATEST:
        return ShardStart(LATEST, reason=CHILD_OF_LATEST, durable=False)
    return ShardStart(TRIM_HORIZON, reason=CHILD)


def _handed_down_by_start(start: ShardStart) -> ShardStart:
    """What a parent decided in the same call (no checkpoint of its own) hands down to its children."""
    position = start.position
    if position.kind is Kind.AT_TIMESTAMP:
        return ShardStart(position, reason=CHILD_OF_PIN, durable=start.durable)
    if position.kind is Kind.LATEST or position.then == LATEST:  # LATEST, or closed before a LATEST start
        return ShardStart(LATEST, reason=CHILD_OF_LATEST, durable=False)
    return ShardStart(TRIM_HORIZON, reason=CHILD)


def _earlier(a: ShardStart, b: ShardStart) -> ShardStart:
    """The start that skips less: TRIM_HORIZON < AT_TIMESTAMP (the earlier time) < LATEST (the positions' order);
    of two equal sentinels the durable one."""
    if a.position.kind is not b.position.kind or a.position.kind is Kind.AT_TIMESTAMP:
        return a if a.position <= b.position else b
    return a if a.durable or not b.durable else b


def is_first_start(parents: Mapping[str, Sequence[str]], stored: Mapping[str, Checkpoint]) -> bool:
    """True when ``stored`` holds no checkpoint of any shard of ``parents`` nor of their parents: the app has not
    started on these shards yet (``stored`` must hold every stored checkpoint of them)."""
    return not any(s in stored or any(p in stored for p in ps) for s, ps in parents.items())


def never_read_checkpoint(shard_id: str) -> Checkpoint:
    """The stored mark of a shard closed before the app first started at ``LATEST``: finished, nothing read, its
    children start at ``LATEST`` (:func:`handed_down`)."""
    return Checkpoint.at(shard_id, shard_end(then=LATEST))


def first_start_writes(parents: Mapping[str, Sequence[str]], stored: Mapping[str, Checkpoint],
                       initial_position: InitialPosition, closed: Collection[str], now: datetime
                       ) -> dict[str, Checkpoint]:
    """What the app's first start at ``LATEST`` stores (rule 4), by shard: a pin for every open shard whose start
    is an unpinned ``LATEST`` (owned by this worker or not), a :func:`never_read_checkpoint` for every closed shard
    not read at all. Empty unless ``initial_position`` is ``LATEST`` and :func:`is_first_start`.

    Who calls: the spout's shard sync (through :func:`kinesis_spout.coordination.starts.record_first_start`) on
    its first listing, before any shard is handed over. Without these, a shard open at the start but pinned only
    when its owner reads it could close first and be taken for one closed before the start.
    """
    if initial_position is not InitialPosition.LATEST or not is_first_start(parents, stored):
        return {}
    out: dict[str, Checkpoint] = {}
    for shard_id, start in start_positions(parents, stored, initial_position, closed=closed,
                                           first_start=True).items():
        if start.reason == CLOSED_BEFORE_LATEST:
            out[shard_id] = never_read_checkpoint(shard_id)
        elif start.needs_pin:
            out[shard_id] = Checkpoint.at(shard_id, start.pin(now).position)
    return out


def start_positions(parents: Mapping[str, Sequence[str]], stored: Mapping[str, Checkpoint],
                    initial_position: InitialPosition, initial_timestamp: datetime | None = None,
                    closed: Collection[str] = (), first_start: bool = False) -> dict[str, ShardStart]:
    """Where each shard of ``parents`` (shard id -> its parent shard ids) starts, by the module's rule.

    ``stored`` holds the app's checkpoints of these shards and of their parents (listed or not); ``closed`` the
    shards of ``parents`` that are closed (ListShards gave them an ending sequence number). A parent that is
    itself a key of ``parents`` and has no checkpoint hands down its own decision, so deciding a whole listing at
    once (the Structured Streaming source's first offset) agrees with deciding each child after its parents ended
    (the spout). All shards are decided from the same ``stored`` state: pins written afterwards do not change the
    decision for a child. ``first_start`` says rule 4's case (:func:`is_first_start`, asked by the caller, who
    knows what it loaded).
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
                if initial_timestamp is None:
                    raise ValueError("initial position AT_TIMESTAMP needs initial_timestamp (SpoutConfig checks it)")
                start = ShardStart(at_timestamp(initial_timestamp), reason="initial position", durable=False)
            elif initial_position is InitialPosition.LATEST:
                start = ShardStart(LATEST, reason="initial position", durable=False)
            else:
                start = ShardStart(TRIM_HORIZON, reason="initial position")
            if shard_id in closed_set:
                if start.position == LATEST and not start.durable:
                    start = ShardStart(shard_end(then=LATEST), reason=CLOSED_BEFORE_LATEST) if first_start else \
                        ShardStart(TRIM_HORIZON, reason=CLOSED_UNPINNED)
                start = replace(start, closed=True)
        out[shard_id] = start
        return start

    for shard_id in parents:
        decide(shard_id, frozenset())
    return out


def never_read(parents: Mapping[str, Sequence[str]], closed: Collection[str], stored: Mapping[str, Checkpoint],
               initial_position: InitialPosition, initial_timestamp: datetime | None = None,
               first_start: bool = False) -> set[str]:
    """The closed shards of ``parents`` that are not read at all (rule 4): at the app's first start, their start
    is an unpinned ``LATEST``. ``stored`` must hold the checkpoints of the closed shards and of their parents."""
    starts = start_positions(parents, stored, initial_position, initial_timestamp, closed, first_start)
    return {s for s, start in starts.items() if start.reason == CLOSED_BEFORE_LATEST}


def end_checkpoint(shard_id: str, start: ShardStart, last: SequenceKey | None) -> Checkpoint:
    """The checkpoint of a shard read to its end: ``last`` is the last record done (None when none was). A shard
    that was closed when its start was decided, started at a time and had nothing after it keeps the time, which
    its children start at (rule 2). A shard followed while open ends plainly: its children start at
    ``TRIM_HORIZON`` (they were created while the app read it), whatever the clock that pinned it said.

    Who calls: the spout, when a closed shard is finished.
    """
    if last is None and start.closed and start.position.kind is Kind.AT_TIMESTAMP:
        return Checkpoint.at(shard_id, shard_end(then=start.position))
    return Checkpoint.at(shard_id, shard_end(SequenceKey(last.sequence, WHOLE) if last is not None else None))


def waiting_for_parents(parents: Mapping[str, Sequence[str]], listed: Collection[str],
                        finished: Collection[str]) -> set[str]:
    """The shards of ``parents`` that must not be read yet: a parent of theirs is still ``listed`` and not in
    ``finished`` (read to its end, the end stored). Reading a child only after its parents keeps each partition
    key's records in order across a reshard; a parent that is no longer listed (expired) holds nobody back."""
    return {shard for shard, shard_parents in parents.items()
            if any(p in listed and p not in finished for p in shard_parents)}
