"""Value types: the sequence key, the record read from Kinesis, message ids and the tuple the spout emits.

Kinesis sequence numbers are decimal strings of up to 56 digits, increasing within a shard but sparse: they are
compared as Python ints, never as strings, and ``n + 1`` is never assumed to be the next record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

#: The sub-sequence of a key that stands after every user record of its Kinesis record (a checkpoint or an offset
#: that consumed the whole record): greater than any real sub-sequence number.
WHOLE = 1 << 62


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


@dataclass(frozen=True, slots=True)
class Record:
    """One Kinesis record as the spout read it.

    ``key`` is derived from ``sequence_number`` and ``sub_sequence_number`` once, when the record is read. A user
    record of a KPL aggregate has ``sub_sequence_number`` 0..n-1 and ``aggregated`` n (the user records in its
    Kinesis record); a plain record has ``sub_sequence_number`` None and ``aggregated`` 0.
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
        """``"{shard_id}:{sequence_number}"``, plus ``":{sub_sequence_number}"`` for de-aggregated records."""
        return message_id(self.shard_id, self.key)

    @property
    def size(self) -> int:
        """Bytes the record counts for in buffers and in-flight limits: data plus partition key."""
        return len(self.data) + len(self.partition_key)


def message_id(shard_id: str, key: SequenceKey) -> str:
    """The message id of the record ``key`` of ``shard_id``: ``"shard:seq"`` or ``"shard:seq:sub"``."""
    if key.sub_sequence:
        return f"{shard_id}:{key.sequence}:{key.sub_sequence}"
    return f"{shard_id}:{key.sequence}"


def parse_message_id(mid: str) -> tuple[str, SequenceKey]:
    """Split a message id into ``(shard_id, key)``; raises ``ValueError`` naming the malformed id."""
    parts = mid.split(":") if isinstance(mid, str) else []
    if len(parts) not in (2, 3) or not parts[0] or not all(p.isdigit() for p in parts[1:]):
        raise ValueError(f"malformed message id {mid!r}: expected 'shardId:sequenceNumber[:subSequenceNumber]'")
    sub = int(parts[2]) if len(parts) == 3 else 0
    return parts[0], SequenceKey(int(parts[1]), sub)


class SpoutTuple(NamedTuple):
    """What ``KinesisSpout.next_tuple()`` emits.

    ``values`` is what the record scheme made of the record (Storm's tuple fields); ``attempt`` is 1 on first
    emission and grows by one each time a failed record is emitted again.
    """

    message_id: str
    record: Record
    values: Any
    attempt: int = 1
