"""The one position in a shard: where reading stands, how it is stored, and where the next read starts.

PURE: standard library and the project's value types only; no boto3, no kazoo, no pyspark. Every part of the
project that keeps a position (the spout's checkpoints, the lineage rule, the shard getter, the Structured
Streaming source's offsets and batch ends) keeps a :class:`Position`, so its order, its stored forms and the
iterator it asks Kinesis for are decided here once.

**The order** (KCL's sentinel checkpoints)::

    TRIM_HORIZON  <  AT_TIMESTAMP(t), by t  <  LATEST  <  AFTER(sequence, sub), by key  <  SHARD_END

``AFTER(sequence, sub)`` is the position after the user record ``sub`` of the Kinesis record ``sequence``;
``sub = WHOLE`` (:data:`kinesis_spout.records.WHOLE`) after the whole Kinesis record. ``SHARD_END`` is a closed
shard read to its end; it keeps the last key read (when any was) or what it hands down to the shard's children
when nothing was read (``LATEST``: closed before the app first started at ``LATEST``; ``AT_TIMESTAMP(t)``: closed
when its start was decided at ``t``, nothing after it). A plain end hands down ``TRIM_HORIZON``.

**Stored forms.** Two codecs, byte-compatible with the forms written before this module existed:

- the Spark offset string (:meth:`Position.encode`, :meth:`Position.parse`)::

      "49590338271490256608559"              AFTER(seq, WHOLE)
      "4959...8559:41"                       AFTER(seq, 41)
      "TRIM_HORIZON"  "LATEST"               the sentinels
      "AT_TIMESTAMP:<ISO-8601>"              AT_TIMESTAMP(t)
      "SHARD_END:<seq>"  "SHARD_END"         an end, with or without the last record read
      "SHARD_END@LATEST"                     an end handing LATEST down
      "SHARD_END@AT_TIMESTAMP:<ISO-8601>"    an end handing AT_TIMESTAMP(t) down

- the position fields of a stored checkpoint (:func:`to_checkpoint_fields`, :func:`from_checkpoint_fields`):
  ``sequence_number``, ``sub_sequence_number``, ``shard_end``, ``reset_to``, ``timestamp``.

**Where a read starts.** :func:`iterator_args` maps a position to GetShardIterator's arguments and to the
sub-sequence numbers of the first record that were consumed already (inside a KPL aggregate the aggregate is read
again and its user records up to the position are skipped by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from enum import IntEnum
from typing import Any, Final, NamedTuple

from kinesis_spout.errors import CheckpointError
from kinesis_spout.records import WHOLE, SequenceKey

__all__ = ["AFTER_SEQUENCE_NUMBER", "AT_SEQUENCE_NUMBER", "AT_TIMESTAMP_NAME", "CheckpointFields", "ITERATOR_TYPES",
           "IteratorArgs", "Kind", "LATEST", "LATEST_NAME", "Position", "RESET_POSITIONS", "SHARD_END",
           "SHARD_END_NAME", "TRIM_HORIZON", "TRIM_HORIZON_NAME", "after", "after_record", "at_timestamp",
           "from_checkpoint_fields", "iterator_args", "shard_end", "to_checkpoint_fields"]

#: The names of GetShardIterator's ``ShardIteratorType`` (and of the sentinels in the stored forms), defined once.
TRIM_HORIZON_NAME: Final = "TRIM_HORIZON"
LATEST_NAME: Final = "LATEST"
AT_TIMESTAMP_NAME: Final = "AT_TIMESTAMP"
AT_SEQUENCE_NUMBER: Final = "AT_SEQUENCE_NUMBER"
AFTER_SEQUENCE_NUMBER: Final = "AFTER_SEQUENCE_NUMBER"
SHARD_END_NAME: Final = "SHARD_END"
ITERATOR_TYPES: Final = (TRIM_HORIZON_NAME, LATEST_NAME, AT_TIMESTAMP_NAME, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER)
#: The starts a checkpoint can hold instead of a sequence number (its ``reset_to``).
RESET_POSITIONS: Final = (TRIM_HORIZON_NAME, LATEST_NAME, AT_TIMESTAMP_NAME)


class Kind(IntEnum):
    """The kinds of position, in their order."""

    TRIM_HORIZON = 0
    AT_TIMESTAMP = 1
    LATEST = 2
    AFTER = 3
    SHARD_END = 4


def _utc(when: datetime) -> datetime:
    """``when``, read as UTC when it has no time zone (an aware time keeps its own, so it encodes as it came)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class Position:
    """A position in one shard (see the module docstring); immutable, hashable, ordered.

    Build one with the sentinels :data:`TRIM_HORIZON`, :data:`LATEST`, :data:`SHARD_END` and the functions
    :func:`at_timestamp`, :func:`after`, :func:`after_record`, :func:`shard_end`. ``key`` is the key of an
    ``AFTER`` (its ``sub_sequence`` ``WHOLE`` after the whole Kinesis record) or the last key an end read (its
    sub-sequence always ``WHOLE``); ``timestamp`` that of an ``AT_TIMESTAMP``; ``then`` what an end that read
    nothing hands down (``LATEST`` or an ``AT_TIMESTAMP``; None: ``TRIM_HORIZON``). Raises ``ValueError`` for a
    combination no position has.
    """

    kind: Kind
    key: SequenceKey | None = None
    timestamp: datetime | None = None
    then: Position | None = None

    def __post_init__(self) -> None:
        kind, key = self.kind, self.key
        if self.timestamp is not None:
            object.__setattr__(self, "timestamp", _utc(self.timestamp))
        if (kind is Kind.AT_TIMESTAMP) != (self.timestamp is not None):
            raise ValueError(f"{kind.name}: a timestamp belongs to AT_TIMESTAMP and nothing else")
        if key is not None:
            if kind not in (Kind.AFTER, Kind.SHARD_END):
                raise ValueError(f"{kind.name} has no sequence number")
            sequence, sub = key
            if not (isinstance(sequence, int) and isinstance(sub, int)) or sequence < 0 or not 0 <= sub <= WHOLE:
                raise ValueError(f"bad key {tuple(key)!r}: expected ints, the sub-sequence number in 0 .. WHOLE")
            if kind is Kind.SHARD_END and sub != WHOLE:
                object.__setattr__(self, "key", SequenceKey(sequence, WHOLE))  # an end consumed all of its record
        elif kind is Kind.AFTER:
            raise ValueError("AFTER needs a key")
        if self.then is not None:
            if kind is not Kind.SHARD_END or key is not None or self.then.kind not in (Kind.LATEST,
                                                                                        Kind.AT_TIMESTAMP):
                raise ValueError("only an end that read nothing hands down a start, LATEST or AT_TIMESTAMP")

    # -- order -------------------------------------------------------------------------------------------------

    def _order(self) -> tuple[Any, ...]:
        if self.kind is Kind.AT_TIMESTAMP:
            return (self.kind, self.timestamp)
        if self.kind is Kind.AFTER:
            return (self.kind, self.key)
        if self.kind is Kind.SHARD_END:
            return (self.kind, self.key is not None, self.key or (0, 0),
                    self.then._order() if self.then is not None else (-1,))
        return (self.kind,)

    def __lt__(self, other: Position) -> bool:
        return self._order() < other._order()

    def __le__(self, other: Position) -> bool:
        return self._order() <= other._order()

    def __gt__(self, other: Position) -> bool:
        return self._order() > other._order()

    def __ge__(self, other: Position) -> bool:
        return self._order() >= other._order()

    # -- what a position says -----------------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """A closed shard read to its end (nothing more to read)."""
        return self.kind is Kind.SHARD_END

    @property
    def unresolved(self) -> bool:
        """A symbolic ``LATEST``, not pinned to a time yet."""
        return self.kind is Kind.LATEST

    @property
    def inside_aggregate(self) -> bool:
        """After some user records of a KPL aggregate, not all: the next read starts ``AT_SEQUENCE_NUMBER``."""
        return self.kind is Kind.AFTER and self.key is not None and self.key.sub_sequence != WHOLE

    @property
    def sequence_number(self) -> str | None:
        """The sequence number of the last record consumed, in Kinesis' string form (None when none was)."""
        return None if self.key is None else str(self.key.sequence)

    @property
    def last(self) -> SequenceKey | None:
        """The last user record consumed (``(sequence, WHOLE)`` for a whole Kinesis record); None when nothing was.
        A record ``r`` was consumed when ``r.key <= last``."""
        return self.key

    def is_beyond(self, other: Position) -> bool:
        """True when this position has consumed a record ``other`` has not."""
        mine, theirs = self.key, other.key
        return mine is not None and (theirs is None or mine > theirs)

    def finished(self) -> Position:
        """This position as the end of a closed shard read to its end. What it hands down: ``LATEST`` from a
        ``LATEST`` (or an end handing it down), else ``TRIM_HORIZON`` (the children were created while the shard
        was read, so a start time taken by a clock ahead of Kinesis' skips none of their records)."""
        if self.key is not None:
            return Position(Kind.SHARD_END, self.key)
        if self.kind is Kind.LATEST or (self.then is not None and self.then.kind is Kind.LATEST):
            return Position(Kind.SHARD_END, then=LATEST)
        return SHARD_END

    def describe(self) -> str:
        """The position in words, for logs: ``after SEQ``, ``at SEQ, after its user record SUB``,
        ``AT_TIMESTAMP <ISO-8601>``, or the sentinel's name."""
        if self.kind is Kind.AFTER and self.key is not None:
            if self.key.sub_sequence == WHOLE:
                return f"after {self.key.sequence}"
            return f"at {self.key.sequence}, after its user record {self.key.sub_sequence}"
        if self.timestamp is not None:
            return f"{self.kind.name} {self.timestamp.isoformat()}"
        return self.kind.name

    def __repr__(self) -> str:
        return f"Position({self.encode()})"

    # -- the Spark offset string form -------------------------------------------------------------------------

    def encode(self) -> str:
        """The Spark offset string form (the module docstring's table)."""
        kind, key = self.kind, self.key
        if kind is Kind.AFTER and key is not None:
            return str(key.sequence) if key.sub_sequence == WHOLE else f"{key.sequence}:{key.sub_sequence}"
        if kind is Kind.AT_TIMESTAMP and self.timestamp is not None:
            return f"{AT_TIMESTAMP_NAME}:{self.timestamp.isoformat()}"
        if kind is Kind.SHARD_END:
            if key is not None:
                return f"{SHARD_END_NAME}:{key.sequence}"
            if self.then is not None:
                return f"{SHARD_END_NAME}@{self.then.encode()}"
            return SHARD_END_NAME
        return kind.name

    @classmethod
    def parse(cls, text: Any, where: str = "offset") -> Position:
        """Read the offset string form back; anything else is a ``CheckpointError`` naming ``where``."""
        if not isinstance(text, str):
            raise CheckpointError(f"{where}: a shard position must be a string, got {text!r}")
        if text.isdigit():
            return after(text)
        if text == TRIM_HORIZON_NAME:
            return TRIM_HORIZON
        if text == LATEST_NAME:
            return LATEST
        if text == SHARD_END_NAME:
            return SHARD_END
        if text.startswith(f"{SHARD_END_NAME}@"):
            try:
                handed = cls.parse(text[len(SHARD_END_NAME) + 1:], where)
            except CheckpointError:
                handed = None
            if handed is not None and handed.kind in (Kind.LATEST, Kind.AT_TIMESTAMP):
                return shard_end(then=handed)
        head, _, tail = text.partition(":")
        if head.isdigit() and tail.isdigit():
            return after(head, int(tail))
        if head == SHARD_END_NAME and tail.isdigit():
            return shard_end(SequenceKey(int(tail), WHOLE))
        if head == AT_TIMESTAMP_NAME and tail:
            try:
                return at_timestamp(datetime.fromisoformat(tail))
            except ValueError:
                pass
        raise CheckpointError(f"{where}: unreadable shard position {text!r}; expected a sequence number, "
                              f"<sequence number>:<sub-sequence number>, TRIM_HORIZON, LATEST, "
                              f"AT_TIMESTAMP:<ISO-8601>, SHARD_END[:<sequence number>], SHARD_END@LATEST or "
                              f"SHARD_END@AT_TIMESTAMP:<ISO-8601>")


