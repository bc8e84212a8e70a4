"""Where a spout starts reading each shard it takes on: the lineage rule applied to the stored checkpoints, and
``LATEST``/``AT_TIMESTAMP`` starts pinned in the store before the first record is delivered.

The I/O half of :mod:`kinesis_spout.coordination.lineage`: it reads and writes the checkpoint store, and says
where each shard's getter takes its first iterator.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Mapping

from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
from kinesis_spout.config import InitialPosition, ReadingSettings
from kinesis_spout.coordination.lineage import ShardStart, first_start_writes, from_checkpoint, start_positions
from kinesis_spout.errors import CheckpointConflict
from kinesis_spout.kinesis.shards import Shard
from kinesis_spout.positions import LATEST, Kind, Position

__all__ = ["record_first_start", "resolve_starts"]

log = logging.getLogger(__name__)

#: One shard's start: the shard, where it starts and why, its stored checkpoint, and the getter's first position
#: (the start's position, or ``LATEST`` for a start pinned as this spout opened; None for a shard finished
#: earlier, which is not read).
Resolved = tuple[Shard, ShardStart, "Checkpoint | None", "Position | None"]


def record_first_start(store: CheckpointStore, owner: str, initial_position: InitialPosition,
                       listed: list[Shard]) -> dict[str, datetime]:
    """At the app's first start at ``LATEST`` (nothing stored for any listed shard or parent), store a pin for
    every open shard and the never-read mark for every closed shard that ended before it
    (:func:`kinesis_spout.coordination.lineage.first_start_writes`); returns the pins this call wrote (shard id ->
    time). A shard that meanwhile got a checkpoint (another worker starting at the same time) keeps it.

    Who calls: the spout's shard sync, on its first listing, before any shard is handed over; an error (the store
    unreachable) is raised and the next round tries again. Pins are written before marks, so a start cut short
    leaves shards read from ``TRIM_HORIZON`` (more records), never shards skipped.
    """
    if initial_position is not InitialPosition.LATEST:
        return {}
    stored: dict[str, Checkpoint] = {}
    for shard_id in sorted({s.shard_id for s in listed} | {p for s in listed for p in s.parents}):
        checkpoint = store.load(shard_id)
        if checkpoint is not None:
            stored[shard_id] = checkpoint
    writes = first_start_writes({s.shard_id: s.parents for s in listed}, stored, initial_position,
                                {s.shard_id for s in listed if s.closed}, datetime.now(timezone.utc))
    pinned: dict[str, datetime] = {}
    for shard_id, checkpoint in sorted(writes.items(), key=lambda kv: kv[1].shard_end):  # pins first
        if store.load(shard_id) is not None:
            continue
        try:
            store.save(checkpoint.stamped(owner))
        except CheckpointConflict:
            continue  # another worker stored one first: it stands
        if checkpoint.timestamp is not None and not checkpoint.shard_end:
            pinned[shard_id] = checkpoint.timestamp
    if writes:
        log.info("first start of the app at LATEST: pinned %d open shards, %d closed shards are not read",
                 len(pinned), sum(c.shard_end for c in writes.values()))
    return pinned


def resolve_starts(store: CheckpointStore, reading: ReadingSettings, owner: str, shards: list[Shard],
                   fresh_pins: Mapping[str, datetime] | None = None) -> list[Resolved]:
    """Each shard's start by the lineage rule, with its stored checkpoint and the getter's first position.
    ``reading`` gives the start of a shard without a checkpoint; ``owner`` (the worker id) stamps the pins.

    Who calls: the spout, before it starts a shard's reader (in ``open()`` and when its shard sync hands it new
    shards, a child only once its parents ended). The checkpoints of the shards and of their parents (listed or
    not) are read once, and every shard is decided from that state: a child without a checkpoint starts where its
    parents' stored checkpoints hand it down (their pin, or ``TRIM_HORIZON`` when the app read them). A ``LATEST``
    or configured ``AT_TIMESTAMP`` start is then pinned and written to the store at once, so that a crash before
    the shard's first checkpoint resumes at the same place. ``fresh_pins`` are the pins
    :func:`record_first_start` wrote as this spout opened: a shard still at one of them takes its iterator at
    ``LATEST`` as well (see below).
    """
    stored: dict[str, Checkpoint] = {}
    for shard_id in sorted({s.shard_id for s in shards} | {p for s in shards for p in s.parents}):
        checkpoint = store.load(shard_id)
        if checkpoint is not None:
            stored[shard_id] = checkpoint
    starts = start_positions({s.shard_id: s.parents for s in shards}, stored, reading.initial_position,
                             reading.initial_timestamp, {s.shard_id for s in shards if s.closed})
    now = datetime.now(timezone.utc)
    out: list[Resolved] = []
    for shard in shards:
        start, checkpoint = starts[shard.shard_id], stored.get(shard.shard_id)
        if start.finished:
            out.append((shard, start, checkpoint, None))
            continue
        first = start.position
        fresh = (fresh_pins or {}).get(shard.shard_id)
        if fresh is not None and checkpoint is not None and checkpoint.sequence_number is None \
                and not checkpoint.shard_end and checkpoint.timestamp == fresh:
            first = LATEST  # pinned a moment ago as this spout opened: as below
        elif start.needs_pin:
            latest = start.position == LATEST
            start, checkpoint = _pin(store, owner, shard.shard_id, start, now)
            if latest and start.position.kind is Kind.AT_TIMESTAMP:
                # The pin (a second back) is for a restart. This run takes its iterator at LATEST while the spout
                # opens: that is what LATEST means, and an AT_TIMESTAMP that no record has reached yet is what
                # kinesalite never answers.
                first = LATEST
            else:
                first = start.position
        out.append((shard, start, checkpoint, first))
    return out


def _pin(store: CheckpointStore, owner: str, shard_id: str, start: ShardStart, now: datetime
         ) -> tuple[ShardStart, Checkpoint | None]:
    """Store ``start`` pinned to a time as the shard's checkpoint; if another worker stored a checkpoint meanwhile,
    start from that one instead."""
    pinned = start.pin(now)
    checkpoint = Checkpoint.at(shard_id, pinned.position)
    try:
        store.save(checkpoint.stamped(owner))
    except CheckpointConflict:
        stored = store.load(shard_id)
        if stored is None:
            raise
        log.info("shard %s: another worker stored a checkpoint while this one pinned its start; using it", shard_id)
        return from_checkpoint(stored), stored
    return pinned, checkpoint
