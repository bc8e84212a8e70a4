"""When a spout has caught up: every shard it owned when it opened read up to the tip it had then, and every record
read up to there done (acked, or dead-lettered and written).

A shard's tip is where its reader first found it (:func:`~kinesis_spout.kinesis.retrieval.reader.tip_of`): an
empty read at the tip, or the first record that arrived more than :data:`TIP_MARGIN` after ``open()`` (so a busy
stream cannot keep the spout from catching up). A shard that was closed when the spout opened must be read to its
end and finished; children of a reshard that were listed then are waited for (they start once their parents finished);
shards made by a reshard after ``open()`` hold only records that arrived after it and are not waited for.

Who calls: :meth:`KinesisSpout.caught_up() <kinesis_spout.spout.facade.KinesisSpout.caught_up>`, with the registry's
lock held (it reads the shards' trackers and phases).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Collection, Mapping

from kinesis_spout.spout.shards import ShardLifecycle, ShardPhase

__all__ = ["TIP_MARGIN", "caught_up", "lagging_shards", "shard_caught_up"]

#: Records that arrived up to this long after ``open()`` (by Kinesis' clock) count as before the tip: an allowance
#: for clock skew between this machine and Kinesis, so nothing present at the start is left out (the Spark source's
#: Trigger.AvailableNow allows as much).
TIP_MARGIN = timedelta(seconds=2)


def shard_caught_up(state: ShardLifecycle, closed_at_open: bool) -> bool:
    """Whether one shard is read to its tip and every record up to there is done (see the module)."""
    if state.phase in (ShardPhase.FINISHED, ShardPhase.HANDED_BACK, ShardPhase.DROPPED):
        return True  # read to its end and done; or no longer this spout's to read
    if closed_at_open:
        return False  # a closed shard is caught up once read to its end (finished)
    tip = state.reader.tip
    if tip is None:
        return False
    if tip.key is None:
        return True  # nothing was read before the tip
    checkpoint = state.tracker.checkpoint  # every record at or below it is done, and records are emitted in order
    return checkpoint is not None and checkpoint >= tip.key


def lagging_shards(wanted: Mapping[str, bool], shards: Mapping[str, ShardLifecycle],
                   done: Collection[str]) -> list[str]:
    """The shards of ``wanted`` (shard id -> closed when the spout opened) not caught up yet: read now and not
    caught up, or not read yet (waiting for their parents) and not finished earlier (``done``: shard end stored)."""
    out = []
    for shard_id, closed in wanted.items():
        state = shards.get(shard_id)
        if state is None:
            if shard_id not in done:
                out.append(shard_id)
        elif not shard_caught_up(state, closed):
            out.append(shard_id)
    return out


def caught_up(wanted: Mapping[str, bool], shards: Mapping[str, ShardLifecycle], done: Collection[str]) -> bool:
    """True when :func:`lagging_shards` is empty."""
    return not lagging_shards(wanted, shards, done)