#: Nothing consumed; read from the shard's oldest record.
TRIM_HORIZON: Final = Position(Kind.TRIM_HORIZON)
#: Nothing consumed; read what arrives from now on (a start to pin to a time before anything is delivered).
LATEST: Final = Position(Kind.LATEST)
#: A closed shard read to its end, nothing known of its last record; its children start at ``TRIM_HORIZON``.
SHARD_END: Final = Position(Kind.SHARD_END)


def at_timestamp(when: datetime) -> Position:
    """Nothing consumed; read the records that arrived at ``when`` or later (a naive time is read as UTC)."""
    return Position(Kind.AT_TIMESTAMP, timestamp=when)


def after(sequence_number: str | int, sub_sequence_number: int | None = None) -> Position:
    """After the record ``sequence_number``: all of it (``sub_sequence_number`` None or ``WHOLE``), or its user
    records up to ``sub_sequence_number``. Raises ``ValueError`` for a sequence number that is not decimal digits."""
    if isinstance(sequence_number, str):
        key = SequenceKey.parse(sequence_number, None)
    else:
        key = SequenceKey(sequence_number)
    sub = WHOLE if sub_sequence_number is None else sub_sequence_number
    return Position(Kind.AFTER, SequenceKey(key.sequence, sub))


def after_record(key: SequenceKey, whole: bool) -> Position:
    """After the (user) record ``key``: after its whole Kinesis record when ``whole`` (a plain record, or the last
    user record of an aggregate that is taken), else inside its aggregate."""
    return Position(Kind.AFTER, SequenceKey(key.sequence, WHOLE if whole else key.sub_sequence))


