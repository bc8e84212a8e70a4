"""Records in the source's columns as Arrow: what the driver hands a task, and what a task yields to Spark.

The columns are :data:`kinesis_spout.spark.shared.schema.COLUMNS`. The records come as
:class:`~kinesis_spout.spark.source.rows.ColumnRows` (the columns GetRecords' replies were decoded into: the Arrow
arrays are built from them, no record object made) or as records (enhanced fan-out's). pyarrow only, no Spark
session.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from kinesis_spout.records import Record
from kinesis_spout.spark.source.rows import rows_to_arrow

__all__ = ["decode_batches", "encode_records", "record_batches"]


def encode_records(stream_name: str, records: Sequence[Record]) -> bytes:
    """Records (or rows) as an Arrow IPC stream (what the driver puts into a partition for its task)."""
    import pyarrow as pa

    table = rows_to_arrow(stream_name, records)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def decode_batches(data: bytes) -> Iterator[Any]:
    """The ``pyarrow.RecordBatch`` objects of an IPC stream made by :func:`encode_records`."""
    import pyarrow as pa

    yield from pa.ipc.open_stream(pa.BufferReader(data))


def record_batches(stream_name: str, records: Sequence[Record]) -> list[Any]:
    """Records (or rows) as ``pyarrow.RecordBatch`` objects, as a task yields them to Spark."""
    return list(rows_to_arrow(stream_name, records).to_batches())
