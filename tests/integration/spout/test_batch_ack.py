"""Acking a batch whole (``SpoutBatch.ack``/``fail``/``ack_except``): checkpoints move exactly as acking each tuple
would, failed tuples are retried and dead-lettered, and a batch never acks a record it does not own any more.
kinesalite (real sequence numbers) and a real ZooKeeper through the fixtures."""

from __future__ import annotations

import time
from typing import Any

from kinesis_spout import KinesisSpout, SpoutBatch, SpoutStateError
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing import stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import TIMEOUT_S, make_config, put_into_shards


def zk_config(endpoint: KinesisEndpoint, zookeeper: Any, stream: str, app: str, **extra: Any) -> Any:
    return make_config(endpoint, stream, app_name=app, zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
                       **extra)


def take(spout: KinesisSpout, want: int, max_records: int) -> list[SpoutBatch]:
    """Batches of at most ``max_records`` until ``want`` tuples came (bounded wait); none acked."""
    batches: list[SpoutBatch] = []
    deadline = time.monotonic() + TIMEOUT_S
    while sum(map(len, batches)) < want:
        assert time.monotonic() < deadline, f"only {sum(map(len, batches))} of {want} tuples came"
        batch = spout.next_batch(max_records=min(max_records, want - sum(map(len, batches))), timeout_s=0.5)
        if batch:
            batches.append(batch)
    return batches


def take_retries(spout: KinesisSpout, ids: set[str]) -> SpoutBatch:
    """The next batch holding exactly the retries of ``ids`` (they come back after their backoff)."""
    batch = take(spout, len(ids), len(ids))
    assert len(batch) == 1, "the retries came in more than one batch"
    assert {t.message_id for t in batch[0]} == ids and all(t.attempt > 1 for t in batch[0])
    return batch[0]


def checkpoints(spout: KinesisSpout) -> dict[str, Any]:
    assert spout.flush_checkpoints()
    return stored_checkpoints(spout.config)


def ids(tuples: list[SpoutTuple]) -> list[str]:
    return [t.message_id for t in tuples]


def test_batch_ack_moves_every_checkpoint_exactly_as_acking_each_tuple(kinesalite: KinesisEndpoint,
                                                                       zookeeper: Any) -> None:
    """Two apps read the same 3-shard stream; one acks batches whole, the other acks the same tuples one by one,
    batch after batch in a shuffled order. After each step their stored checkpoints are the same, and at the end
    each is the shard's last record."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [40, 25, 35])
    whole = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "whole")).open()
    each = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "each")).open()
    try:
        batches = take(whole, 100, 30)
        assert len(batches) >= 4 and all(isinstance(b, SpoutBatch) for b in batches)
        assert len({t.message_id for b in batches for t in b}) == 100
        by_id = {t.message_id: t for b in take(each, 100, 100) for t in b}
        assert set(by_id) == {t.message_id for b in batches for t in b}
        for index in (2, 0, 3, 1, *range(4, len(batches))):  # out of order: later batches before earlier ones
            batches[index].ack()
            each.ack_many(ids(batches[index]))
            assert checkpoints(whole) == checkpoints(each), f"after batch {index}"
        assert checkpoints(whole) == {shard: (shard_seqs[-1], None) for shard, shard_seqs in zip(shard_ids, seqs)}
        assert all(m.inflight == 0 for m in whole.metrics())
    finally:
        whole.close()
        each.close()


def test_ack_except_retries_the_failed_tuples_and_dead_letters_them_once_retries_run_out(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """``ack_except`` acks all but the failed tuples: the checkpoint stops just before the first failed one; they
    come back (attempt 2); failed again with retry_limit 1 they are dead-lettered, and only then the checkpoint
    reaches the shard's end."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [20])
    dead: list[tuple[str, str]] = []
    spout = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "except", retry_limit=1,
                                   dead_letter=lambda record, reason: dead.append((record.message_id, reason)))).open()
    try:
        batch = take(spout, 20, 20)[0]
        assert ids(batch) == [f"{shard_ids[0]}:{s}" for s in seqs[0]]
        failed = {batch[5].message_id, batch[12].message_id}
        batch.ack_except(failed)
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][4], None)}
        retry = take_retries(spout, failed)
        retry.ack_except({batch[12].message_id})  # the 6th record is done now, the 13th fails its last try
        assert spout.flush_checkpoints()
        assert [m for m, _ in dead] == [batch[12].message_id]
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
        assert spout.next_batch(max_records=10, timeout_s=0.3) == []  # nothing comes back any more
    finally:
        spout.close()


