"""The columnar batch: :class:`ColumnBatch`, what ``KinesisSpout.next_columns()`` returns.

A columnar batch is the records of one take as an Arrow record batch (:meth:`ColumnBatch.to_arrow`), acked and
failed as a :class:`~kinesis_spout.spout.batch.SpoutBatch` is (it keeps one inside: the same spans of the shards'
trackers, the same retries one by one), with rows named by their index in the batch instead of message ids. No
scheme runs and no :class:`~kinesis_spout.records.SpoutTuple` is made: a tuple is made only for a row that is failed,
and a consumer that iterates the batch gets the :class:`~kinesis_spout.records.Record` of each row.

:class:`ColumnTaker` fills it for the facade, with the spout's lock held: due retries first, then new records of
the shards under their in-flight limits, put in flight by the emitter (:meth:`Emitter.put_in_flight
<kinesis_spout.spout.emission.Emitter.put_in_flight>`) as one span per shard and chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator

from kinesis_spout.kinesis.arrow_columns import batch_of_records
from kinesis_spout.records import Record, SpoutTuple, message_id, records_bytes
from kinesis_spout.spout.batch import SpoutBatch
from kinesis_spout.spout.emission import TAKE_CHUNK

if TYPE_CHECKING:
    from kinesis_spout.spout.emission import Emitter

__all__ = ["ColumnBatch", "ColumnTaker"]


class ColumnBatch:
    """The records of one ``next_columns()`` call, as Arrow columns, ackable whole.

    - :meth:`to_arrow`: a ``pyarrow.RecordBatch`` of the rows (``shard_id``, ``sequence_number``,
      ``sub_sequence_number``, ``partition_key``, ``data``, ``approximate_arrival_timestamp``; see
      :func:`kinesis_spout.kinesis.arrow_columns.schema`), built on the first call;
    - :meth:`ack`: every row is done (but those failed through the batch);
    - :meth:`fail`: these rows failed (each retried after its backoff, dead-lettered once its retries run out);
    - :meth:`ack_except`: fail these rows and ack the others, under one lock hold.

    Acks and fails go through the same span tracker as a :class:`~kinesis_spout.spout.batch.SpoutBatch`, with the
    same guarantees: a row failed since by message id, or out again in a later batch at a later attempt, is left to
    that one; acking twice changes nothing. ``len()`` is the number of rows; iterating gives each row's
    :class:`~kinesis_spout.records.Record` (made then: the batch itself holds no object per row but what the
    readers read). ``attempts[i]`` is row i's attempt (1 for a record emitted the first time).
    """

    __slots__ = ("_batch", "_records", "attempts", "_arrow")

    def __init__(self, batch: SpoutBatch, records: list[Record], attempts: list[int]) -> None:
        self._batch = batch
        self._records = records
        self.attempts = attempts
        self._arrow: Any = None

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __bool__(self) -> bool:
        return bool(self._records)

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.RecordBatch``, in the order taken (built once, then the same object)."""
        if self._arrow is None:
            self._arrow = batch_of_records(self._records)
        return self._arrow

    def message_id(self, row: int) -> str:
        """The message id of row ``row`` (what ``spout.ack``/``spout.fail`` take)."""
        record = self._records[self._row(row)]
        return message_id(record[0], record[6])

    def _row(self, row: int) -> int:
        n = len(self._records)
        if not isinstance(row, int) or isinstance(row, bool) or not 0 <= row < n:
            raise ValueError(f"row {row!r} is not a row of this columnar batch: rows are ints 0 .. {n - 1} (the "
                             f"index of a row in to_arrow())")
        return row

    def _tuples(self, rows: Iterable[int]) -> list[str]:
        """The message ids of ``rows``, their tuples (record and attempt, no values) added to the inner batch so
        that it fails each row's own emission."""
        records, attempts = self._records, self.attempts
        tuples = [SpoutTuple(message_id(records[i][0], records[i][6]), records[i], None, attempts[i])
                  for i in map(self._row, rows)]
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
        return f"ColumnBatch({len(self._records)} rows)"


class ColumnTaker:
    """Fills columnar batches for the facade (the spout's lock held), through the facade's :class:`Emitter`: its
    room per shard, its housekeeping and :meth:`~kinesis_spout.spout.emission.Emitter.put_in_flight`. Owns its
    retry cursor (under the same lock)."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter
        self._retry_cursor = 0

    def fill(self, batch: SpoutBatch, records: list[Record], attempts: list[int], now: float, limit: int,
             byte_limit: int) -> None:
        """Append what is ready to ``records`` and ``attempts`` (their spans and retries to ``batch``), up to
        ``limit`` rows and about ``byte_limit`` bytes (at least one record). An error of a take is raised; the rows
        appended before it stay."""
        emitter = self.emitter
        registry = emitter.registry
        reliable = emitter.config.reliable
        retries = emitter.has_retries()
        size = 0
        while len(records) < limit and size < byte_limit:
            if retries:
                got = self._next_retry(now, batch)
                if got is not None:
                    records.append(got[0])
                    attempts.append(got[1])
                    size += records_bytes([got[0]])
                    continue
                retries = False  # none due now: new records
            taken = registry.rr.next_records(emitter.room(byte_limit - size), min(limit - len(records), TAKE_CHUNK))
            if not taken:
                break
            state, kept, span = emitter.put_in_flight(taken, now, batch)
            if not reliable and kept:  # acked on emission
                if span is not None:
                    state.tracker.ack_span(span)
                else:
                    for record in kept:
                        state.tracker.ack(record.rank)
                registry.offer_checkpoint(state)
            emitter.dead_letters.decoded(len(kept))  # ends a run of dead letters in a row
            records.extend(kept)
            attempts.extend([1] * len(kept))
            size += records_bytes(kept)

    def _next_retry(self, now: float, into: SpoutBatch) -> tuple[Record, int] | None:
        """The next due retry of any shard in turn (the record and its attempt), told to ``into``; None when none
        is due."""
        states = list(self.emitter.registry.shards.values())
        n = len(states)
        for i in range(n):
            state = states[(self._retry_cursor + i) % n]
            if not state.emits_retries:
                continue
            tracker = state.tracker
            if tracker.retry_queue_len and tracker.has_due_retry(now):
                got = tracker.next_retry(now)
                if got is None:
                    continue
                key, record, attempt = got
                self._retry_cursor = (self._retry_cursor + i + 1) % n
                into.add_single(state, key.rank, message_id(state.shard_id, key), attempt)
                return record, attempt
        return None
