"""The columns every Spark adapter gives a batch of records, and their Arrow form.

Only the schema and the conversion live here (pyarrow, no Spark session), so both the micro-batch pipeline and
the Structured Streaming source build rows the same way.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from kinesis_spout.records import Record

#: Column names in order, with their Spark SQL types (a DDL string Spark accepts as a schema).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("stream_name", "string"),
    ("shard_id", "string"),
    ("sequence_number", "string"),
    ("sub_sequence_number", "bigint"),
    ("partition_key", "string"),
    ("data", "binary"),
    ("approximate_arrival_timestamp", "timestamp"),
    ("message_id", "string"),
    ("attempt", "int"),
)

#: ``"stream_name string, shard_id string, ..."``: the schema as Spark DDL.
SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)


def arrow_schema() -> Any:
    """The columns as a ``pyarrow.Schema`` (timestamps in microseconds, UTC)."""
    import pyarrow as pa

    kinds = {"string": pa.string(), "bigint": pa.int64(), "binary": pa.binary(),
             "timestamp": pa.timestamp("us", tz="UTC"), "int": pa.int32()}
    return pa.schema([pa.field(name, kinds[kind], nullable=True) for name, kind in COLUMNS])


def records_to_arrow(stream_name: str | Sequence[str], records: Sequence[Record], attempts: Iterable[int] | None = None,
                     message_ids: Sequence[str] | None = None) -> Any:
    """A ``pyarrow.Table`` of ``records`` (``attempts`` defaults to 1 for each), built column by column.

    ``stream_name`` is the records' stream, or each record's (records of several streams); ``message_ids`` the ids
    to show (default: each record's own, ``shard:sequence``; a ``MultiStreamSpout``'s name the stream too)."""
    import pyarrow as pa

    attempt_list = list(attempts) if attempts is not None else [1] * len(records)
    if len(attempt_list) != len(records):
        raise ValueError(f"{len(records)} records but {len(attempt_list)} attempts")
    columns = [
        [stream_name] * len(records) if isinstance(stream_name, str) else list(stream_name),
        [r.shard_id for r in records],
        [r.sequence_number for r in records],
        [r.sub_sequence_number for r in records],
        [r.partition_key for r in records],
        [r.data for r in records],
        [r.approximate_arrival_timestamp for r in records],
        [r.message_id for r in records] if message_ids is None else list(message_ids),
        attempt_list,
    ]
    schema = arrow_schema()
    return pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, schema)], schema=schema)


def columns_to_arrow(stream_name: str, rows: Any, attempts: Sequence[int] | int = 1) -> Any:
    """A ``pyarrow.Table`` in :data:`COLUMNS` of ``rows``, a ``pyarrow.RecordBatch`` (or table) of the columnar
    schema (:func:`kinesis_spout.kinesis.retrieval.arrow_columns.schema`: what ``ColumnBatch.to_arrow()`` gives), with
    no Python object per row: the stream name repeated, each row's message id joined in Arrow (``shard:sequence``,
    ``:sub`` added for a de-aggregated record but the first, as :attr:`~kinesis_spout.records.Record.message_id`),
    and ``attempts`` (one for every row, or each row's).

    The same rows as :func:`records_to_arrow` of the same records. Who calls: the pipeline's columnar batches and the
    readStream and batch readers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows.num_rows
    shard, seq, sub = rows.column(0), rows.column(1), rows.column(2)
    mids = pc.binary_join_element_wise(shard, seq, ":")
    if sub.null_count < n:
        with_sub = pc.binary_join_element_wise(mids, pc.cast(sub, pa.string()), ":")
        mids = pc.if_else(pc.fill_null(pc.not_equal(sub, 0), False), with_sub, mids)
    if isinstance(attempts, int):
        tries = pa.repeat(pa.scalar(attempts, pa.int32()), n)
    else:
        if len(attempts) != n:
            raise ValueError(f"{n} rows but {len(attempts)} attempts")
        tries = pa.array(attempts, pa.int32())
    schema = arrow_schema()
    columns = [pa.repeat(pa.scalar(stream_name, pa.string()), n), shard, seq, sub, rows.column(3), rows.column(4),
               rows.column(5), mids, tries]
    return pa.Table.from_arrays(columns, schema=schema)
