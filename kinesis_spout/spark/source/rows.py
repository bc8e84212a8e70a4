"""The records the Spark source reads, kept as the columns the shard getter decoded them into, up to Arrow.

:class:`ColumnRows` is a sequence of records (``len``, slices, ``rows[i]``, iteration) held as
:class:`~kinesis_spout.kinesis.retrieval.wire_columns.RecordColumns` pieces: slicing and joining cut and chain the
pieces' lists, and :meth:`ColumnRows.to_arrow` builds the source's Arrow rows from them
(:func:`~kinesis_spout.kinesis.retrieval.arrow_columns.batch_of_pieces`, then
:func:`~kinesis_spout.spark.shared.schema.columns_to_arrow`), so no :class:`~kinesis_spout.records.Record` is made on
the way from a GetRecords reply to Spark. What the readers decide on is read off the columns too: keys by index
(:meth:`ColumnRows.key`, for cuts at a position), bytes (:meth:`ColumnRows.nbytes`), the first record that arrived
after a time (:meth:`ColumnRows.first_after`). Indexing or iterating makes records (one per row asked for): the
paths that still need them (a byte limit shared between shards on the driver) pay that, and no more than before.

:class:`ColumnGetter` is a shard getter whose ``fetch`` answers such rows (the polling getter's ``fetch_columns``);
:func:`column_getter` wraps a getter that has columns and leaves any other as it is (enhanced fan-out's getters,
whose events are parsed into records: their rows stay records, made columns only to be joined, by
:func:`as_rows`). Who calls: the driver's planner (:mod:`~kinesis_spout.spark.source.driver_columns`), the replays
and executor reads (:mod:`~kinesis_spout.spark.source.shard_reads`, :mod:`~kinesis_spout.spark.source.executor_read`),
the batch reader, the codec. Not thread-safe beyond this: :meth:`ColumnRows.extend` replaces the pieces at once, so a
reader on another thread sees the rows before or after it.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, timezone
from itertools import accumulate
from typing import Any, Iterable, Iterator, Sequence, cast, overload

from kinesis_spout.kinesis.retrieval.arrow_columns import batch_of_pieces
from kinesis_spout.kinesis.retrieval.protocol import FetchResult
from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns, columns_of_records, slice_columns, to_records
from kinesis_spout.records import Record, SequenceKey, records_bytes
from kinesis_spout.spark.source.offsets import first_after

__all__ = ["ColumnGetter", "ColumnRows", "as_rows", "column_getter", "join_rows", "key_at", "keys_up_to", "rows_bytes",
           "rows_to_arrow"]

_UTC = timezone.utc
#: Arrival seconds this far below a cutoff's are before it whatever ``datetime.fromtimestamp`` rounds them to.
_ROUNDING_S = 1e-5


class ColumnRows(Sequence[Record]):
    """Records held as columns, in order (see the module docstring). Made empty, or of pieces (empty ones left
    out); grown by :meth:`extend`; sliced into new rows (the pieces' lists cut, never a record made)."""

    __slots__ = ("_parts",)

    def __init__(self, pieces: Iterable[RecordColumns] = ()) -> None:
        kept = tuple(p for p in pieces if len(p))
        self._parts: tuple[tuple[RecordColumns, ...], tuple[int, ...]] = (kept, tuple(accumulate(map(len, kept))))

    @property
    def pieces(self) -> tuple[RecordColumns, ...]:
        """The pieces, in order (each of one shard)."""
        return self._parts[0]

    def __len__(self) -> int:
        ends = self._parts[1]
        return ends[-1] if ends else 0

    def __bool__(self) -> bool:
        return bool(self._parts[1])

    def _locate(self, i: int) -> tuple[RecordColumns, int]:
        pieces, ends = self._parts
        n = ends[-1] if ends else 0
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"row {i} of {n}")
        p = bisect_right(ends, j)
        return pieces[p], j - (ends[p - 1] if p else 0)

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> ColumnRows: ...

    def __getitem__(self, i: int | slice) -> Record | ColumnRows:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("ColumnRows slices take no step")
            return self._cut(start, stop)
        piece, k = self._locate(i)
        return to_records(slice_columns(piece, k, k + 1))[0]

    def _cut(self, start: int, stop: int) -> ColumnRows:
        pieces, ends = self._parts
        out = []
        before = 0
        for piece, end in zip(pieces, ends):
            if end > start and before < stop:
                out.append(slice_columns(piece, max(start - before, 0), min(stop, end) - before))
            before = end
        return ColumnRows(out)

    def __iter__(self) -> Iterator[Record]:
        for piece in self._parts[0]:
            yield from to_records(piece)

    def extend(self, more: Iterable[Record]) -> None:
        """Append ``more`` (rows, or records of one shard, made columns), replacing the pieces at once."""
        added = as_rows(more).pieces
        if added:
            pieces, ends = self._parts
            total = ends[-1] if ends else 0
            self._parts = (pieces + added, ends + tuple(total + e for e in accumulate(map(len, added))))

    def key(self, i: int) -> SequenceKey:
        """Row ``i``'s key (``rows[i].key``, with no record made)."""
        piece, k = self._locate(i)
        subs = piece.sub_sequence_numbers
        return SequenceKey(int(piece.sequence_numbers[k]), (subs[k] or 0) if subs is not None else 0)

    def nbytes(self) -> int:
        """The rows' bytes as the limits count them: data plus partition keys (``records_bytes``)."""
        return sum(sum(map(len, p.data)) + sum(map(len, p.partition_keys)) for p in self._parts[0])

    def first_after(self, cutoff: datetime) -> int | None:
        """The index of the first row that arrived after ``cutoff`` (None when none did; unknown times count as
        before), as :func:`~kinesis_spout.spark.source.offsets.first_after` of the rows' arrival times: seconds well
        before the cutoff are passed over as floats, the others made the datetimes the records would hold."""
        limit = cutoff.timestamp() - _ROUNDING_S
        before = 0
        for piece in self._parts[0]:
            at = piece.arrivals
            if piece.arrivals_are_seconds:
                for i in [i for i, s in enumerate(at) if s is not None and s > limit]:
                    if datetime.fromtimestamp(at[i], _UTC) > cutoff:
                        return before + i
            else:
                hit = first_after(at, cutoff)
                if hit is not None:
                    return before + hit
            before += len(piece)
        return None

    def to_arrow(self, stream_name: str) -> Any:
        """The rows as a ``pyarrow.Table`` in the source's columns (:data:`~kinesis_spout.spark.shared.schema.COLUMNS`,
        attempt 1), built from the columns."""
        from kinesis_spout.spark.shared.schema import columns_to_arrow

        return columns_to_arrow(stream_name, batch_of_pieces(self._parts[0]))

    def __repr__(self) -> str:
        return f"ColumnRows({len(self)} rows in {len(self._parts[0])} pieces)"


