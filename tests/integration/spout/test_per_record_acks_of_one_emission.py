"""Per-record acks and fails name one emission when given the tuple itself (``spout.ack(t)``, ``spout.fail(t)``,
``ack_many``/``fail_many`` of tuples): a late ack or fail of an emission that failed since never acks or fails the
record's next attempt. A message id still names the record, whatever its attempt. kinesalite (real sequence
numbers) and a real ZooKeeper through the fixtures."""

from __future__ import annotations

from typing import Any

from kinesis_spout.testing.kinesis import KinesisEndpoint

from .emissions import checkpoints, open_spout, pending, take, take_retry
from .support import put_into_shards


def test_a_late_ack_of_a_tuple_failed_since_acks_neither_the_waiting_record_nor_its_next_attempt(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """T (attempt 1) failed with ``spout.fail``; its attempt 2 out; ``spout.ack(T)`` acks nothing. Attempt 2 failed:
    ``spout.ack`` of attempt 2's tuple while the record waits acks nothing either. Attempt 3's tuple acks it."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [3])
    spout = open_spout(kinesalite, zookeeper, stream, "late-ack", retry_limit=3)
    try:
        first = take(spout, 3)
        t1 = first[1]
        spout.ack_many([first[0], first[2]])  # tuples in their first emission: acked
        spout.fail(t1.message_id)
        [t2] = take_retry(spout, t1.message_id, 2)
        spout.ack(t1)
        assert pending(spout) == (1, 0), "the ack of attempt 1 acked attempt 2"
        spout.fail(t2)
        spout.ack(t2)
        spout.ack_many([t1, t2])
        assert pending(spout) == (1, 1), "the ack of attempt 2, failed, acked the record waiting for attempt 3"
        [t3] = take_retry(spout, t1.message_id, 3)
        spout.ack(t3)
        assert pending(spout) == (0, 0), "the ack of attempt 3's tuple acked nothing"
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()


def test_a_late_fail_of_a_tuple_failed_since_does_not_fail_its_next_attempt(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """T (failed with ``spout.fail(T)``) is out at attempt 2, failed by id, and out again at attempt 3 (its last). A
    late ``spout.fail`` and ``fail_many`` of attempt 2's and 1's tuples fail nothing (attempt 3 would be
    dead-lettered); attempt 3's tuple acked completes the shard with no dead letter."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [2])
    dead: list[str] = []
    spout = open_spout(kinesalite, zookeeper, stream, "late-fail-tuple", retry_limit=2,
                       dead_letter=lambda record, reason: dead.append(record.message_id))
    try:
        first = take(spout, 2)
        spout.ack(first[0])
        spout.fail(first[1])
        [t2] = take_retry(spout, first[1].message_id, 2)
        spout.fail(t2.message_id)
        [t3] = take_retry(spout, first[1].message_id, 3)
        spout.fail(t2)
        spout.fail_many([t2, first[1]])
        assert pending(spout) == (1, 0), "the fail of attempt 2 failed attempt 3"
        spout.ack_many([t3])
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
        assert dead == []
    finally:
        spout.close()


def test_a_message_id_names_the_record_whatever_its_attempt(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """Every attempt of a record has the same message id, so an ack by id acks the record's current emission, and
    a record waiting for its retry (it leaves the retry queue): the record was processed once."""
    stream, shard_ids, seqs = put_into_shards(kinesalite, [2])
    spout = open_spout(kinesalite, zookeeper, stream, "by-id", retry_limit=3)
    try:
        first = take(spout, 2)
        spout.ack(first[0].message_id)
        spout.fail(first[1].message_id)
        [t2] = take_retry(spout, first[1].message_id, 2)
        assert t2.message_id == first[1].message_id
        spout.fail(t2.message_id)
        assert pending(spout) == (1, 1)
        spout.ack(first[1].message_id)
        assert pending(spout) == (0, 0)
        assert checkpoints(spout) == {shard_ids[0]: (seqs[0][-1], None)}
    finally:
        spout.close()