def test_per_record_acks_mixed_with_a_batch_ack_and_a_second_ack_of_the_batch(kinesalite: KinesisEndpoint,
                                                                              zookeeper: Any) -> None:
    """Some tuples acked one by one, one failed through the batch, then the batch acked whole: the checkpoint waits
    for the failed one's retry. The first batch acked again while that retry is out acks nothing (the retry belongs
    to the second batch); the second batch's ack brings the checkpoint to the end. Each record is acked once."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [30])
    spout = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "mixed")).open()
    try:
        first = take(spout, 30, 30)[0]
        for t in first[::3]:
            spout.ack(t.message_id)
        spout.ack_many(ids(first[20:25]))
        failed = first[10].message_id  # a tuple not acked alone
        first.fail([failed])
        first.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][9], None)}
        second = take_retries(spout, {failed})
        first.ack()  # twice: harmless, and it must not ack the retry out in ``second``
        first.ack_except([])
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][9], None)}
        second.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
        [m] = spout.metrics()
        assert (m.acked, m.failed, m.inflight, m.retry_queue) == (30, 1, 0, 0)
    finally:
        spout.close()


def test_a_batch_failed_through_the_spout_then_acked_keeps_the_failed_record_for_its_retry(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """A tuple failed with ``spout.fail`` (not through the batch) and its batch then acked: the failed record is
    not acked by the batch; its retry comes and the checkpoint waits for it."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [8])
    spout = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "outside")).open()
    try:
        batch = take(spout, 8, 8)[0]
        spout.fail(batch[0].message_id)
        batch.ack()
        assert checkpoints(spout) == {}  # the first record is pending: nothing to store
        retry = take_retries(spout, {batch[0].message_id})
        retry.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_batches_add_up_and_stay_ackable_whole(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """``batch + batch`` (as a loop that tops a batch up does) and ``list + batch`` give a batch whose ``ack``
    acks every tuple of both parts; slices and iteration are plain tuples."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [12, 12])
    spout = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "adding")).open()
    try:
        batches = take(spout, 24, 8)
        carried = list(batches[0])
        merged = carried + batches[1]
        for more in batches[2:]:
            merged += more
        assert isinstance(merged, SpoutBatch) and len(merged) == 24
        assert isinstance(merged[0], SpoutTuple) and isinstance(merged[1:3], list)
        merged.ack()
        assert checkpoints(spout) == {shard: (shard_seqs[-1], None) for shard, shard_seqs in zip(shard_ids, seqs)}
    finally:
        spout.close()


def test_a_batch_acked_after_close_is_refused(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream, _shards, _seqs = put_into_shards(kinesalite, [3])
    spout = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "closed")).open()
    batch = take(spout, 3, 3)[0]
    spout.close()
    try:
        batch.ack()
    except SpoutStateError as exc:
        assert "closed" in str(exc)
    else:
        raise AssertionError("ack of a batch of a closed spout was accepted")


def test_a_retry_failed_again_through_its_batch_is_left_to_the_batch_that_emits_it_next(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """A retry (attempt 2) failed through its batch, that batch then acked: the record, out again in a third batch
    (attempt 3), is not acked by the second one; the checkpoint waits for the third batch's ack."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [6])
    spout = KinesisSpout(zk_config(kinesalite, zookeeper, stream, "again", retry_limit=5)).open()
    try:
        first = take(spout, 6, 6)[0]
        first.ack_except([first[2].message_id])
        second = take_retries(spout, {first[2].message_id})
        second.ack_except([first[2].message_id])
        third = take_retries(spout, {first[2].message_id})
        assert third[0].attempt == 3
        second.ack()
        first.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][1], None)}
        third.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()