def key_at(rows: Sequence[Record], i: int) -> SequenceKey:
    """Row ``i``'s key: read off the columns of :class:`ColumnRows`, a record's own otherwise."""
    return rows.key(i) if isinstance(rows, ColumnRows) else rows[i].key


def keys_up_to(rows: Sequence[Record], key: SequenceKey) -> int:
    """How many of ``rows`` (in key order, as a shard's are) have a key at or before ``key`` (a binary search)."""
    return bisect_right(range(len(rows)), key, key=lambda i: key_at(rows, i))


def as_rows(records: Iterable[Record]) -> ColumnRows:
    """``records`` as :class:`ColumnRows`: the rows themselves, or records (of one shard) made columns."""
    if isinstance(records, ColumnRows):
        return records
    listed = list(records)
    return ColumnRows([columns_of_records(listed)] if listed else [])


def rows_bytes(rows: Sequence[Record]) -> int:
    """The bytes of ``rows`` (:meth:`ColumnRows.nbytes`, or ``records_bytes`` of records)."""
    return rows.nbytes() if isinstance(rows, ColumnRows) else records_bytes(rows)


def rows_to_arrow(stream_name: str, rows: Sequence[Record]) -> Any:
    """A ``pyarrow.Table`` of ``rows`` in the source's columns: from the columns (:class:`ColumnRows`), or from
    records (:func:`~kinesis_spout.spark.shared.schema.records_to_arrow`)."""
    if isinstance(rows, ColumnRows):
        return rows.to_arrow(stream_name)
    from kinesis_spout.spark.shared.schema import records_to_arrow

    return records_to_arrow(stream_name, rows)


def join_rows(parts: Sequence[Sequence[Record]]) -> Sequence[Record]:
    """``parts`` one after the other: one :class:`ColumnRows` when every part is rows, else a list of records."""
    if all(isinstance(p, ColumnRows) for p in parts):
        return ColumnRows([piece for p in parts for piece in cast(ColumnRows, p).pieces])
    return [r for p in parts for r in p]


class ColumnGetter:
    """A getter with columns (``fetch_columns``) whose ``fetch`` answers :class:`ColumnRows` in
    ``FetchResult.records``; everything else is the getter's own (read through)."""

    def __init__(self, getter: Any) -> None:
        self.getter = getter

    def fetch(self) -> FetchResult:
        got = self.getter.fetch_columns()
        return FetchResult(cast(list[Record], ColumnRows((got.columns,))), got.millis_behind_latest, got.shard_end,
                           got.fetched)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.getter, name)


def column_getter(getter: Any) -> Any:
    """``getter`` answering :class:`ColumnRows` when it has columns (polling), else ``getter`` as it is (enhanced
    fan-out, whose records stay records)."""
    if isinstance(getter, ColumnGetter) or not hasattr(getter, "fetch_columns"):
        return getter
    return ColumnGetter(getter)
