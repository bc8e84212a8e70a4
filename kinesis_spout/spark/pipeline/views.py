"""A batch of the at-least-once pipeline as its runner handles it, in either of the spout's forms.

- :class:`ColumnView`: a :class:`~kinesis_spout.spout.columns.ColumnBatch` (``KinesisSpout.next_columns()``), the
  form of a pipeline on one stream. Its DataFrame is built from the columns the shard readers decoded (Arrow all
  the way, no :class:`~kinesis_spout.records.Record` or tuple per record), and ``process``'s failed message ids are
  matched against its ``message_id`` column in Arrow.
- :class:`TupleView`: a list of :class:`~kinesis_spout.records.SpoutTuple` (``next_batch()``), the form of a
  ``MultiStreamSpout`` (which has no columnar batch): the DataFrame is built from the records.

Both give the same columns (:data:`kinesis_spout.spark.shared.schema.COLUMNS`) for the same records, the same figures
for :class:`~kinesis_spout.spark.pipeline.batch.Batch`, and settle the batch the same way: the rows ``process`` named
are failed (retried, then dead-lettered, by the spout), the others acked, names not in the batch returned to be logged.
Who calls: :class:`~kinesis_spout.spark.pipeline.at_least_once.AtLeastOnceRunner`, on its run thread.
"""

from __future__ import annotations

from typing import Any, Protocol

from kinesis_spout.records import SpoutTuple
from kinesis_spout.spark.shared.schema import columns_to_arrow, records_to_arrow
from kinesis_spout.spout import KinesisSpout
from kinesis_spout.spout.batch import SpoutBatch
from kinesis_spout.spout.columns import ColumnBatch
from kinesis_spout.spout.multi import MultiStreamBatch, MultiStreamSpout, split_message_id

__all__ = ["BatchView", "ColumnView", "TupleView"]


class BatchView(Protocol):
    """What the runner needs of a batch: its figures, its Arrow table (the same on every try), and settling it."""

    records: int
    bytes: int
    retries: int
    max_attempt: int
    shards: tuple[str, ...]

    def table(self) -> Any:
        """The batch as a ``pyarrow.Table`` in the Spark columns (built on the first call)."""

    def settle(self, failed: set[str]) -> tuple[int, list[str]]:
        """Fail the rows whose message id is in ``failed``, ack the others; returns (rows failed, the ids of
        ``failed`` that name no row of the batch, sorted)."""


class ColumnView:
    """A columnar batch of a :class:`~kinesis_spout.KinesisSpout` on ``stream_name`` (see the module docstring)."""

    def __init__(self, columns: ColumnBatch, stream_name: str) -> None:
        import pyarrow.compute as pc

        self.columns = columns
        self.stream_name = stream_name
        self._rows = rows = columns.to_arrow()
        attempts = columns.attempts
        self.records = len(columns)
        self.max_attempt = max(attempts)
        self.retries = 0 if self.max_attempt == 1 else sum(1 for a in attempts if a > 1)
        self._attempts: list[int] | int = 1 if self.max_attempt == 1 else attempts
        self.bytes = columns.nbytes
        self.shards = tuple(sorted(pc.unique(rows.column(0)).to_pylist()))
        self._table: Any = None

    def table(self) -> Any:
        if self._table is None:
            self._table = columns_to_arrow(self.stream_name, self._rows, self._attempts)
        return self._table

    def settle(self, failed: set[str]) -> tuple[int, list[str]]:
        if not failed:
            self.columns.ack()
            return 0, []
        import pyarrow as pa
        import pyarrow.compute as pc

        ids = self.table().column("message_id")
        rows = pc.indices_nonzero(pc.is_in(ids, value_set=pa.array(sorted(failed), pa.string()))).to_pylist()
        self.columns.ack_except(rows)
        named = set(pc.take(ids, pa.array(rows, pa.int64())).to_pylist()) if rows else set()
        return len(rows), sorted(failed - named)


class TupleView:
    """The tuples of ``next_batch()`` (of a :class:`~kinesis_spout.KinesisSpout` on ``stream_name``, or of a
    ``MultiStreamSpout``: each record's stream named by its message id)."""

    def __init__(self, spout: KinesisSpout | MultiStreamSpout, tuples: list[SpoutTuple], stream_name: str) -> None:
        self.spout = spout
        self.tuples = tuples
        records = self._records = [t.record for t in tuples]
        self._attempts = attempts = [t.attempt for t in tuples]
        self._streams: str | list[str] = stream_name
        self._ids: list[str] | None = None
        if isinstance(spout, MultiStreamSpout):  # each record's stream, named by its id
            self._streams = [split_message_id(t.message_id)[0] for t in tuples]
            self._ids = [t.message_id for t in tuples]
        self.records = len(records)
        self.bytes = sum(r.size for r in records)
        self.retries = sum(1 for a in attempts if a > 1)
        self.max_attempt = max(attempts)
        self.shards = tuple(sorted({r.shard_id for r in records} if self._ids is None else
                                   {f"{s}/{r.shard_id}" for s, r in zip(self._streams, records)}))
        self._table: Any = None

    def table(self) -> Any:
        if self._table is None:
            self._table = records_to_arrow(self._streams, self._records, self._attempts, self._ids)
        return self._table

    def settle(self, failed: set[str]) -> tuple[int, list[str]]:
        tuples = self.tuples
        to_fail = [t.message_id for t in tuples if t.message_id in failed]
        if isinstance(tuples, (SpoutBatch, MultiStreamBatch)):  # the spout's batch: acked whole, a cost per shard
            tuples.ack_except(to_fail)
        else:
            self.spout.fail_many(to_fail)
            self.spout.ack_many(t.message_id for t in tuples if t.message_id not in failed)
        strays = sorted(failed - {t.message_id for t in tuples}) if len(failed) > len(to_fail) else []
        return len(to_fail), strays
