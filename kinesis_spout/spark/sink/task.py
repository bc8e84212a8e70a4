"""One write task of the sink: the rows of a Spark partition (Arrow record batches) put into Kinesis.

Each Arrow batch is checked row by row first (:func:`~kinesis_spout.kinesis.writing.putter.entry_problem`): a row
Kinesis
cannot take fails the task before any row of its batch is put, with an error naming the row, or goes to the
dead-letter directory when ``deadLetterPath`` is set. Then the batch's records are put through the shared writer
(:class:`~kinesis_spout.kinesis.writing.putter.RecordPutter`: calls of at most 500 records and 5 MiB, refused entries
alone put
again with jittered backoff until ``putDeadlineS``), as KPL aggregates by shard when ``aggregate`` is on
(:class:`~kinesis_spout.kinesis.writing.aggregate_writer.AggregatingWriter`). When the deadline passes the task fails
and
Spark runs it again: rows already put are put again (at-least-once).

Runs on an executor (a Spark Python worker); the Kinesis client is the worker process's
(:data:`~kinesis_spout.spark.shared.clients.WORKER_CLIENTS`), and so is the shard map an aggregating task starts from
(:mod:`~kinesis_spout.spark.sink.maps`). A batch whose rows are all within Kinesis' limits is checked on whole
Arrow columns (:mod:`~kinesis_spout.spark.sink.batches`), the others row by row.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Iterator

from kinesis_spout.errors import InvalidRecordError
from kinesis_spout.kinesis.writing.aggregate_writer import Aggregate, AggregatingWriter
from kinesis_spout.kinesis.writing.putter import PutEntry, RecordPutter, entry_problem
from kinesis_spout.kinesis.writing.routing import ShardMap
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.spark.sink.batches import checked_entries
from kinesis_spout.spark.sink.columns import Columns
from kinesis_spout.spark.sink.maps import keep_map, known_map
from kinesis_spout.spark.sink.options import SinkOptions

__all__ = ["SinkCounts", "put_policy", "write_task"]


def put_policy(deadline_s: float) -> RetryPolicy:
    """Pauses before refused entries are put again: 0.1 s doubling up to 5 s, full jitter (writers throttled
    together do not retry together), for at most ``deadline_s`` per call."""
    return RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=5.0, jitter=1.0, deadline_s=deadline_s)


@dataclass
class SinkCounts:
    """What one task (or, summed, one write) did: ``rows`` seen, ``user_records`` put (rows written), ``records_put``
    Kinesis records accepted (aggregates count once), ``records_retried`` entries sent again, ``records_failed``
    entries given up on, ``throttled`` entries or calls refused for throughput, ``bytes_put`` bytes accepted,
    ``dead_lettered`` rows written to the dead-letter directory, ``map_refreshes`` shard listings after a reshard."""

    rows: int = 0
    user_records: int = 0
    records_put: int = 0
    records_retried: int = 0
    records_failed: int = 0
    throttled: int = 0
    bytes_put: int = 0
    dead_lettered: int = 0
    map_refreshes: int = 0

    def add(self, other: "SinkCounts") -> None:
        """Add ``other``'s counts to these (the driver's sum of its tasks')."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def describe(self) -> str:
        return ", ".join(f"{f.name.replace('_', ' ')} {getattr(self, f.name)}" for f in fields(self))


