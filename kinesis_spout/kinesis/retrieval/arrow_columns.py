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

from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Sequence

from kinesis_spout.kinesis.retrieval.wire_columns import RecordColumns
from kinesis_spout.records import Record

__all__ = ["FIELDS", "batch_of_columns", "batch_of_pieces", "batch_of_records", "schema"]

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
    return batch_of_pieces([columns])


def batch_of_pieces(pieces: Sequence[RecordColumns]) -> Any:
    """One ``pyarrow.RecordBatch`` (:func:`schema`) of several pieces of columns, in order: each column is built
    with one ``pyarrow.array`` over the pieces' lists chained (and the arrival times with one computation), so that
    Arrow's cost per call is paid once per batch, not once per piece."""
    import pyarrow as pa

    sch = schema()
    rows = sum(map(len, pieces))
    shard = pa.concat_arrays([pa.repeat(pa.scalar(p.shard_id, pa.string()), len(p)) for p in pieces]) if \
        len({p.shard_id for p in pieces}) > 1 else pa.repeat(pa.scalar(pieces[0].shard_id if pieces else "",
                                                                        pa.string()), rows)
    if all(p.sub_sequence_numbers is None for p in pieces):
        subs = pa.nulls(rows, pa.int64())
    else:
        subs = pa.array(list(chain.from_iterable(p.sub_sequence_numbers or repeat(None, len(p)) for p in pieces)),
                        pa.int64())
    if all(p.arrivals_are_seconds for p in pieces):
        arrivals = _arrival_us(list(chain.from_iterable(p.arrivals for p in pieces)))
    elif not any(p.arrivals_are_seconds for p in pieces):
        arrivals = pa.array(list(chain.from_iterable(p.arrivals for p in pieces)), sch.field(5).type)
    else:  # pieces decoded here and records made elsewhere (retries, pushed records)
        arrivals = pa.concat_arrays([_arrival_us(p.arrivals) if p.arrivals_are_seconds else
                                     pa.array(p.arrivals, sch.field(5).type) for p in pieces])
    return pa.RecordBatch.from_arrays(
        [shard, pa.array(list(chain.from_iterable(p.sequence_numbers for p in pieces)), pa.string()), subs,
         pa.array(list(chain.from_iterable(p.partition_keys for p in pieces)), pa.string()),
         pa.array(list(chain.from_iterable(p.data for p in pieces)), pa.binary()), arrivals], schema=sch)


def batch_of_records(records: Sequence[Record]) -> Any:
    """A ``pyarrow.RecordBatch`` (:func:`schema`) of ``records`` (of any shards), one row a record, in order."""
    import pyarrow as pa

    sch = schema()
    return pa.RecordBatch.from_arrays([pa.array(list(map(get, records)), field.type)
                                       for get, field in zip(_GET, sch)], schema=sch)
