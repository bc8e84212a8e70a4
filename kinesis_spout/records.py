"""Value types: the sequence key, the record read from Kinesis, message ids and the tuple the spout emits.

Kinesis sequence numbers are decimal strings of up to 56 digits, increasing within a shard but sparse: they are
compared as Python ints, never as strings, and ``n + 1`` is never assumed to be the next record.

A key also has a *rank*: the key as one int, ``sequence * RANK_BASE + sub_sequence``, which orders and compares
as the key does. The in-flight tracker works on ranks: one is built from a sequence-number string with one
``int()`` and one multiplication (:func:`rank_of`, :func:`parse_message_id_rank`), cheaper than a key object, and
it hashes and compares faster than a tuple.
"""

from __future__ import annotations

from datetime import datetime
from operator import add, itemgetter
from typing import Any, NamedTuple, Sequence

#: The sub-sequence of a key that stands after every user record of its Kinesis record (a checkpoint or an offset
#: that consumed the whole record): greater than any real sub-sequence number.
WHOLE = 1 << 62

#: ``rank = sequence * RANK_BASE + sub_sequence``. RANK_BASE exceeds every sub-sequence number (``WHOLE`` included),
#: so ranks order as keys do. It is no power of two on purpose: sequence numbers are binary fields written in decimal,
#: so those of one shard differ by multiples of a large power of two (2**80 on kinesalite), and Python hashes an int
#: by its value modulo 2**61 - 1: shifted into place, the ranks of one shard would share their low hash bits and pile
#: up on one dict slot. RANK_BASE modulo 2**61 - 1 is the odd number nearest to 0.618 (the golden ratio's fraction)
#: of that modulus, so multiplying by it spreads the hashes evenly whatever the step (Fibonacci hashing).
RANK_BASE = (1 << 64) + 0x13C6EF372FE94FF9
_SUB_LIMIT = 1 << 64  # a rank holds sub-sequence numbers 0 .. 2**64 - 1


class SequenceKey(NamedTuple):
    """The order of a record within its shard: ``(sequence number, sub-sequence number)`` as ints.

    Sub-sequence numbers belong to de-aggregated KPL records; a plain record has sub-sequence 0.
    """

    sequence: int
    sub_sequence: int = 0

    @classmethod
    def parse(cls, sequence_number: str, sub_sequence_number: int | None = None) -> "SequenceKey":
        """Build a key from Kinesis' string form; raises ``ValueError`` naming the bad value."""
        if not isinstance(sequence_number, str) or not sequence_number.isdigit():
            raise ValueError(f"sequence number must be a string of decimal digits, got {sequence_number!r}")
        return cls(int(sequence_number), sub_sequence_number or 0)

    @property
    def sequence_number(self) -> str:
        """The sequence number in Kinesis' string form."""
        return str(self.sequence)

    @property
    def rank(self) -> int:
        """The key as one int that orders and compares as the key does: ``sequence * RANK_BASE + sub_sequence``.
        Raises ``TypeError`` for parts that are not ints, ``ValueError`` for a negative part or a sub-sequence
        number of 2**64 or more (no Kinesis key has one)."""
        sequence, sub = self
        if not (isinstance(sequence, int) and isinstance(sub, int)):
            raise TypeError(f"no rank for key {tuple(self)!r}: its sequence and sub-sequence numbers must be ints")
        if sequence < 0 or not 0 <= sub < _SUB_LIMIT:
            raise ValueError(f"no rank for key {tuple(self)!r}: the sequence number must be >= 0 and the "
                             f"sub-sequence number in 0 .. 2**64 - 1")
        return sequence * RANK_BASE + sub

    @classmethod
    def from_rank(cls, rank: int) -> "SequenceKey":
        """The key of a rank (the inverse of :attr:`rank`)."""
        sequence, sub = divmod(rank, RANK_BASE)
        return cls(sequence, sub)


class Record(NamedTuple):
    """One Kinesis record as the spout read it (immutable).

    ``key`` is derived from ``sequence_number`` and ``sub_sequence_number`` once, when the record is read. A user
    record of a KPL aggregate has ``sub_sequence_number`` 0..n-1 and ``aggregated`` n (the user records in its
    Kinesis record; when user records of other shards were dropped, one more than the last kept user record's
    sub-sequence number, so that a checkpoint after it marks the Kinesis record done); a plain record has
    ``sub_sequence_number`` None and ``aggregated`` 0.

    A named tuple rather than a frozen dataclass: one is built per record read, and a tuple is built in a fifth of
    the time (the readers build it with ``tuple.__new__``). It compares equal to a tuple of the same fields.
    """

    shard_id: str
    sequence_number: str
    sub_sequence_number: int | None
    partition_key: str
    data: bytes
    approximate_arrival_timestamp: datetime | None
    key: SequenceKey
    aggregated: int = 0

    @property
    def message_id(self) -> str:
        """``"{shard_id}:{sequence_number}"``, plus ``":{sub_sequence_number}"`` for de-aggregated records (but
        the first: it is the same as :func:`message_id` of the record's key)."""
        sub = self.sub_sequence_number
        if sub:
            return f"{self.shard_id}:{self.sequence_number}:{sub}"
        return f"{self.shard_id}:{self.sequence_number}"

    @property
    def size(self) -> int:
        """Bytes the record counts for in buffers and in-flight limits: data plus partition key."""
        return len(self.data) + len(self.partition_key)

    @property
    def rank(self) -> int:
        """``key`` as a rank (:attr:`SequenceKey.rank`), the form the in-flight tracker takes fastest; unchecked
        (the key of a record read from Kinesis always has one)."""
        key = self.key
        return key[0] * RANK_BASE + key[1]


