"""GetRecords replies decoded into columns: one list per field, no dict, datetime or record object per record
(``msgspec`` makes a small struct per record, dropped once its fields are in the lists, and a ``str`` or ``bytes``
per field).

Chosen by measurement (1,000 records of 100 bytes a reply, CPU per record on this machine): ``msgspec``'s typed JSON
decoder with a base64 ``bytes`` field 0.5 µs, the lean path's ``json.loads`` + ``base64`` + ``datetime`` 2.5 µs,
pyarrow's JSON reader with a base64 step in numpy 1.6 µs (and slower for small replies or large records). So:

- :func:`decode_reply` decodes a 200 reply's bytes with ``msgspec`` into :class:`ReplyColumns`: sequence numbers,
  partition keys and data (base64 decoded in C) as lists, arrival times as the epoch seconds sent (floats). It
  answers None for anything it does not know (a field it has no slot for, a null, a type it does not expect,
  base64 it refuses) and when ``msgspec`` is not installed: the caller then parses the reply as before (the lean
  path's parser, then botocore's).
- :func:`columns_of_reply` makes the same columns of a reply parsed by botocore or the lean path (the fallback).
- :func:`expand` turns a reply's records into the user records of one shard (:class:`RecordColumns`): KPL aggregates
  decoded into the same columns with their sub-sequence numbers (:func:`~kinesis_spout.kinesis.aggregation.
  deaggregate_columns`), foreign user records dropped by the caller's test (one answer per distinct key).
- :func:`to_records` makes :class:`~kinesis_spout.records.Record` objects of them (the record path), exactly as the
  shard getter made them of parsed replies; :mod:`kinesis_spout.kinesis.retrieval.arrow_columns` makes Arrow arrays of
  them.
- :func:`slice_columns` and :func:`columns_of_records` cut and make pieces for the readers' buffer
  (:mod:`kinesis_spout.kinesis.retrieval.chunks`); a :class:`RowSource` stands in for the records of a piece in the
  tracker, :func:`record_of` makes one of them when it is retried or dead-lettered.

Pure apart from :func:`get_record_columns` (the GetRecords call, on the lean path's HTTP request). Who calls: the
shard getter (``fetch_columns``), the readers' buffer, the spout's columnar batches, the tests and the benchmarks.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from datetime import datetime, timezone
from itertools import compress, islice, repeat
from operator import add, attrgetter, eq, itemgetter, le, lt
from typing import Any, Callable, NamedTuple

from kinesis_spout.kinesis.aggregation import MAGIC, deaggregate_columns, hash_key
from kinesis_spout.kinesis.retrieval.lean import Fallback, get_records, lean_of, parse_reply
from kinesis_spout.records import RANK_BASE, Record, SequenceKey

__all__ = ["HAVE_MSGSPEC", "RecordColumns", "ReplyColumns", "RowSource", "arrival_datetimes", "column_sizes",
           "columns_bytes", "columns_of_records", "columns_of_reply", "decode_reply", "expand", "first_arrived_after",
           "get_record_columns", "in_rank_order", "keep_inside", "ranks_of", "record_of", "slice_columns",
           "to_records"]

try:  # optional: without it every reply goes through the lean path's parser
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a dependency; a user may still lack it
    msgspec = None  # type: ignore[assignment]

HAVE_MSGSPEC = msgspec is not None
_UTC = timezone.utc
_fromtimestamp = datetime.fromtimestamp


class ReplyColumns(NamedTuple):
    """One GetRecords reply's Kinesis records, column by column (index i is record i), and its other fields.
    ``arrivals`` holds epoch seconds (as sent; None where a record had none) when ``arrivals_are_seconds``, else the
    aware datetimes of a parsed reply."""

    sequence_numbers: list[str]
    partition_keys: list[str]
    data: list[bytes]
    arrivals: list[Any]
    arrivals_are_seconds: bool
    next_shard_iterator: str | None
    millis_behind_latest: int | None


class RecordColumns(NamedTuple):
    """The user records of one shard taken from a reply, column by column: what :func:`expand` answers.

    ``sub_sequence_numbers`` and ``aggregated`` are None when no record is a user record of an aggregate (every
    sub-sequence number None, every ``aggregated`` 0); otherwise one entry a record, as
    :class:`~kinesis_spout.records.Record` has them. ``arrivals`` as in :class:`ReplyColumns`."""

    shard_id: str
    sequence_numbers: list[str]
    sub_sequence_numbers: list[int | None] | None
    partition_keys: list[str]
    data: list[bytes]
    arrivals: list[Any]
    arrivals_are_seconds: bool
    aggregated: list[int] | None

    def __len__(self) -> int:
        return len(self.sequence_numbers)


if msgspec is not None:
    class _WireRecord(msgspec.Struct, forbid_unknown_fields=True, gc=False):
        SequenceNumber: str
        Data: bytes
        PartitionKey: str
        ApproximateArrivalTimestamp: float | None = None
        EncryptionType: str | None = None

    class _WireRange(msgspec.Struct, forbid_unknown_fields=True, gc=False):
        StartingHashKey: str
        EndingHashKey: str

    class _WireChild(msgspec.Struct, forbid_unknown_fields=True, gc=False):
        ShardId: str
        ParentShards: list[str]
        HashKeyRange: _WireRange

    class _WireReply(msgspec.Struct, forbid_unknown_fields=True):
        Records: list[_WireRecord] = msgspec.field(default_factory=list)
        NextShardIterator: str | None = None
        MillisBehindLatest: int | None = None
        ChildShards: list[_WireChild] | None = None

    _decoder: Any = msgspec.json.Decoder(_WireReply)
    _errors: tuple[type[BaseException], ...] = (msgspec.DecodeError, msgspec.ValidationError)
else:  # pragma: no cover
    _decoder = None
    _errors = ()

_SEQ, _PK, _DATA, _AT = (attrgetter(name) for name in ("SequenceNumber", "PartitionKey", "Data",
                                                        "ApproximateArrivalTimestamp"))


def decode_reply(content: bytes) -> ReplyColumns | None:
    """A 200 GetRecords reply's bytes as columns; None when ``msgspec`` is missing or the reply holds anything it
    does not know (then the caller parses it as before)."""
    if _decoder is None:
        return None
    try:
        reply = _decoder.decode(content)
    except _errors:
        return None
    records = reply.Records
    return ReplyColumns(list(map(_SEQ, records)), list(map(_PK, records)), list(map(_DATA, records)),
                        list(map(_AT, records)), True, reply.NextShardIterator, reply.MillisBehindLatest)


def columns_of_reply(reply: dict[str, Any]) -> ReplyColumns:
    """The columns of a reply parsed by botocore or by the lean path (``Data`` bytes, arrival datetimes)."""
    raw = reply.get("Records") or ()
    return ReplyColumns([r["SequenceNumber"] for r in raw], [r["PartitionKey"] for r in raw],
                        [r["Data"] for r in raw], [r.get("ApproximateArrivalTimestamp") for r in raw], False,
                        reply.get("NextShardIterator"), reply.get("MillisBehindLatest"))


#: ``kept(sequence_number, partition_keys, explicit_hash_keys)``: the indexes of an aggregate's user records that
#: belong to the shard (None: all of them); counts and reports the others (the shard getter's test).
Kept = Callable[[str, list[str], "list[str | None] | None"], "list[int] | None"]
#: ``corrupt(sequence_number, data)``: told of a record with the aggregate magic that does not decode.
Corrupt = Callable[[str, bytes], None]


def keep_inside(low: int, high: int) -> Kept:
    """The test of :func:`expand` that keeps the user records whose hash key lies in ``low .. high`` (a shard's
    range): each distinct partition key (and explicit hash key) is hashed once, then one lookup a user record in C
    (``map`` over a dict); an explicit hash key that is not a number is kept (no shard can be told). Counts and
    reports nothing (the shard getter's own test does)."""

    def inside(h: int | None) -> bool:
        return h is None or low <= h <= high

    def kept(_seq: str, keys: list[str], ehks: list[str | None] | None) -> list[int] | None:
        if ehks is None:
            by_pk = {k: inside(hash_key(k, None)) for k in set(keys)}
            if all(by_pk.values()):
                return None
            flags = list(map(by_pk.__getitem__, keys))
        else:
            by_pk = {k: inside(hash_key(k, None)) for k, e in zip(keys, ehks) if e is None}
            by_ehk = {e: inside(hash_key(e, e)) for e in set(ehks) if e is not None}
            if all(by_pk.values()) and all(by_ehk.values()):
                return None
            flags = [by_pk[k] if e is None else by_ehk[e] for k, e in zip(keys, ehks)]
        return list(compress(range(len(keys)), flags))

    return kept


def expand(reply: ReplyColumns, shard_id: str, deaggregate: bool, kept: Kept | None = None,
           corrupt: Corrupt | None = None) -> RecordColumns:
    """The user records of ``reply`` for ``shard_id``: with ``deaggregate``, each KPL aggregate becomes its user
    records (sub-sequence numbers 0..n-1; ``aggregated`` n, or one more than the last kept with ``kept``), one that
    does not decode stays whole (``corrupt`` is told). Without aggregates the reply's lists are used as they are."""
    seqs, keys, datas, arrivals = reply.sequence_numbers, reply.partition_keys, reply.data, reply.arrivals
    if not deaggregate or not any(map(bytes.startswith, datas, repeat(MAGIC))):
        return RecordColumns(shard_id, seqs, None, keys, datas, arrivals, reply.arrivals_are_seconds, None)
    out_seq: list[str] = []
    out_sub: list[int | None] = []
    out_key: list[str] = []
    out_data: list[bytes] = []
    out_at: list[Any] = []
    out_agg: list[int] = []
    for seq, key, data, at in zip(seqs, keys, datas, arrivals):
        if data[:4] == MAGIC:
            users = deaggregate_columns(data)
            if users is not None:
                ukeys, ehks, udatas = users
                picked = kept(seq, ukeys, ehks) if kept is not None else None
                if picked is None:
                    n = len(udatas)
                    out_sub.extend(range(n))
                    out_key.extend(ukeys)
                    out_data.extend(udatas)
                else:
                    n = picked[-1] + 1 if picked else 0
                    out_sub.extend(picked)
                    out_key.extend([ukeys[i] for i in picked])
                    out_data.extend([udatas[i] for i in picked])
                m = len(out_sub) - len(out_seq)
                out_seq.extend(repeat(seq, m))
                out_at.extend(repeat(at, m))
                out_agg.extend(repeat(n, m))
                continue
            if corrupt is not None:
                corrupt(seq, data)
        out_seq.append(seq)
        out_sub.append(None)
        out_key.append(key)
        out_data.append(data)
        out_at.append(at)
        out_agg.append(0)
    return RecordColumns(shard_id, out_seq, out_sub, out_key, out_data, out_at, reply.arrivals_are_seconds, out_agg)


def arrival_datetimes(columns: RecordColumns | ReplyColumns) -> list[datetime | None]:
    """The arrival times as aware datetimes (as the lean path and botocore make them of the seconds sent)."""
    at = columns.arrivals
    if not columns.arrivals_are_seconds:
        return at
    if None in at:
        return [None if a is None else _fromtimestamp(a, _UTC) for a in at]
    return list(map(_fromtimestamp, at, repeat(_UTC)))


def first_arrived_after(columns: RecordColumns, cutoff: datetime) -> int | None:
    """The index of the first record whose arrival time (as :func:`arrival_datetimes` makes it) is after the aware
    ``cutoff``, or None. Made of the floats sent, with no datetime but for the records within a millisecond of the
    cutoff (each is then compared as its datetime, so the answer is the record path's exactly). Who calls: the shard
    reader looking for its shard's tip."""
    at = columns.arrivals
    if not columns.arrivals_are_seconds:
        return next((i for i, a in enumerate(at) if a is not None and a > cutoff), None)
    low = cutoff.timestamp() - 1e-3  # a datetime made of seconds s lies within a microsecond of s
    if not at or (None not in at and max(at) <= low):
        return None
    for i, a in enumerate(at):
        if a is not None and a > low and _fromtimestamp(a, _UTC) > cutoff:
            return i
    return None


def slice_columns(columns: RecordColumns, start: int, stop: int) -> RecordColumns:
    """Records ``start`` to ``stop`` (excluded) of ``columns`` (the same lists when that is all of them)."""
    if start == 0 and stop >= len(columns.sequence_numbers):
        return columns
    subs, agg = columns.sub_sequence_numbers, columns.aggregated
    return RecordColumns(columns.shard_id, columns.sequence_numbers[start:stop],
                         None if subs is None else subs[start:stop], columns.partition_keys[start:stop],
                         columns.data[start:stop], columns.arrivals[start:stop], columns.arrivals_are_seconds,
                         None if agg is None else agg[start:stop])


_FIELD = [itemgetter(i) for i in range(8)]  # Record's fields by position


def columns_of_records(records: list[Record]) -> RecordColumns:
    """Records of one shard (made elsewhere: pushed by enhanced fan-out, or retried) as columns."""
    get = _FIELD
    subs: list[int | None] | None = list(map(get[2], records))
    agg: list[int] | None = list(map(get[7], records))
    if not any(agg or ()):
        subs = agg = None
    return RecordColumns(records[0][0] if records else "", list(map(get[1], records)), subs,
                         list(map(get[3], records)), list(map(get[4], records)), list(map(get[5], records)), False,
                         agg)


def column_sizes(columns: RecordColumns) -> array[int]:
    """Each record's size as :attr:`Record.size <kinesis_spout.records.Record.size>` counts it (data bytes plus
    partition key), computed in C."""
    return array("q", map(add, map(len, columns.data), map(len, columns.partition_keys)))


def columns_bytes(columns: RecordColumns) -> int:
    """The sum of :func:`column_sizes` (as :func:`kinesis_spout.records.records_bytes` for records)."""
    return sum(map(len, columns.data)) + sum(map(len, columns.partition_keys))


def ranks_of(columns: RecordColumns) -> list[int]:
    """The tracker's rank of each record (``int(sequence number) * RANK_BASE + sub-sequence number``): one ``int()``
    a distinct sequence number (a KPL aggregate's user records share theirs)."""
    seqs, subs = columns.sequence_numbers, columns.sub_sequence_numbers
    if subs is None:
        return [int(s) * RANK_BASE for s in seqs]
    base = {s: int(s) * RANK_BASE for s in dict.fromkeys(seqs)}
    return [base[s] + (u or 0) for s, u in zip(seqs, subs)]


def in_rank_order(columns: RecordColumns) -> bool:
    """True when the records' ranks (:func:`ranks_of`) strictly increase, told with no ``int()`` a record: the
    sequence numbers are ASCII digits of one length (so that they order as strings as they do as numbers), and
    increase, or, between user records of one aggregate, stay and their sub-sequence numbers increase. False says
    nothing (the caller makes the ranks and lets the tracker check them)."""
    seqs, subs = columns.sequence_numbers, columns.sub_sequence_numbers
    if not seqs or len(set(map(len, seqs))) != 1 or not "".join(seqs).encode("ascii", "replace").isdigit():
        return False
    if subs is None:
        return all(map(lt, seqs, islice(seqs, 1, None)))
    if not all(map(le, seqs, islice(seqs, 1, None))):
        return False
    same = list(map(eq, seqs, islice(seqs, 1, None)))
    if not any(same):
        return True
    try:
        return all(map(lt, compress(subs, same), compress(islice(subs, 1, None), same)))  # type: ignore[arg-type]
    except TypeError:  # a record with no sub-sequence number beside one of an aggregate: the ranks will tell
        return False


class RowSource:
    """The columns a run of records was put in flight from, standing in for each of those records as the tracker's
    item (one pointer a record, no record object): :func:`record_of` makes the record of a rank when it is needed
    (a retry, a dead letter). ``ranks`` are the records' ranks, increasing, aligned with ``columns`` (None: made by
    :func:`ranks_of` on the first record asked for)."""

    __slots__ = ("columns", "ranks")

    def __init__(self, columns: RecordColumns, ranks: list[int] | None = None) -> None:
        self.columns = columns
        self.ranks = ranks

    def record(self, rank: int) -> Record:
        """The record of ``rank`` (one of :attr:`ranks`)."""
        ranks = self.ranks
        if ranks is None:
            ranks = self.ranks = ranks_of(self.columns)
        i = bisect_left(ranks, rank)
        return to_records(slice_columns(self.columns, i, i + 1))[0]


def record_of(item: Any, rank: int) -> Any:
    """The record a tracker's item stands for: a :class:`RowSource`'s record of ``rank``, else the item itself.
    Who calls: the spout, for the records it emits again or dead-letters."""
    return item.record(rank) if item.__class__ is RowSource else item


def to_records(columns: RecordColumns) -> list[Record]:
    """The columns as :class:`~kinesis_spout.records.Record` objects (the record path), field for field as the
    shard getter makes them of a parsed reply."""
    new = tuple.__new__  # named tuples built without their __new__: every field given
    shard_id = columns.shard_id
    seqs, keys, datas = columns.sequence_numbers, columns.partition_keys, columns.data
    at = arrival_datetimes(columns)
    subs, agg = columns.sub_sequence_numbers, columns.aggregated
    if subs is None or agg is None:
        return [new(Record, (shard_id, seq, None, key, data, a, new(SequenceKey, (int(seq), 0)), 0))
                for seq, key, data, a in zip(seqs, keys, datas, at)]
    return [new(Record, (shard_id, seq, sub, key, data, a, new(SequenceKey, (int(seq), sub or 0)), n))
            for seq, sub, key, data, a, n in zip(seqs, subs, keys, datas, at, agg)]


def get_record_columns(client: Any, shard_iterator: str, limit: int) -> ReplyColumns:
    """One GetRecords call as columns. On a client with the lean path (``make_client``'s) and with ``msgspec``, a 200
    reply is decoded by :func:`decode_reply`; a reply it does not know by the lean path's parser, then botocore's
    (which raises an error reply as botocore would). Other clients: botocore's call, its reply made columns."""
    lean = lean_of(client)
    if lean is None or _decoder is None:
        return columns_of_reply(get_records(client, shard_iterator, limit))
    if not lean.ready:
        lean.capture(lambda: client.get_records(ShardIterator=shard_iterator, Limit=limit))
    response = lean.request(shard_iterator, limit)
    if response.status_code == 200:
        content = response.content
        decoded = decode_reply(content)
        if decoded is not None:
            return decoded
        try:
            return columns_of_reply(parse_reply(content))
        except (Fallback, ValueError, KeyError, TypeError, AttributeError):
            pass
    lean.fallbacks += 1
    return columns_of_reply(lean.botocore_parse(response))
