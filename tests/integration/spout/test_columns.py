"""The columnar batch (``KinesisSpout.next_columns``) on moto and kinesalite: the rows of its Arrow batches are the
records ``next_batch`` delivers (plain records, KPL user records, a large record), and acking and failing rows moves
the checkpoints exactly as acking and failing the same tuples of a ``SpoutBatch``."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kinesis_spout import ColumnBatch, KinesisSpout, MemoryCheckpointStore, RetryBackoff
from kinesis_spout.kinesis.retrieval.arrow_columns import FIELDS
from kinesis_spout.records import Record
from kinesis_spout.testing.kinesis import KinesisEndpoint

from ..support import aggregate, make_config

USERS = [(f"user-{i % 5}", f"event {i}".encode()) for i in range(12)]
LIMIT_S = 20.0


def take_columns(spout: KinesisSpout, want: int, max_records: int = 500) -> list[ColumnBatch]:
    """Columnar batches until ``want`` rows came (bounded wait); none acked."""
    batches: list[ColumnBatch] = []
    deadline = time.monotonic() + LIMIT_S
    while sum(map(len, batches)) < want:
        assert time.monotonic() < deadline, f"only {sum(map(len, batches))} of {want} rows came"
        batch = spout.next_columns(max_records=min(max_records, want - sum(map(len, batches))), timeout_s=0.5)
        if batch:
            batches.append(batch)
    return batches


def take_tuples(spout: KinesisSpout, want: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + LIMIT_S
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} tuples came"
        got.extend(spout.next_batch(max_records=want - len(got), timeout_s=0.5))
    return got


def row_of(record: Record) -> dict[str, Any]:
    return {name: record[i] for i, name in enumerate(FIELDS)}


def test_columns_hold_the_records_next_batch_delivers_and_row_acks_move_checkpoints_as_tuple_acks(
        kinesis_backend: KinesisEndpoint) -> None:
    """Two apps read one stream (plain records, two KPL aggregates, a 900 KiB record): one by columns, one by tuples.
    Rows equal the tuples' records field for field; the columnar app fails two rows with ``ack_except``, the other
    the same tuples; the rows come back at attempt 2, are acked, and both apps store the same checkpoints."""
    stream = kinesis_backend.create_stream(shards=1)
    big = bytes(range(256)) * 3600
    kinesis_backend.put(stream, [b"first", USERS[0][1], big], partition_keys=["p0", "p1", "big"])
    (pk1, blob1), (pk2, blob2) = aggregate(USERS[:7]), aggregate(USERS[7:])
    kinesis_backend.put(stream, [blob1, b"middle", blob2], partition_keys=[pk1, "p2", pk2])
    want = 3 + 7 + 1 + 5
    backoff = RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0)
    by_cols, by_tuples = MemoryCheckpointStore(), MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesis_backend, stream, retry_backoff=backoff), by_cols) as cols, \
            KinesisSpout(make_config(kinesis_backend, stream, retry_backoff=backoff), by_tuples) as tuples:
        batches = take_columns(cols, want)
        records = [r for b in batches for r in b]
        got = take_tuples(tuples, want)
        assert records == [t.record for t in got]
        assert [row for b in batches for row in b.to_arrow().to_pylist()] == [row_of(t.record) for t in got]
        assert [b.message_id(i) for b in batches for i in range(len(b))] == [t.message_id for t in got]
        assert [r.sub_sequence_number for r in records] == [None] * 3 + list(range(7)) + [None] + list(range(5))
        assert records[2].data == big
        # fail rows 4 and 12 (user records of both aggregates), ack the rest
        failed = {got[4].message_id, got[12].message_id}
        whole = batches[0] if len(batches) == 1 else None
        if whole is None:  # the rows came in several batches: ack_except each with its own rows
            start = 0
            for b in batches:
                b.ack_except([i for i in range(len(b)) if got[start + i].message_id in failed])
                start += len(b)
        else:
            whole.ack_except([4, 12])
        tuples.ack_many(t.message_id for t in got if t.message_id not in failed)
        tuples.fail_many(sorted(failed))
        again = take_columns(cols, 2)
        assert sorted(b.message_id(i) for b in again for i in range(len(b))) == sorted(failed)
        assert [a for b in again for a in b.attempts] == [2, 2]
        for b in again:
            b.ack()
        retried = take_tuples(tuples, 2)
        assert {(t.message_id, t.attempt) for t in retried} == {(mid, 2) for mid in failed}
        tuples.ack_many(retried)
        assert cols.flush_checkpoints() and tuples.flush_checkpoints()
        assert all(m.inflight == 0 for m in cols.metrics())
    positions = [{shard: (c.sequence_number, c.sub_sequence_number) for shard, c in store.list().items()}
                 for store in (by_cols, by_tuples)]
    assert positions[0] == positions[1] and positions[0]


def test_a_row_that_is_not_in_the_batch_is_refused_with_the_rows_it_has(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [b"a", b"b"])
    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as spout:
        batches = take_columns(spout, 2)
        last = len(batches[0]) - 1
        refusal = rf"row 7 is not a row of this columnar batch: rows are ints 0 \.\. {last}"
        with pytest.raises(ValueError, match=refusal):
            batches[0].fail([7])
        for batch in batches:
            batch.ack()


def test_a_row_failed_past_its_retries_is_dead_lettered_as_its_record(kinesalite: KinesisEndpoint) -> None:
    """With ``retry_limit=0`` a failed row goes to the dead-letter handler at once, as the record it was (made from
    the columns only then), and the checkpoint moves past it once written."""
    stream = kinesalite.create_stream(shards=1)
    (pk, blob) = aggregate(USERS[:4])
    kinesalite.put(stream, [b"plain", blob], partition_keys=["p", pk])
    dead: list[Record] = []
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, retry_limit=0, dead_letter=lambda record, reason: dead.append(record))
    with KinesisSpout(config, store) as spout:
        batches = take_columns(spout, 5)
        records = [r for b in batches for r in b]
        row = next(i for i, r in enumerate(records) if r.sub_sequence_number == 2)
        start = 0
        for b in batches:
            b.ack_except([row - start] if start <= row < start + len(b) else [])
            start += len(b)
        assert spout.flush_checkpoints()
        assert dead == [records[row]]
    assert [(c.sequence_number, c.sub_sequence_number) for c in store.list().values()] == \
        [(records[-1].sequence_number, None)]


def test_record_and_columnar_batches_take_the_shards_due_retries_in_one_turn(kinesalite: KinesisEndpoint) -> None:
    """A consumer that asks for both kinds of batch gets the due retries of the shards in turn across them: the
    shard whose retry a record batch just took waits for the other's in the next columnar batch."""
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(16)], partition_keys=[f"k{i}" for i in range(16)])
    assert len({shard for shard, _ in placed}) == 2
    backoff = RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0)
    with KinesisSpout(make_config(kinesalite, stream, retry_backoff=backoff), MemoryCheckpointStore()) as spout:
        spout.fail_many([t.message_id for t in take_tuples(spout, 16)])
        by_record = take_tuples(spout, 1)[0]
        by_columns = take_columns(spout, 1, max_records=1)[0]
        assert (by_record.attempt, by_columns.attempts) == (2, [2])
        assert by_columns.record(0).shard_id != by_record.record.shard_id
