"""The rows of an Arrow record batch as PutRecords entries, checked column by column instead of row by row.

Kinesis' limits on a record (data present, a partition key of 1 to 256 UTF-16 code units, data and key within 1 MiB)
are checked on whole Arrow columns with ``pyarrow.compute`` (null counts, lengths, their sum; a key's UTF-16 length
is at most its UTF-8 length, so keys are measured one by one with
:func:`~kinesis_spout.kinesis.writing.limits.key_length`
only in a batch holding a key over 256 bytes): when every row of a batch passes, the batch's entries are made
straight from the columns (text data taken as its UTF-8 bytes without a per-row ``encode``), and the per-row check
(:func:`~kinesis_spout.kinesis.writing.putter.entry_problem`) is skipped. When a row may fail, or the batch has
explicit hash
keys (whose check needs each number), the caller checks row by row, as before, so that the row is named (or
dead-lettered) exactly as the row-by-row check does.

PURE (pyarrow only). Who calls: :func:`~kinesis_spout.spark.sink.task.write_task`, on an executor, per batch.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kinesis_spout.kinesis.writing.limits import MAX_PARTITION_KEY_LENGTH, MAX_RECORD_BYTES, key_length
from kinesis_spout.kinesis.writing.putter import PutEntry
from kinesis_spout.spark.sink.columns import Columns
from kinesis_spout.spark.sink.options import SinkOptions

__all__ = ["checked_entries"]


def _as_binary(column: Any) -> Any:
    """A string column's UTF-8 bytes as a binary column (the same buffers), or a binary column as it is."""
    if pa.types.is_string(column.type):
        return column.cast(pa.binary())
    if pa.types.is_large_string(column.type):
        return column.cast(pa.large_binary())
    return column


def _max(values: Any) -> int:
    top = pc.max(values).as_py()
    return int(top) if top is not None else 0


def checked_entries(batch: Any, columns: Columns, options: SinkOptions, first_row: int
                    ) -> list[tuple[int, PutEntry]] | None:
    """``(row number, entry)`` for every row of ``batch`` (rows numbered from ``first_row``) when every row is
    within Kinesis' limits, checked on whole columns; None when one may not be (or the batch has an explicit hash
    key column): then the caller checks row by row."""
    if columns.explicit_hash_key is not None:
        return None
    names = batch.schema.names
    data = _as_binary(batch.column(names.index(columns.data)))
    if data.null_count:
        return None
    n = len(data)
    if n == 0:
        return []
    if columns.partition_key is None:
        constant = options.partition_key
        assert constant is not None, "a sink without a partition key column has a constant key"
        if _max(pc.binary_length(data)) + len(constant.encode("utf-8")) > MAX_RECORD_BYTES:
            return None
        return [(first_row + i, PutEntry(d, constant)) for i, d in enumerate(data.to_pylist())]
    keys = batch.column(names.index(columns.partition_key))
    if keys.null_count:
        return None
    key_bytes = pc.binary_length(keys)
    if pc.min(key_bytes).as_py() < 1:
        return None
    texts = keys.to_pylist()
    # A key's UTF-16 length is at most its UTF-8 length: only a batch with a key over 256 bytes is measured key by
    # key, as Kinesis measures it.
    if _max(key_bytes) > MAX_PARTITION_KEY_LENGTH and max(map(key_length, texts)) > MAX_PARTITION_KEY_LENGTH:
        return None
    if _max(pc.add(pc.binary_length(data), key_bytes)) > MAX_RECORD_BYTES:
        return None
    return [(first_row + i, PutEntry(d, k)) for i, (d, k) in enumerate(zip(data.to_pylist(), texts))]