def shard_end(last: SequenceKey | None = None, then: Position | None = None) -> Position:
    """The end of a closed shard read to its end: ``last`` is its last record read (None when none was), ``then``
    what an end that read nothing hands down to the children (``LATEST``, an ``AT_TIMESTAMP``; None:
    ``TRIM_HORIZON``)."""
    return Position(Kind.SHARD_END, last, then=then)


# -- the checkpoint fields ---------------------------------------------------------------------------------------


class CheckpointFields(NamedTuple):
    """The position fields of a stored checkpoint, as its JSON document holds them."""

    sequence_number: str | None
    sub_sequence_number: int | None
    shard_end: bool
    reset_to: str | None
    timestamp: datetime | None


def to_checkpoint_fields(position: Position) -> CheckpointFields:
    """The checkpoint fields that store ``position``."""
    kind, key = position.kind, position.key
    if kind is Kind.AFTER and key is not None:
        sub = None if key.sub_sequence == WHOLE else key.sub_sequence
        return CheckpointFields(str(key.sequence), sub, False, None, None)
    if kind is Kind.SHARD_END:
        if key is not None:
            return CheckpointFields(str(key.sequence), None, True, None, None)
        then = position.then
        if then is None:
            return CheckpointFields(None, None, True, None, None)
        return CheckpointFields(None, None, True, then.kind.name, then.timestamp)
    return CheckpointFields(None, None, False, kind.name, position.timestamp)


