"""A shard reader's buffer of records kept as the columns they were decoded into, made records only when taken.

:class:`ChunkBuffer` holds pieces in read order: the
:class:`~kinesis_spout.kinesis.retrieval.wire_columns.RecordColumns` of a GetRecords reply (a polled shard), or a list
of :class:`~kinesis_spout.records.Record` (a getter that pushes records, enhanced fan-out). It hands out the oldest
records two ways, each under a count and a byte budget exactly as the reader's deque of records did (up to ``n``, the
first always, then while the bytes taken stay under ``max_bytes``): :meth:`take_records` as records
(``next_tuple``/``next_batch``), :meth:`take_columns` as columns (``next_columns``), so that a columnar consumer never
makes an object per record on its way.

Pure; not thread-safe: its reader guards it with its lock. Sizes are a record's data plus partition key, as
:attr:`Record.size <kinesis_spout.records.Record.size>`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from itertools import accumulate
from operator import add
from typing import Union

from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns, columns_of_records, slice_columns, to_records
from kinesis_spout.records import Record, record_sizes

__all__ = ["ChunkBuffer"]

Piece = Union[RecordColumns, list[Record]]


class _Chunk:
    """One piece and its prefix sums of sizes (``ends[i]``: bytes of its records 0..i), from ``start`` on."""

    __slots__ = ("piece", "ends", "start")

    def __init__(self, piece: Piece) -> None:
        self.piece = piece
        if isinstance(piece, RecordColumns):
            sizes: list[int] = list(map(add, map(len, piece.data), map(len, piece.partition_keys)))
        else:
            sizes = record_sizes(piece)
        self.ends = array("q", accumulate(sizes))
        self.start = 0

    def __len__(self) -> int:
        return len(self.ends) - self.start

    def bytes_before(self, i: int) -> int:
        """Bytes of this chunk's records before index ``i`` (from its start of time, not from ``start``)."""
        return self.ends[i - 1] if i > 0 else 0


class ChunkBuffer:
    """Records buffered in read order as pieces (see the module docstring). ``len()`` counts records; ``nbytes``
    their bytes."""

    def __init__(self) -> None:
        self._chunks: deque[_Chunk] = deque()
        self._count = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def add(self, piece: Piece) -> int:
        """Append a reply's records (columns, or records); returns their bytes."""
        if not len(piece):
            return 0
        chunk = _Chunk(piece)
        self._chunks.append(chunk)
        self._count += len(chunk)
        size = chunk.ends[-1]
        self.nbytes += size
        return size

    def _cut(self, n: int, max_bytes: int) -> list[tuple[_Chunk, int, int]]:
        """Take the oldest records off the buffer: up to ``n``, the first always, then while the bytes stay under
        ``max_bytes`` (the reader's rule). Returns (chunk, first, stop) runs in order."""
        runs: list[tuple[_Chunk, int, int]] = []
        if n <= 0 or max_bytes <= 0:
            return runs
        left, budget = n, max_bytes
        while left and self._chunks:
            chunk = self._chunks[0]
            first = chunk.start
            base = chunk.bytes_before(first)
            stop = min(len(chunk.ends), first + left)
            if chunk.ends[stop - 1] - base > budget:  # the first record whose bytes reach the budget is the last
                stop = bisect_left(chunk.ends, base + budget, first, stop) + 1
            taken = chunk.ends[stop - 1] - base
            runs.append((chunk, first, stop))
            left -= stop - first
            budget -= taken
            self._count -= stop - first
            self.nbytes -= taken
            if stop == len(chunk.ends):
                self._chunks.popleft()
            else:
                chunk.start = stop
                break
            if budget <= 0:
                break
        return runs

    def take_records(self, n: int, max_bytes: int) -> list[Record]:
        """The oldest records as :class:`~kinesis_spout.records.Record` objects (made now for columns)."""
        out: list[Record] = []
        for chunk, first, stop in self._cut(n, max_bytes):
            piece = chunk.piece
            if isinstance(piece, RecordColumns):
                out.extend(to_records(slice_columns(piece, first, stop)))
            else:
                out.extend(piece[first:stop])
        return out

    def take_columns(self, n: int, max_bytes: int) -> list[RecordColumns]:
        """The oldest records as columns, one piece per reply they came from (records pushed as objects are made
        columns)."""
        out: list[RecordColumns] = []
        for chunk, first, stop in self._cut(n, max_bytes):
            piece = chunk.piece
            out.append(slice_columns(piece, first, stop) if isinstance(piece, RecordColumns) else
                       columns_of_records(piece[first:stop]))
        return out
