"""KPL checkpoint assembly: where a checkpoint stands when its record is a user record inside a KPL aggregate.

Pure functions over one shard's bookkeeping (``aggregates``: Kinesis sequence number -> how many user records its
aggregate holds, for the aggregates read and not yet behind the checkpoint). Callers hold the spout's lock, which
guards that dict (it belongs to the shard's :class:`~kinesis_spout.spout.shards.ShardLifecycle`).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Iterable

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.records import Record, SequenceKey

__all__ = ["checkpoint_text", "note_aggregates", "stored_sub"]

_KEY, _AGGREGATED, _SEQUENCE = itemgetter(6), itemgetter(7), itemgetter(0)  # Record.key, .aggregated, key.sequence


def note_aggregates(aggregates: dict[int, int], records: Iterable[Record]) -> None:
    """Remember how many user records each KPL aggregate among ``records`` holds (the emitter calls it, lock held,
    before the records go in flight): the checkpoint needs it to know when an aggregate is done as a whole."""
    # the user records of one aggregate share their sequence number and their count: one entry per Kinesis record,
    # in read order, made in C (``zip``/``map``), then set where not known yet (a plain record counts 0: skipped)
    records = records if isinstance(records, (list, tuple)) else list(records)
    for sequence, count in dict(zip(map(_SEQUENCE, map(_KEY, records)), map(_AGGREGATED, records))).items():
        if count:
            aggregates.setdefault(sequence, count)


def stored_sub(aggregates: dict[int, int], restored: Checkpoint | None, key: SequenceKey) -> int | None:
    """The sub-sequence number a checkpoint at ``key`` stores (lock held): the user record's inside a KPL aggregate
    that is not done yet (even 0: the restart re-reads the aggregate and skips up to it), None when the Kinesis
    record is done as a whole (a plain record, or an aggregate's last user record). Forgets the aggregates behind
    the checkpoint. ``restored`` is the stored checkpoint the shard started from: a checkpoint still standing on it,
    inside an aggregate not read since the start, keeps its sub-sequence."""
    while aggregates:
        first = next(iter(aggregates))
        if first >= key.sequence:
            break
        del aggregates[first]
    size = aggregates.get(key.sequence)
    if size is None:
        return restored.sub_sequence_number if restored is not None and restored.key == key else None
    if key.sub_sequence >= size - 1:
        return None
    return key.sub_sequence


def checkpoint_text(aggregates: dict[int, int], restored: Checkpoint | None, key: SequenceKey | None) -> str | None:
    """The checkpoint as the shard's figures show it: the sequence number, ``"SEQ:SUB"`` inside an aggregate."""
    if key is None:
        return None
    sub = stored_sub(aggregates, restored, key)
    return str(key.sequence) if sub is None else f"{key.sequence}:{sub}"