def from_checkpoint_fields(fields: CheckpointFields, where: str = "checkpoint") -> Position:
    """The position stored checkpoint fields stand for; ``CheckpointError`` naming ``where`` when they stand for
    none (a ``reset_to`` with a sequence number, an ``AT_TIMESTAMP`` without a time, nothing at all ...)."""
    seq, sub, ended, reset_to, timestamp = fields
    if seq is not None and (not isinstance(seq, str) or not seq.isdigit()):
        raise CheckpointError(f"checkpoint at {where} has a non-numeric sequence_number {seq!r}")
    if reset_to is not None and (reset_to not in RESET_POSITIONS or seq is not None):
        raise CheckpointError(f"checkpoint at {where} has a bad reset_to {reset_to!r}: expected one of "
                              f"{', '.join(RESET_POSITIONS)} and no sequence_number")
    if (reset_to == AT_TIMESTAMP_NAME) != (timestamp is not None):
        stamp = timestamp.isoformat() if isinstance(timestamp, datetime) else timestamp
        raise CheckpointError(f"checkpoint at {where}: reset_to AT_TIMESTAMP needs a timestamp, and a timestamp "
                              f"needs reset_to AT_TIMESTAMP (got reset_to {reset_to!r}, timestamp {stamp!r})")
    if sub is not None and (isinstance(sub, bool) or not isinstance(sub, int) or not 0 <= sub < WHOLE):
        raise CheckpointError(f"checkpoint at {where} has a bad sub_sequence_number {sub!r} (expected a user "
                              f"record's number, 0 .. {WHOLE - 1})")
    start = None if reset_to is None else (at_timestamp(timestamp) if timestamp is not None
                                           else LATEST if reset_to == LATEST_NAME else TRIM_HORIZON)
    if ended:
        if seq is not None:
            return shard_end(SequenceKey(int(seq), WHOLE))
        return shard_end(then=start if start is not None and start.kind is not Kind.TRIM_HORIZON else None)
    if seq is not None:
        return after(seq, sub)
    if start is None:
        raise CheckpointError(f"checkpoint at {where} has no sequence_number")
    return start


