"""KPL aggregated records: one Kinesis record carrying many user records, and their de-aggregation.

The format, as the Kinesis Producer Library writes it and the Kinesis Client Library reads it: the 4 magic bytes
``F3 89 9A C2``, a protobuf ``AggregatedRecord`` message, and the 16-byte MD5 digest of that message's bytes.

    AggregatedRecord { repeated string partition_key_table = 1; repeated string explicit_hash_key_table = 2;
                       repeated Record records = 3; }
    Record { required uint64 partition_key_index = 1; optional uint64 explicit_hash_key_index = 2;
             required bytes data = 3; repeated Tag tags = 4; }

PURE: standard library only (``hashlib`` for the digest); the protobuf wire format is decoded here, as it is a few
dozen lines for these two messages and keeps the package free of a protobuf runtime. :func:`deaggregate` returns
the user records, or ``None`` for data that is not an aggregate (no magic) or not a valid one (a digest that does
not match, a message that does not parse, an index outside its table, no user record at all): such data is
delivered as the plain record it is. KCL and aws-kinesis-agg do the same for a digest that does not match, a
message that does not parse and an empty message; for an index outside its table they hand out the user records
before the bad one and drop the rest, where this decoder drops nothing. :func:`aggregate_problem` says which of
these it was, for the reader's log line.

:func:`hash_key` is where Kinesis puts a user record: its explicit hash key, else the MD5 of its partition key.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

__all__ = ["MAGIC", "Columns", "UserRecord", "aggregate_problem", "deaggregate", "deaggregate_columns", "hash_key",
           "is_aggregated"]

MAGIC = b"\xf3\x89\x9a\xc2"
_DIGEST = 16


class UserRecord(NamedTuple):
    """One user record of an aggregate: its partition key, explicit hash key (or None) and data."""

    partition_key: str
    explicit_hash_key: str | None
    data: bytes


class _Malformed(Exception):
    """Not a valid aggregate, and why (internal: :func:`deaggregate` answers None, :func:`aggregate_problem` the
    reason)."""


def is_aggregated(data: bytes) -> bool:
    """Whether ``data`` starts with the aggregate magic (it may still turn out not to be a valid aggregate)."""
    return data[:4] == MAGIC


def hash_key(partition_key: str, explicit_hash_key: str | None) -> int | None:
    """The 128-bit hash key Kinesis routes a user record by: its explicit hash key (a decimal number), else the MD5
    digest of its partition key's UTF-8 bytes read as a big-endian integer. None when the explicit hash key is not
    a decimal number (no shard can be told for it)."""
    if explicit_hash_key is not None:
        if explicit_hash_key.isascii() and explicit_hash_key.isdigit():
            return int(explicit_hash_key)
        return None
    return int.from_bytes(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).digest(), "big")


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _skip(buf: bytes, pos: int, end: int, wire: int) -> int:
    """The position after a field of wire type ``wire`` whose value starts at ``pos``."""
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1:
        pos += 8
    elif wire == 2:
        length, pos = _varint(buf, pos, end)
        pos += length
    elif wire == 5:
        pos += 4
    else:
        raise _Malformed(f"unsupported wire type {wire}")
    if pos > end:
        raise _Malformed("truncated field")
    return pos


def _record(buf: bytes, pos: int, end: int) -> tuple[int, int | None, bytes]:
    """One ``Record`` message in ``buf[pos:end]``: (partition key index, explicit hash key index, data)."""
    pk_index: int | None = None
    ehk_index: int | None = None
    data: bytes | None = None
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 1 and wire == 0:
            pk_index, pos = _varint(buf, pos, end)
        elif field == 2 and wire == 0:
            ehk_index, pos = _varint(buf, pos, end)
        elif field == 3 and wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise _Malformed("truncated data")
            data = buf[pos:pos + length]
            pos += length
        elif field == 0:
            raise _Malformed("field number 0")
        else:
            pos = _skip(buf, pos, end, wire)
    if pk_index is None or data is None:
        raise _Malformed("a record without its partition key index or data")
    return pk_index, ehk_index, data


def _text(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    length, pos = _varint(buf, pos, end)
    if pos + length > end:
        raise _Malformed("truncated string")
    try:
        return buf[pos:pos + length].decode("utf-8"), pos + length
    except UnicodeDecodeError as exc:
        raise _Malformed("a key that is not UTF-8") from exc


def deaggregate(data: bytes) -> list[UserRecord] | None:
    """The user records of an aggregated record's ``data``, in order (their sub-sequence numbers are their
    indexes); ``None`` when ``data`` is not a valid aggregate and must be delivered as it is. Built on
    :func:`deaggregate_columns`."""
    try:
        keys, ehks, datas = _decode(data)
    except _Malformed:
        return None
    new, cls = tuple.__new__, UserRecord  # a NamedTuple built by tuple.__new__: half the cost of UserRecord()
    if ehks is None:
        return [new(cls, (key, None, payload)) for key, payload in zip(keys, datas)]
    return [new(cls, fields) for fields in zip(keys, ehks, datas)]


class Columns(NamedTuple):
    """An aggregate's user records as columns, index i being the user record of sub-sequence number i: each one's
    partition key, explicit hash key (``explicit_hash_keys`` is None when no user record has one) and data."""

    partition_keys: list[str]
    explicit_hash_keys: list[str | None] | None
    data: list[bytes]


def deaggregate_columns(data: bytes) -> Columns | None:
    """:func:`deaggregate` as columns, without an object per user record: what the shard getter builds its records
    from. ``None`` when ``data`` is not a valid aggregate.

    The records field is read on a fast path for the shape producers write (tag, a length under 16 KiB, the
    partition key index under 128, optionally the explicit hash key index under 128, then the data under 16 KiB);
    anything else goes through the general parser.
    """
    try:
        return tuple.__new__(Columns, _decode(data))
    except _Malformed:
        return None


def aggregate_problem(data: bytes) -> str | None:
    """Why :func:`deaggregate` answers None for ``data`` (no magic, a digest that does not match, or what does
    not parse); None when ``data`` is a valid aggregate. Decodes ``data`` again: for the rare aggregate that
    fails."""
    try:
        _decode(data)
    except _Malformed as exc:
        return str(exc)
    return None


def _add_record(pk_index: list[int], ehk_index: list[int | None], datas: list[bytes], pk: int, ehk: int | None,
                payload: bytes) -> None:
    """Add a user record decoded by :func:`_record` to :func:`_decode`'s columns (its fast path adds its own inline,
    the same way, for speed)."""
    if ehk is not None or ehk_index:
        if not ehk_index:  # the first explicit hash key index: the records before it had none
            ehk_index.extend([None] * len(datas))
        ehk_index.append(ehk)
    pk_index.append(pk)
    datas.append(payload)


def _decode(data: bytes) -> tuple[list[str], list[str | None] | None, list[bytes]]:
    if len(data) < len(MAGIC) + _DIGEST or data[:4] != MAGIC:
        raise _Malformed("no KPL magic" if data[:4] != MAGIC else "shorter than the magic and the digest")
    end = len(data) - _DIGEST
    if hashlib.md5(data[4:end], usedforsecurity=False).digest() != data[end:]:
        raise _Malformed("the MD5 digest does not match the message")
    pks: list[str] = []
    ehks: list[str] = []
    pk_index: list[int] = []
    ehk_index: list[int | None] = []  # one entry per user record once any has an explicit hash key index
    datas: list[bytes] = []
    add_pk, add_data = pk_index.append, datas.append

    pos = 4
    try:
        while pos < end:
            tag = data[pos]
            if tag == 0x1A:  # field 3 (records), length-delimited
                length = data[pos + 1]
                pos += 2
                if length >= 0x80:
                    length, pos = _varint(data, pos - 1, end)
                stop = pos + length
                if stop > end:
                    raise _Malformed("truncated record")
                # fast path: field 1 (partition key index), maybe field 2 (explicit hash key index), then field 3
                # (data), nothing else
                if data[pos] == 0x08 and data[pos + 1] < 0x80:
                    q = pos + 2
                    ehk: int | None = None
                    if data[q] == 0x10 and data[q + 1] < 0x80:
                        ehk = data[q + 1]
                        q += 2
                    if data[q] == 0x1A:
                        n = data[q + 1]
                        first = q + 2
                        if n >= 0x80:  # a two-byte data length; a longer or cut one never matches (first + end > stop)
                            n = (n & 0x7F) | (data[q + 2] << 7) if data[q + 2] < 0x80 else end
                            first += 1
                        if first + n == stop:
                            if ehk is not None or ehk_index:
                                if not ehk_index:
                                    ehk_index.extend([None] * len(datas))
                                ehk_index.append(ehk)
                            add_pk(data[pos + 1])
                            add_data(data[first:stop])
                            pos = stop
                            continue
                _add_record(pk_index, ehk_index, datas, *_record(data, pos, stop))
                pos = stop
                continue
            if tag == 0x0A and data[pos + 1] < 0x80:  # field 1 (a partition key) under 128 bytes: _text, inlined
                first = pos + 2
                pos = first + data[pos + 1]
                if pos > end:
                    raise _Malformed("truncated string")
                try:
                    pks.append(data[first:pos].decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise _Malformed("a key that is not UTF-8") from exc
                continue
            tag, pos = _varint(data, pos, end)
            field, wire = tag >> 3, tag & 7
            if field == 1 and wire == 2:
                key, pos = _text(data, pos, end)
                pks.append(key)
            elif field == 2 and wire == 2:
                key, pos = _text(data, pos, end)
                ehks.append(key)
            elif field == 3 and wire == 2:
                length, pos = _varint(data, pos, end)
                if pos + length > end:
                    raise _Malformed("truncated record")
                _add_record(pk_index, ehk_index, datas, *_record(data, pos, pos + length))
                pos += length
            elif field == 0:  # not valid protobuf: KCL rejects it too
                raise _Malformed("field number 0")
            else:
                pos = _skip(data, pos, end, wire)
        if not datas:  # the empty message (KCL and aws-kinesis-agg deliver the record whole) or key tables alone
            raise _Malformed("an aggregate without user records")
        # an index outside its table raises IndexError (indexes are never negative): not a valid aggregate
        keys = [pks[i] for i in pk_index]
        if not ehk_index:
            return keys, None, datas
        return keys, [None if j is None else ehks[j] for j in ehk_index], datas
    except IndexError:
        raise _Malformed(f"a key index outside its table ({len(pks)} partition keys, {len(ehks)} explicit hash "
                         f"keys)") from None
