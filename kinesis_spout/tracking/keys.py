"""Keys of the in-flight tracker: a :class:`~kinesis_spout.records.SequenceKey` or its rank (the key as one int,
:attr:`SequenceKey.rank`). The tracker works on ranks inside; these functions convert at its edges. Pure."""

from __future__ import annotations

from kinesis_spout.records import RANK_BASE, SequenceKey

__all__ = ["NO_KEY", "Key", "key_of_rank", "rank_of_key"]

#: The rank standing for "no checkpoint": below every rank.
NO_KEY = -1
_SUB_LIMIT = 1 << 64  # sub-sequence numbers a rank holds: 0 .. 2**64 - 1

#: What the tracker's methods take as a key: a ``SequenceKey`` or its rank.
Key = SequenceKey | int


def rank_of_key(key: Key) -> int:
    """The rank of a key given as a ``SequenceKey`` (or any ``(sequence, sub-sequence)`` pair of ints), or as a
    rank. ``TypeError`` for anything else, ``ValueError`` for a pair that has no rank. Called by the tracker for
    every key that is not already an int."""
    if key.__class__ is SequenceKey or (isinstance(key, tuple) and len(key) == 2):
        sequence, sub = key
        if sequence.__class__ is int and sub.__class__ is int and sequence >= 0 and 0 <= sub < _SUB_LIMIT:
            return sequence * RANK_BASE + sub
        return SequenceKey(sequence, sub).rank  # raises the error naming the bad part
    if isinstance(key, int):
        return int(key)
    raise TypeError(f"a key is a SequenceKey or its rank (an int), got {key!r}")


def key_of_rank(rank: int) -> SequenceKey:
    """The ``SequenceKey`` of a rank: how the tracker hands keys back."""
    sequence, sub = divmod(rank, RANK_BASE)
    return SequenceKey(sequence, sub)