# -- where a read starts -----------------------------------------------------------------------------------------


class IteratorArgs(NamedTuple):
    """GetShardIterator's arguments for a position, and ``skip_through``: the sub-sequence numbers up to which the
    user records of the first record read were consumed already (None: skip nothing)."""

    shard_iterator_type: str
    starting_sequence_number: str | None = None
    timestamp: datetime | None = None
    skip_through: int | None = None

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``get_shard_iterator`` (without the stream and the shard)."""
        out: dict[str, Any] = {"ShardIteratorType": self.shard_iterator_type}
        if self.starting_sequence_number is not None:
            out["StartingSequenceNumber"] = self.starting_sequence_number
        if self.timestamp is not None:
            out["Timestamp"] = self.timestamp
        return out

    def describe(self) -> str:
        """The iterator in words, for logs and errors."""
        if self.starting_sequence_number is not None:
            return f"{self.shard_iterator_type} {self.starting_sequence_number}"
        if self.timestamp is not None:
            return f"{self.shard_iterator_type} {self.timestamp.isoformat()}"
        return self.shard_iterator_type


def iterator_args(position: Position) -> IteratorArgs | None:
    """Where a read after ``position`` starts; None for ``SHARD_END`` (nothing is left to read).

    ``AFTER(seq, WHOLE)`` reads ``AFTER_SEQUENCE_NUMBER seq``; ``AFTER(seq, sub)`` inside an aggregate reads
    ``AT_SEQUENCE_NUMBER seq`` again and skips its user records up to ``sub``; the sentinels read from there.
    """
    kind, key = position.kind, position.key
    if kind is Kind.AFTER and key is not None:
        if key.sub_sequence == WHOLE:
            return IteratorArgs(AFTER_SEQUENCE_NUMBER, str(key.sequence))
        return IteratorArgs(AT_SEQUENCE_NUMBER, str(key.sequence), skip_through=key.sub_sequence)
    if kind is Kind.AT_TIMESTAMP:
        return IteratorArgs(AT_TIMESTAMP_NAME, timestamp=position.timestamp)
    if kind is Kind.SHARD_END:
        return None
    return IteratorArgs(kind.name)
