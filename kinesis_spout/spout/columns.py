"""The columnar batch: :class:`ColumnBatch`, what ``KinesisSpout.next_columns()`` returns.

A columnar batch is the records of one take as an Arrow record batch (:meth:`ColumnBatch.to_arrow`), acked and
failed as a :class:`~kinesis_spout.spout.batch.SpoutBatch` is (it keeps one inside: the same spans of the shards'
trackers, the same retries one by one), with rows named by their index in the batch instead of message ids.

No object is made per record on the way: the shard readers keep what they read as the columns it was decoded into
(:class:`~kinesis_spout.kinesis.retrieval.chunks.ChunkBuffer`), :class:`ColumnTaker` takes those columns, puts them in
flight as one span per shard and piece with a :class:`~kinesis_spout.kinesis.retrieval.wire_columns.RowSource` standing
in for each record (the record is made only if it is retried or dead-lettered), and the Arrow batch is built from the
columns. No scheme runs and no :class:`~kinesis_spout.records.SpoutTuple` is made: a tuple is made for a row that is
failed, and a consumer that iterates the batch gets each row's :class:`~kinesis_spout.records.Record`, made then.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from kinesis_spout.kinesis.retrieval.arrow_columns import batch_of_pieces
from kinesis_spout.kinesis.retrieval.wire_columns import (
    RecordColumns,
    RowSource,
    column_sizes,
    columns_bytes,
    columns_of_records,
    in_rank_order,
    ranks_of,
    record_of,
    slice_columns,
    to_records,
)
from kinesis_spout.records import Record, SpoutTuple, message_id, records_bytes
from kinesis_spout.spout.batch import SpoutBatch
from kinesis_spout.spout.emission import TAKE_CHUNK

if TYPE_CHECKING:
    from kinesis_spout.records import SequenceKey
    from kinesis_spout.spout.emission import Emitter
    from kinesis_spout.spout.shards import ShardLifecycle

__all__ = ["ColumnBatch", "ColumnTaker"]


class ColumnBatch:
    """The records of one ``next_columns()`` call, as Arrow columns, ackable whole.

    - :meth:`to_arrow`: a ``pyarrow.RecordBatch`` of the rows (``shard_id``, ``sequence_number``,
      ``sub_sequence_number``, ``partition_key``, ``data``, ``approximate_arrival_timestamp``; see
      :func:`kinesis_spout.kinesis.retrieval.arrow_columns.schema`), built on the first call;
    - :meth:`ack`: every row is done (but those failed through the batch);
    - :meth:`fail`: these rows failed (each retried after its backoff, dead-lettered once its retries run out);
    - :meth:`ack_except`: fail these rows and ack the others, under one lock hold.

    Acks and fails go through the same span tracker as a :class:`~kinesis_spout.spout.batch.SpoutBatch`, with the
    same guarantees: a row failed since by message id, or out again in a later batch at a later attempt, is left to
    that one; acking twice changes nothing. ``len()`` is the number of rows; iterating gives each row's
    :class:`~kinesis_spout.records.Record` (made then). :attr:`attempts` gives each row's attempt (1 for a record
    emitted the first time).
    """

    __slots__ = ("_batch", "_pieces", "_tries", "_ends", "_arrow")

    def __init__(self, batch: SpoutBatch, pieces: list[RecordColumns], tries: list[int]) -> None:
        self._batch = batch
        self._pieces = pieces  # the rows, piece after piece (a run of one shard's records, or one retried record)
        self._tries = tries  # each piece's attempt
        self._ends = list(accumulate(map(len, pieces)))  # rows up to the end of each piece
        self._arrow: Any = None

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __bool__(self) -> bool:
        return bool(self._ends)

    def __iter__(self) -> Iterator[Record]:
        for piece in self._pieces:
            yield from to_records(piece)

    @property
    def nbytes(self) -> int:
        """The rows' bytes, as :attr:`Record.size <kinesis_spout.records.Record.size>` counts a record's."""
        return sum(map(columns_bytes, self._pieces))

    @property
    def attempts(self) -> list[int]:
        """Each row's attempt, in row order."""
        out: list[int] = []
        for piece, attempt in zip(self._pieces, self._tries):
            out.extend([attempt] * len(piece))
        return out

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.RecordBatch``, in the order taken (built once, then the same object)."""
        if self._arrow is None:
            self._arrow = batch_of_pieces(self._pieces)
        return self._arrow

    def _locate(self, row: int) -> tuple[int, int]:
        """(piece, index in it) of ``row``; ``ValueError`` for an index that is not a row."""
        n = len(self)
        if not isinstance(row, int) or isinstance(row, bool) or not 0 <= row < n:
            raise ValueError(f"row {row!r} is not a row of this columnar batch: rows are ints 0 .. {n - 1} (the "
                             f"index of a row in to_arrow())")
        p = bisect_right(self._ends, row)
        return p, row - (self._ends[p - 1] if p else 0)

    def record(self, row: int) -> Record:
        """Row ``row``'s :class:`~kinesis_spout.records.Record` (made now)."""
        p, i = self._locate(row)
        return to_records(slice_columns(self._pieces[p], i, i + 1))[0]

    def message_id(self, row: int) -> str:
        """The message id of row ``row`` (what ``spout.ack``/``spout.fail`` take)."""
        p, i = self._locate(row)
        piece = self._pieces[p]
        subs = piece.sub_sequence_numbers
        sub = subs[i] if subs is not None else None
        seq = piece.sequence_numbers[i]
        return f"{piece.shard_id}:{seq}:{sub}" if sub else f"{piece.shard_id}:{seq}"

    def _tuples(self, rows: Iterable[int]) -> list[str]:
        """The message ids of ``rows``, their tuples (record and attempt, no values) added to the inner batch so
        that it fails each row's own emission."""
        located = [self._locate(row) for row in rows]  # every row checked before any is failed
        tuples = []
        for p, i in located:
            record = to_records(slice_columns(self._pieces[p], i, i + 1))[0]
            tuples.append(SpoutTuple(message_id(record[0], record[6]), record, None, self._tries[p]))
        list.extend(self._batch, tuples)
        return [t.message_id for t in tuples]

    def ack(self) -> None:
        """Every row was processed: ack them all (those failed through :meth:`fail` excepted). Raises
        ``SpoutStateError`` unless the spout is open; a second call does nothing."""
        self._batch.ack()

    def fail(self, rows: Iterable[int]) -> None:
        """These rows failed (their indexes): each is emitted again after its backoff, or dead-lettered once its
        retries ran out; :meth:`ack` will not ack them. Raises ``ValueError`` for an index that is not a row (before
        failing any), ``SpoutStateError`` unless the spout is open."""
        self._batch.fail(self._tuples(list(rows)))

    def ack_except(self, rows: Iterable[int]) -> None:
        """Fail ``rows`` (as :meth:`fail`) and ack every other row, under one lock hold."""
        self._batch.ack_except(self._tuples(list(rows)))

    def __repr__(self) -> str:
        return f"ColumnBatch({len(self)} rows)"