_DATA, _PARTITION_KEY = itemgetter(4), itemgetter(3)  # Record.data, Record.partition_key


def record_sizes(records: Sequence[Record]) -> list[int]:
    """:attr:`Record.size` of each record, computed in C (``map``) rather than one property call a record: for the
    readers and the emitter, which size thousands of records at a time."""
    return list(map(add, map(len, map(_DATA, records)), map(len, map(_PARTITION_KEY, records))))


def records_bytes(records: Sequence[Record]) -> int:
    """The sum of :attr:`Record.size` over ``records`` (see :func:`record_sizes`)."""
    return sum(map(len, map(_DATA, records))) + sum(map(len, map(_PARTITION_KEY, records)))


def message_id(shard_id: str, key: SequenceKey) -> str:
    """The message id of the record ``key`` of ``shard_id``: ``"shard:seq"`` or ``"shard:seq:sub"``."""
    if key.sub_sequence:
        return f"{shard_id}:{key.sequence}:{key.sub_sequence}"
    return f"{shard_id}:{key.sequence}"


def rank_of(sequence_number: str, sub_sequence_number: int = 0) -> int:
    """The rank (:attr:`SequenceKey.rank`) of a record, from Kinesis' string form of its sequence number: one
    ``int()``, no key object. The fast path of the tracker's callers, unchecked: for the strings Kinesis hands out
    (``ValueError`` for what ``int()`` refuses) and sub-sequence numbers in 0 .. 2**64 - 1."""
    return int(sequence_number) * RANK_BASE + sub_sequence_number


def parse_message_id(mid: str) -> tuple[str, SequenceKey]:
    """Split a message id into ``(shard_id, key)``; raises ``ValueError`` naming the malformed id."""
    parts = mid.split(":") if isinstance(mid, str) else []
    n = len(parts)
    if (n == 2 or n == 3) and parts[0]:
        seq = _number(parts[1])
        sub = _number(parts[2]) if n == 3 else 0
        if seq is not None and sub is not None:
            return parts[0], SequenceKey(seq, sub)
    raise _malformed(mid)


def parse_message_id_rank(mid: str) -> tuple[str, int]:
    """Split a message id into ``(shard_id, rank)`` (:attr:`SequenceKey.rank`), parsing each number once: the key
    the tracker takes, without a key object. Raises ``ValueError`` naming the malformed id, for the ids
    :func:`parse_message_id` refuses and for a sub-sequence number of 2**64 or more."""
    parts = mid.split(":") if isinstance(mid, str) else []
    n = len(parts)
    if n == 2 and parts[0]:
        text = parts[1]
        if text.isascii() and "_" not in text and text[:1].isdigit() and text[-1:].isdigit():  # _number, inlined
            try:
                return parts[0], int(text) * RANK_BASE
            except ValueError:
                pass
        elif (seq := _number(text)) is not None:
            return parts[0], seq * RANK_BASE
    elif n == 3 and parts[0]:
        seq, sub = _number(parts[1]), _number(parts[2])
        if seq is not None and sub is not None and sub < _SUB_LIMIT:
            return parts[0], seq * RANK_BASE + sub
    raise _malformed(mid)


def _number(text: str) -> int | None:
    """``int(text)`` if ``text.isdigit()`` and ``int()`` reads it, else None. Faster than ``isdigit`` (which looks
    at every character) for ASCII: there, a string whose first and last characters are digits, without "_", is all
    digits exactly when ``int()`` takes it."""
    if text.isascii():
        if "_" in text or not (text[:1].isdigit() and text[-1:].isdigit()):
            return None
    elif not text.isdigit():
        return None
    try:
        return int(text)
    except ValueError:  # ASCII with a non-digit inside, or a digit int() does not read (a superscript)
        return None


def _malformed(mid: object) -> ValueError:
    return ValueError(f"malformed message id {mid!r}: expected 'shardId:sequenceNumber[:subSequenceNumber]'")


class SpoutTuple(NamedTuple):
    """What ``KinesisSpout.next_tuple()`` emits.

    ``values`` is what the record scheme made of the record (Storm's tuple fields); ``attempt`` is 1 on first
    emission and grows by one each time a failed record is emitted again.
    """

    message_id: str
    record: Record
    values: Any
    attempt: int = 1
