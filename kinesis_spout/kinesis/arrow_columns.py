"""Arrow record batches of records read from Kinesis: the columnar form the spout hands out (``next_columns()``).

One schema (:data:`SCHEMA`), built two ways with no Python loop over the records: from the decoder's columns
(:func:`batch_of_columns`) and from :class:`~kinesis_spout.records.Record` objects (:func:`batch_of_records`, a
``map`` per field in C). Arrival times are microseconds since the epoch (Arrow ``timestamp[us, UTC]``): from the
seconds a reply sends, computed in Arrow exactly as ``datetime.fromtimestamp`` rounds them (half to even on the
fraction's microseconds), so both ways give the same values.

pyarrow (a dependency of the package) is imported when a batch is first built. Who calls: the spout's columnar batch
(:mod:`kinesis_spout.spout.columns`), the tests and the benchmarks.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Sequence

from kinesis_spout.kinesis.wire_columns import RecordColumns
from kinesis_spout.records import Record

__all__ = ["FIELDS", "batch_of_columns", "batch_of_records", "schema"]

#: The columns of a batch, in order: the fields of :class:`~kinesis_spout.records.Record` a consumer reads.
FIELDS = ("shard_id", "sequence_number", "sub_sequence_number", "partition_key", "data",
          "approximate_arrival_timestamp")
_GET = [itemgetter(i) for i in range(6)]  # Record's first six fields, in FIELDS' order
_SCHEMA: Any = None


def schema() -> Any:
    """The ``pyarrow.Schema`` of every batch: strings for the shard id, sequence number (up to 56 digits: no integer
    type holds it) and partition key, ``int64`` sub-sequence numbers (null for a plain record), ``binary`` data and
    ``timestamp[us, tz=UTC]`` arrival times."""
    global _SCHEMA
    if _SCHEMA is None:
        import pyarrow as pa

        _SCHEMA = pa.schema([("shard_id", pa.string()), ("sequence_number", pa.string()),
                             ("sub_sequence_number", pa.int64()), ("partition_key", pa.string()),
                             ("data", pa.binary()), ("approximate_arrival_timestamp", pa.timestamp("us", tz="UTC"))])
    return _SCHEMA


def _arrival_us(seconds: Sequence[float | None]) -> Any:
    """Epoch seconds as ``timestamp[us, UTC]``, rounded as ``datetime.fromtimestamp`` rounds them: the whole seconds
    (truncated toward zero), plus the fraction's microseconds rounded half to even."""
    import pyarrow as pa
    import pyarrow.compute as pc

    secs = pa.array(seconds, pa.float64())
    whole = pc.trunc(secs)
    frac = pc.round(pc.multiply(pc.subtract(secs, whole), 1e6), round_mode="half_to_even")
    micros = pc.add(pc.multiply(pc.cast(whole, pa.int64()), 1_000_000), pc.cast(frac, pa.int64()))
    return micros.cast(pa.timestamp("us", tz="UTC"))


def batch_of_columns(columns: RecordColumns) -> Any:
    """A ``pyarrow.RecordBatch`` (:func:`schema`) of the decoder's columns."""
    import pyarrow as pa

    sch = schema()
    n = len(columns.sequence_numbers)
    subs = columns.sub_sequence_numbers
    arrivals = _arrival_us(columns.arrivals) if columns.arrivals_are_seconds else \
        pa.array(columns.arrivals, sch.field(5).type)
    return pa.RecordBatch.from_arrays(
        [pa.repeat(pa.scalar(columns.shard_id, pa.string()), n),
         pa.array(columns.sequence_numbers, pa.string()),
         pa.nulls(n, pa.int64()) if subs is None else pa.array(subs, pa.int64()),
         pa.array(columns.partition_keys, pa.string()), pa.array(columns.data, pa.binary()), arrivals],
        schema=sch)


def batch_of_records(records: Sequence[Record]) -> Any:
    """A ``pyarrow.RecordBatch`` (:func:`schema`) of ``records`` (of any shards), one row a record, in order."""
    import pyarrow as pa

    sch = schema()
    return pa.RecordBatch.from_arrays([pa.array(list(map(get, records)), field.type)
                                       for get, field in zip(_GET, sch)], schema=sch)