def _note_aggregates(aggregates: dict[int, int], columns: RecordColumns) -> None:
    """:func:`kinesis_spout.spout.kpl.note_aggregates` for columns: each KPL aggregate's count of user records (one
    ``int()`` an aggregate)."""
    counts = columns.aggregated
    if counts is None:
        return
    for sequence, count in dict(zip(columns.sequence_numbers, counts)).items():
        if count:
            aggregates.setdefault(int(sequence), count)


class ColumnTaker:
    """Fills columnar batches for the facade (the spout's lock held), through the facade's :class:`Emitter`: its
    room per shard, its housekeeping, its dead-letter glue, its turn over the shards' due retries."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter

    def fill(self, batch: SpoutBatch, pieces: list[RecordColumns], tries: list[int], now: float, limit: int,
             byte_limit: int) -> None:
        """Append what is ready to ``pieces`` and ``tries`` (their spans and retries to ``batch``), up to ``limit``
        rows and about ``byte_limit`` bytes (at least one record). An error of a take is raised; the rows appended
        before it stay."""
        emitter = self.emitter
        rr = emitter.registry.rr
        retries = emitter.has_retries()
        rows = size = 0
        while rows < limit and size < byte_limit:
            if retries:
                got = self._next_retry(now, batch)
                if got is not None:
                    record, attempt = got
                    pieces.append(columns_of_records([record]))
                    tries.append(attempt)
                    rows += 1
                    size += record.size
                    continue
                retries = False  # none due now: new records
            taken = rr.next_columns(emitter.room(byte_limit - size), min(limit - rows, TAKE_CHUNK))
            if not taken:
                break
            for columns in taken:
                kept, nbytes = self._put(columns, now, batch)
                if len(kept):
                    pieces.append(kept)
                    tries.append(1)
                    rows += len(kept)
                    size += nbytes

    def _put(self, columns: RecordColumns, now: float, into: SpoutBatch) -> tuple[RecordColumns, int]:
        """Put a piece of one shard's records in flight as one span (replays of records emitted already dropped);
        returns what went in flight and its bytes. Without reliability the span is acked at once."""
        emitter = self.emitter
        state = emitter.registry.shards[columns.shard_id]
        tracker = state.tracker
        n = len(columns)
        if columns.sub_sequence_numbers is not None:
            _note_aggregates(state.aggregates, columns)
        try:
            if n and in_rank_order(columns):  # the span keeps its ends' ranks; the others are made if ever needed
                ends = slice_columns(columns, 0, 1), slice_columns(columns, n - 1, n)
                low, high = ranks_of(ends[0])[0], ranks_of(ends[1])[0]
                span = tracker.emit_span_of_ends(
                    n, low, high, now, lambda: (ranks_of(columns), column_sizes(columns)), [RowSource(columns)] * n,
                    columns_bytes(columns))
            else:
                ranks = ranks_of(columns)
                span = tracker.emit_span(ranks, now, [RowSource(columns, ranks)] * n, column_sizes(columns))
        except ValueError:  # not in increasing order (never seen from one reader): as the record path does it
            _state, records, _span = emitter.put_in_flight(to_records(columns), now, into)
            if records:
                self._settle(state, records, None)
            emitter.dead_letters.decoded(len(records))
            return (columns_of_records(records) if records else slice_columns(columns, 0, 0)), \
                records_bytes(records)
        skip = n - len(span) if span is not None else n
        kept = slice_columns(columns, skip, n) if skip else columns
        nbytes = span.first_bytes if span is not None else 0
        state.emitted_bytes += nbytes
        if span is not None and emitter.tracking.reliable:
            into.add_span(state, span)
        if len(kept):
            self._settle(state, None, span)
        emitter.dead_letters.decoded(len(kept))  # ends a run of dead letters in a row
        return kept, nbytes

    def _settle(self, state: ShardLifecycle, records: list[Record] | None, span: Any) -> None:
        """Without reliability, ack what was just put in flight (the span, or the records one by one)."""
        if self.emitter.tracking.reliable:
            return
        tracker = state.tracker
        if span is not None:
            tracker.ack_span(span)
        for record in records or ():
            tracker.ack(record.rank)
        self.emitter.registry.offer_checkpoint(state)

    def _next_retry(self, now: float, into: SpoutBatch) -> tuple[Record, int] | None:
        """The next due retry of any shard in turn (the record and its attempt), told to ``into``; None when none
        is due."""
        def use(state: ShardLifecycle, key: SequenceKey, item: Any, attempt: int) -> tuple[Record, int]:
            into.add_single(state, key.rank, message_id(state.shard_id, key), attempt)
            return record_of(item, key.rank), attempt

        return self.emitter.next_due_retry(now, use)
