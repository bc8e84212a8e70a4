"""KPL aggregated records, written: many user records packed into one Kinesis record.

The wire format is the one :mod:`kinesis_spout.kinesis.aggregation` decodes (the magic ``F3 89 9A C2``, a protobuf
``AggregatedRecord``, its MD5 digest); the Kinesis Client Library, aws-kinesis-agg and this package's readers
de-aggregate it record for record. Each key is stored once in its table, each user record refers to it by index.

PURE: standard library only. :class:`AggregateBuilder` keeps the size of the aggregate it would produce as user
records are added, so a caller can stop before Kinesis' 1 MiB record limit; :meth:`AggregateBuilder.build` returns
the bytes. The aggregate's own partition key and explicit hash key (what routes it to a shard) are its first user
record's partition key and hash key (:func:`~kinesis_spout.kinesis.aggregation.hash_key`), so it lands in the shard
of that user record; a caller groups user records by shard (:mod:`kinesis_spout.kinesis.routing`) so that every
user record of an aggregate belongs to that shard.
"""

from __future__ import annotations

import hashlib

from kinesis_spout.kinesis.aggregation import MAGIC, hash_key

__all__ = ["AggregateBuilder", "MAX_AGGREGATE_BYTES"]

#: Kinesis' limit on one record (data plus partition key), which an aggregate must keep too.
MAX_AGGREGATE_BYTES = 1 << 20
_FRAME = len(MAGIC) + 16  # the magic before the message, the MD5 digest after it


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_len(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def _field_len(payload: int) -> int:
    """Bytes of a length-delimited field of ``payload`` bytes (one-byte tag, varint length, payload)."""
    return 1 + _varint_len(payload) + payload


class AggregateBuilder:
    """User records collected for one aggregate, and the size of the Kinesis record they would make.

    Who calls: one writer thread (no lock). ``add`` appends a user record; ``size_with`` says what the record's size
    (data plus the aggregate's partition key, as Kinesis counts it) would be with one more; ``build`` returns the
    aggregate's data, partition key and explicit hash key. Keys are validated by the caller (non-empty partition key,
    explicit hash key a decimal number).
    """

    def __init__(self) -> None:
        self._pks: dict[str, int] = {}
        self._ehks: dict[str, int] = {}
        self._records: list[tuple[int, int | None, bytes]] = []
        self._message = 0  # bytes of the AggregatedRecord message so far
        self._outer: tuple[str, str] | None = None  # the aggregate's partition key and explicit hash key
        self._asked: tuple[str, str | None, bytes, int] | None = None  # size_with's last record and its growth

    def __len__(self) -> int:
        return len(self._records)

    def _added(self, partition_key: str, explicit_hash_key: str | None, data: bytes) -> int:
        """Bytes the message grows by with this user record."""
        grow = 0
        pk_index = self._pks.get(partition_key)
        if pk_index is None:
            pk_index = len(self._pks)
            grow += _field_len(len(partition_key.encode("utf-8")))
        body = 1 + _varint_len(pk_index) + _field_len(len(data))
        if explicit_hash_key is not None:
            ehk_index = self._ehks.get(explicit_hash_key)
            if ehk_index is None:
                ehk_index = len(self._ehks)
                grow += _field_len(len(explicit_hash_key))
            body += 1 + _varint_len(ehk_index)
        return grow + _field_len(body)

    def size_with(self, partition_key: str, explicit_hash_key: str | None, data: bytes) -> int:
        """The Kinesis record size (aggregate data plus its partition key) with this user record added."""
        outer_pk = self._outer[0] if self._outer is not None else partition_key
        grow = self._added(partition_key, explicit_hash_key, data)
        self._asked = (partition_key, explicit_hash_key, data, grow)  # add() of the same record reuses it
        return _FRAME + self._message + grow + len(outer_pk.encode("utf-8"))

    def add(self, partition_key: str, explicit_hash_key: str | None, data: bytes) -> None:
        """Append a user record (changes the tables, the records and the size)."""
        asked = self._asked
        if asked is not None and asked[0] is partition_key and asked[1] is explicit_hash_key and asked[2] is data:
            self._message += asked[3]
        else:
            self._message += self._added(partition_key, explicit_hash_key, data)
        self._asked = None
        pk_index = self._pks.setdefault(partition_key, len(self._pks))
        ehk_index = None if explicit_hash_key is None else self._ehks.setdefault(explicit_hash_key, len(self._ehks))
        self._records.append((pk_index, ehk_index, data))
        if self._outer is None:
            key = hash_key(partition_key, explicit_hash_key)
            self._outer = (partition_key, str(key))

    def build(self) -> tuple[bytes, str, str]:
        """(data, partition key, explicit hash key) of the aggregate. Raises ValueError when it is empty (an
        aggregate without user records is not valid)."""
        if self._outer is None:
            raise ValueError("an aggregate needs at least one user record")
        parts: list[bytes] = [MAGIC]
        for table_tag, table in ((b"\x0a", self._pks), (b"\x12", self._ehks)):
            for key in table:  # dicts keep insertion order: the index of each key
                raw = key.encode("utf-8")
                parts += (table_tag, _varint(len(raw)), raw)
        for pk_index, ehk_index, data in self._records:
            body = b"\x08" + _varint(pk_index)
            if ehk_index is not None:
                body += b"\x10" + _varint(ehk_index)
            body += b"\x1a" + _varint(len(data))
            parts += (b"\x1a", _varint(len(body) + len(data)), body, data)
        message = b"".join(parts[1:])
        digest = hashlib.md5(message, usedforsecurity=False).digest()
        return MAGIC + message + digest, self._outer[0], self._outer[1]
