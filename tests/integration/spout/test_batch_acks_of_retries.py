"""A batch acks exactly the emissions it handed out: a retry of the batch (attempt > 1) failed since with
``spout.fail`` and waiting for its next attempt, or out again in a later batch, is not acked by the batch's ``ack``;
the later batch's fail then retries it or dead-letters it, nothing is lost. The same for a retry failed by its
message timeout, for a record of a span failed with ``spout.fail``, and for tuples carried into a batch from a list;
and a batch's fail of such a retry does not fail its later attempt. kinesalite (real sequence numbers) and a real
ZooKeeper through the fixtures."""

from __future__ import annotations

from typing import Any

from kinesis_spout import SpoutBatch
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .emissions import checkpoints, open_spout, pending, take, take_retry
from .support import put_into_shards


def test_a_retry_failed_with_spout_fail_and_out_again_is_not_acked_by_its_earlier_batch(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """Batch B1 holds a retry T (attempt 2); ``spout.fail(T)``; T is out again (attempt 3) in B2; then B1 is
    acked: T stays in flight (the checkpoint waits before it). B2 fails it, its retries ran out: it is
    dead-lettered, and only then the checkpoint reaches the shard's end."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [6])
    dead: list[str] = []
    spout = open_spout(kinesalite, zookeeper, stream, "out-again", retry_limit=2,
                       dead_letter=lambda record, reason: dead.append(record.message_id))
    try:
        first = take(spout, 6)
        mid = first[2].message_id
        first.ack_except([mid])
        b1 = take_retry(spout, mid, 2)
        spout.fail(mid)
        b2 = take_retry(spout, mid, 3)
        b1.ack()  # acks attempt 2, which is over: not attempt 3
        assert pending(spout) == (1, 0), "the batch of attempt 2 acked attempt 3"
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][1], None)}
        b2.fail([mid])  # attempt 3 failed: its retries ran out
        assert spout.flush_checkpoints()
        assert dead == [mid]
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
        assert pending(spout) == (0, 0)
    finally:
        spout.close()


def test_a_retry_failed_with_spout_fail_and_out_again_is_retried_when_its_later_batch_fails_it(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """As above with retries left: after B1's ack, B2's fail of attempt 3 brings attempt 4; its ack completes the
    shard."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [5])
    spout = open_spout(kinesalite, zookeeper, stream, "retried", retry_limit=5)
    try:
        first = take(spout, 5)
        mid = first[0].message_id
        first.ack_except([mid])
        b1 = take_retry(spout, mid, 2)
        spout.fail(mid)
        b2 = take_retry(spout, mid, 3)
        b1.ack()
        assert pending(spout) == (1, 0), "the batch of attempt 2 acked attempt 3"
        b2.fail([mid])
        b3 = take_retry(spout, mid, 4)
        assert checkpoints(spout) == {}  # the shard's first record is pending: nothing stored yet
        b3.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_a_retry_failed_with_spout_fail_and_waiting_for_its_next_attempt_is_not_acked_by_its_batch(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """B1 holds a retry T (attempt 2); ``spout.fail(T)`` queues it; B1 acked before T is out again: T stays queued
    (it was failed: what B1 handed out was attempt 2), comes back as attempt 3, and its ack completes the shard."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [4])
    spout = open_spout(kinesalite, zookeeper, stream, "waiting", retry_limit=3)
    try:
        first = take(spout, 4)
        mid = first[3].message_id
        first.ack_except([mid])
        b1 = take_retry(spout, mid, 2)
        spout.fail(mid)
        b1.ack()
        assert pending(spout) == (1, 1), "the batch of attempt 2 acked the record waiting for attempt 3"
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][2], None)}
        b2 = take_retry(spout, mid, 3)
        b2.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_a_record_of_a_span_failed_with_spout_fail_and_out_again_is_not_acked_by_the_span(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """New records are acked as one span: one of them failed with ``spout.fail`` and out again (attempt 2) in B2,
    then the span's batch acked: the retry stays in flight; B2 fails it and it comes back (attempt 3)."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [7])
    spout = open_spout(kinesalite, zookeeper, stream, "span", retry_limit=3)
    try:
        first = take(spout, 7)
        mid = first[4].message_id
        spout.fail(mid)
        b2 = take_retry(spout, mid, 2)
        first.ack()
        assert pending(spout) == (1, 0), "the span's ack acked the retry out in a later batch"
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][3], None)}
        b2.fail([mid])
        b3 = take_retry(spout, mid, 3)
        b3.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_a_retry_carried_into_a_batch_from_a_list_is_acked_only_at_its_attempt(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """A retry tuple (attempt 2) kept in a plain list and added to a batch (``list + batch``); ``spout.fail`` of
    it and its attempt 3 out in another batch: acking the merged batch acks its own records, not attempt 3."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [3])
    spout = open_spout(kinesalite, zookeeper, stream, "carried", retry_limit=3)
    try:
        first = take(spout, 3)
        mid = first[1].message_id
        spout.fail(mid)
        carried = list(take_retry(spout, mid, 2))
        spout.fail(mid)
        later = take_retry(spout, mid, 3)
        merged = carried + first
        assert isinstance(merged, SpoutBatch) and len(merged) == 4
        merged.ack()
        assert pending(spout) == (1, 0), "the merged batch acked attempt 3 through the carried attempt 2"
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][0], None)}
        later.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_a_retry_that_timed_out_and_is_out_again_is_not_acked_by_its_earlier_batch(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """B1 holds a retry T (attempt 2) and is not acked within the message timeout: T is failed by the timeout and
    out again (attempt 3) in B2. B1's late ack leaves attempt 3 to B2 (a duplicate, never a loss)."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [3])
    spout = open_spout(kinesalite, zookeeper, stream, "timed-out", retry_limit=3, message_timeout_s=1.0)
    try:
        first = take(spout, 3)
        mid = first[2].message_id
        first.ack_except([mid])
        b1 = take_retry(spout, mid, 2)
        b2 = take_retry(spout, mid, 3)  # comes once attempt 2 timed out and its backoff passed
        b1.ack()
        assert pending(spout) == (1, 0), "the batch of attempt 2, timed out, acked attempt 3"
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][1], None)}
        b2.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_a_batch_fail_of_a_retry_out_again_since_does_not_fail_its_later_attempt(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """B1 holds a retry T (attempt 2); ``spout.fail(T)``; T is out again (attempt 3, its last) in B2; then B1 fails
    T: that emission is over, so attempt 3 is not failed (it would be dead-lettered); B2's ack completes the shard
    with no dead letter."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [3])
    dead: list[str] = []
    spout = open_spout(kinesalite, zookeeper, stream, "late-fail", retry_limit=2,
                       dead_letter=lambda record, reason: dead.append(record.message_id))
    try:
        first = take(spout, 3)
        mid = first[0].message_id
        first.ack_except([mid])
        b1 = take_retry(spout, mid, 2)
        spout.fail(mid)
        b2 = take_retry(spout, mid, 3)
        b1.ack_except([mid])
        assert pending(spout) == (1, 0), "the batch of attempt 2 failed attempt 3"
        b2.ack()
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
        assert dead == []
    finally:
        spout.close()
