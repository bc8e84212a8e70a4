"""KPL aggregated records, written: many user records packed into one Kinesis record.

The wire format is the one :mod:`kinesis_spout.kinesis.aggregation` decodes (the magic ``F3 89 9A C2``, a protobuf
``AggregatedRecord``, its MD5 digest); the Kinesis Client Library, aws-kinesis-agg and this package's readers
de-aggregate it record for record. Each key is stored once in its table, each user record refers to it by index.

PURE: standard library only. :class:`AggregateBuilder` keeps the size of the aggregate it would produce as user
records are added, so a caller can stop before Kinesis' 1 MiB record limit; :meth:`AggregateBuilder.build` returns
the bytes. The aggregate's own partition key and explicit hash key (what routes it to a shard) are its first user
record's partition key and hash key (:func:`~kinesis_spout.kinesis.aggregation.hash_key`), so it lands in the shard
of that user record; a caller groups user records by shard (:mod:`kinesis_spout.kinesis.writing.routing`) so that every
user record of an aggregate belongs to that shard.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from kinesis_spout.kinesis.aggregation import MAGIC, hash_key
from kinesis_spout.kinesis.writing.limits import MAX_PARTITION_KEY_LENGTH, MAX_RECORD_BYTES, key_length

__all__ = ["AggregateBuilder", "MAX_AGGREGATE_BYTES"]

#: Kinesis' limit on one record (data plus partition key), which an aggregate must keep too.
MAX_AGGREGATE_BYTES = MAX_RECORD_BYTES
_FRAME = len(MAGIC) + 16  # the magic before the message, the MD5 digest after it


_ONE_BYTE = [bytes((v,)) for v in range(0x80)]


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_len(value: int) -> int:
    return (value.bit_length() + 6) // 7 or 1


def _check_key(partition_key: str, utf8_len: int) -> None:
    """ValueError when a partition key is empty or longer than Kinesis takes (:func:`key_length`; a key of at most
    256 UTF-8 bytes is short enough whatever it holds, so only longer ones are measured)."""
    if utf8_len == 0 or (utf8_len > MAX_PARTITION_KEY_LENGTH and key_length(partition_key) > MAX_PARTITION_KEY_LENGTH):
        raise ValueError(f"partition key of {key_length(partition_key)} UTF-16 code units: Kinesis takes 1 to "
                         f"{MAX_PARTITION_KEY_LENGTH} (validate user records first: "
                         f"kinesis_spout.kinesis.writing.putter.entry_problem)")


def _field_len(payload: int) -> int:
    """Bytes of a length-delimited field of ``payload`` bytes (one-byte tag, varint length, payload)."""
    return 1 + ((payload.bit_length() + 6) // 7 or 1) + payload


class AggregateBuilder:
    """User records collected for one aggregate, and the size of the Kinesis record they would make.

    Who calls: one writer thread (no lock). ``add`` appends a user record; ``size_with`` says what the record's size
    (data plus the aggregate's partition key, as Kinesis counts it) would be with one more; ``fill`` adds user
    records from a list for as long as the record stays within a limit (the writers' loop, without a call per
    record); ``build`` returns the aggregate's data, partition key and explicit hash key. A partition key Kinesis
    would refuse (empty, over 256 UTF-16 code units) raises ValueError before the record is added, so neither an
    aggregate's own key (its first user record's) nor a key of its table is one Kinesis or a de-aggregating reader
    refuses; explicit hash keys are validated by the caller (a decimal number).
    """

    def __init__(self) -> None:
        self._pks: dict[str, int] = {}
        self._ehks: dict[str, int] = {}
        self._records: list[tuple[int, int | None, bytes, int]] = []  # key indexes, data, the record's body length
        self._message = 0  # bytes of the AggregatedRecord message so far
        self._outer: tuple[str, str] | None = None  # the aggregate's partition key and explicit hash key
        self._outer_len = 0  # UTF-8 bytes of the aggregate's partition key

    def __len__(self) -> int:
        return len(self._records)

    def _added(self, partition_key: str, explicit_hash_key: str | None, data: bytes) -> tuple[int, int]:
        """Bytes the message grows by with this user record, and the length of the record's body."""
        grow = 0
        pk_index = self._pks.get(partition_key)
        if pk_index is None:
            pk_index = len(self._pks)
            n = len(partition_key.encode("utf-8"))
            _check_key(partition_key, n)
            grow += _field_len(n)
        body = 1 + _varint_len(pk_index) + _field_len(len(data))
        if explicit_hash_key is not None:
            ehk_index = self._ehks.get(explicit_hash_key)
            if ehk_index is None:
                ehk_index = len(self._ehks)
                grow += _field_len(len(explicit_hash_key))
            body += 1 + _varint_len(ehk_index)
        return grow + _field_len(body), body

    def size_with(self, partition_key: str, explicit_hash_key: str | None, data: bytes) -> int:
        """The Kinesis record size (aggregate data plus its partition key) with this user record added."""
        outer = self._outer_len if self._outer is not None else len(partition_key.encode("utf-8"))
        return _FRAME + self._message + self._added(partition_key, explicit_hash_key, data)[0] + outer

    def add(self, partition_key: str, explicit_hash_key: str | None, data: bytes) -> None:
        """Append a user record (changes the tables, the records and the size)."""
        grow, body = self._added(partition_key, explicit_hash_key, data)
        self._message += grow
        pk_index = self._pks.setdefault(partition_key, len(self._pks))
        ehk_index = None if explicit_hash_key is None else self._ehks.setdefault(explicit_hash_key, len(self._ehks))
        self._records.append((pk_index, ehk_index, data, body))
        if self._outer is None:
            self._set_outer(partition_key, explicit_hash_key)

    def _set_outer(self, partition_key: str, explicit_hash_key: str | None) -> None:
        self._outer = (partition_key, str(hash_key(partition_key, explicit_hash_key)))
        self._outer_len = len(partition_key.encode("utf-8"))

    def fill(self, records: Sequence[tuple[str, str | None, bytes]], start: int, limit: int) -> int:
        """Add ``records[start:]`` (partition key, explicit hash key, data) in order for as long as the Kinesis record
        stays within ``limit`` bytes (as :meth:`size_with` counts them); returns the index of the first record not
        added (``start`` when even the first does not fit). The same aggregate as ``size_with``/``add`` record by
        record."""
        pks, ehks, out = self._pks, self._ehks, self._records
        message = self._message
        room = limit - _FRAME - (self._outer_len if self._outer is not None else 0)
        first = self._outer is None
        i = start
        for i in range(start, len(records)):  # noqa: B007 - the index after the loop is the answer
            pk, ehk, data = records[i]
            grow = 0
            pk_index = pks.get(pk)
            if pk_index is None:
                pk_index = len(pks)
                n = len(pk) if pk.isascii() else len(pk.encode("utf-8"))
                if n == 0 or n > MAX_PARTITION_KEY_LENGTH:
                    self._message = message
                    _check_key(pk, n)
                grow = 1 + ((n.bit_length() + 6) // 7 or 1) + n
            n = len(data)
            body = 2 + ((pk_index.bit_length() + 6) // 7 or 1) + ((n.bit_length() + 6) // 7 or 1) + n
            ehk_index = None
            if ehk is not None:
                ehk_index = ehks.get(ehk)
                if ehk_index is None:
                    ehk_index = len(ehks)
                    grow += 1 + ((len(ehk).bit_length() + 6) // 7 or 1) + len(ehk)
                body += 1 + ((ehk_index.bit_length() + 6) // 7 or 1)
            grow += 1 + ((body.bit_length() + 6) // 7 or 1) + body
            if first:
                room -= len(pk.encode("utf-8"))
            if message + grow > room:
                self._message = message
                return i
            message += grow
            if pk_index == len(pks):
                pks[pk] = pk_index
            if ehk is not None and ehk_index == len(ehks):
                ehks[ehk] = ehk_index
            out.append((pk_index, ehk_index, data, body))
            if first:
                first = False
                self._set_outer(pk, ehk)
        else:
            i = len(records)
        self._message = message
        return i

    def build(self) -> tuple[bytes, str, str]:
        """(data, partition key, explicit hash key) of the aggregate. Raises ValueError when it is empty (an
        aggregate without user records is not valid)."""
        if self._outer is None:
            raise ValueError("an aggregate needs at least one user record")
        parts: list[bytes] = []
        extend = parts.extend
        for table_tag, table in ((b"\x0a", self._pks), (b"\x12", self._ehks)):
            for key in table:  # dicts keep insertion order: the index of each key
                raw = key.encode("utf-8")
                extend((table_tag, _varint(len(raw)), raw))
        for pk_index, ehk_index, data, body in self._records:
            if ehk_index is None:
                extend((b"\x1a", _varint(body), b"\x08", _varint(pk_index), b"\x1a", _varint(len(data)), data))
            else:
                extend((b"\x1a", _varint(body), b"\x08", _varint(pk_index), b"\x10", _varint(ehk_index), b"\x1a",
                        _varint(len(data)), data))
        message = b"".join(parts)
        digest = hashlib.md5(message, usedforsecurity=False).digest()
        return b"".join((MAGIC, message, digest)), self._outer[0], self._outer[1]