class _Rejects:
    """The dead-letter file of one task: rows Kinesis cannot take, one JSON object a line (``row``, ``reason``,
    ``partition_key``, ``data_base64``), named after the stream and the task. Opened on the first reject, flushed and
    fsynced by ``close()``. The task's thread only."""

    def __init__(self, directory: str, stream: str, task: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{stream}-{task}").strip("-")
        self.path = os.path.join(directory, f"sink-{safe}-{uuid.uuid4().hex[:8]}.jsonl")
        self._file: Any = None

    def write(self, row: int, reason: str, data: Any, partition_key: Any) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        raw = data if isinstance(data, (bytes, bytearray)) else None
        self._file.write(json.dumps({"row": row, "reason": reason, "partition_key": partition_key,
                                     "data_base64": base64.b64encode(raw).decode() if raw is not None else None})
                         + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None


def _texts(column: Any) -> list[Any]:
    return column.to_pylist()


def _rows(batch: Any, columns: Columns, options: SinkOptions) -> Iterator[tuple[Any, Any, Any]]:
    """(data as bytes or None, partition key, explicit hash key) of each row of an Arrow batch."""
    names = batch.schema.names
    datas = batch.column(names.index(columns.data)).to_pylist()
    if columns.data_is_text:
        datas = [None if d is None else d.encode("utf-8") for d in datas]
    n = len(datas)
    pks = _texts(batch.column(names.index(columns.partition_key))) if columns.partition_key else \
        [options.partition_key] * n
    ehks = _texts(batch.column(names.index(columns.explicit_hash_key))) if columns.explicit_hash_key else \
        [None] * n
    return zip(datas, pks, ehks)


def _checked_rows(batch: Any, columns: Columns, options: SinkOptions, counts: SinkCounts, rejects: _Rejects | None,
                  task: str) -> list[tuple[int, PutEntry]]:
    """The entries of ``batch`` checked row by row (a batch where a row may be refused): InvalidRecordError naming
    the first row Kinesis cannot take, or such rows written to ``rejects``. Counts the rows (and the rejects)."""
    stream = options.stream_name
    entries: list[tuple[int, PutEntry]] = []
    for data, pk, ehk in _rows(batch, columns, options):
        row = counts.rows
        counts.rows += 1
        problem = entry_problem(data, pk, ehk)
        if problem is not None:
            if rejects is None:
                raise InvalidRecordError(
                    f"row {row} of {task} cannot be written to stream {stream!r}: {problem}. Nothing of its "
                    f"batch was put ({counts.user_records} earlier rows of this task were, and are put again "
                    f"if Spark retries the task). Filter or fix such rows before the write (e.g. "
                    f"df.where('data IS NOT NULL')), or set the option deadLetterPath to set them aside")
            rejects.write(row, problem, data, pk)
            counts.dead_lettered += 1
            continue
        entries.append((row, PutEntry(bytes(data), pk, ehk)))
    return entries


def _row_name(task: str) -> Callable[[int], str]:
    """How the putter names a row in the error of a call Kinesis refused as a whole."""
    return lambda row: f"row {row} of {task}"


def _aggregate_name(task: str) -> Callable[[Aggregate[int]], str]:
    """How the putter names an aggregate: by the rows it holds."""
    def name(aggregate: Aggregate[int]) -> str:
        rows = [m[0] for m in aggregate[1]]
        shown = ", ".join(str(r) for r in rows[:5]) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")
        return f"the aggregate of rows {shown} of {task}"
    return name


def write_task(batches: Iterable[Any], options: SinkOptions, columns: Columns, client: Any, task: str,
               counts: SinkCounts | None = None) -> SinkCounts:
    """Put the rows of ``batches`` (pyarrow RecordBatches) into the stream; returns the task's counts. Raises
    InvalidRecordError naming a row Kinesis cannot take (without ``deadLetterPath``), PutRecordsError when records
    stay refused past ``putDeadlineS``. ``task`` names the task in errors. Changes the stream (and the dead-letter
    directory)."""
    counts = counts if counts is not None else SinkCounts()
    name = _aggregate_name(task) if options.aggregate else _row_name(task)
    putter: RecordPutter[Any] = RecordPutter(options.stream_name, client, put_policy(options.put_deadline_s),
                                             name=name)
    stream = options.stream_name
    aggregating = AggregatingWriter(putter, lambda: ShardMap.load(client, stream),
                                    shard_map=known_map(options.config)) if options.aggregate else None
    rejects = _Rejects(options.dead_letter_path, stream, task) if options.dead_letter_path else None
    try:
        for batch in batches:
            entries = checked_entries(batch, columns, options, counts.rows)
            if entries is not None:
                counts.rows += len(entries)
            else:
                entries = _checked_rows(batch, columns, options, counts, rejects, task)
            if not entries:
                continue
            if aggregating is not None:
                counts.user_records += len(aggregating.put(entries))
            else:
                counts.user_records += len(putter.put(entries))
    finally:
        if rejects is not None:
            rejects.close()
        done = putter.counters.snapshot()
        counts.records_put += done["records_put"]
        counts.records_retried += done["records_retried"]
        counts.records_failed += done["records_failed"]
        counts.throttled += done["throttled"]
        counts.bytes_put += done["bytes_put"]
        if aggregating is not None:
            counts.map_refreshes += aggregating.refreshes
    if aggregating is not None and aggregating.current_map is not None:
        keep_map(options.config, aggregating.current_map)
    return counts
