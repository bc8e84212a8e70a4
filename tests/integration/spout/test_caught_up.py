"""``KinesisSpout.caught_up()`` on kinesalite: true once every shard owned at ``open()`` was read up to the tip it had
then and every record read up to there is done; empty shards, a stream resharded before the spout opened (the closed
parent read to its end, its children read) and a split while it reads (its children not waited for)."""

from __future__ import annotations

import threading
from typing import Any

from kinesis_spout import KinesisSpout, MemoryCheckpointStore
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

from .support import TIMEOUT_S, make_config, put_into_shards


def read_until_caught_up(spout: KinesisSpout, fail: set[bytes] = frozenset()) -> list[SpoutTuple]:  # type: ignore[assignment]
    """Take and ack (or fail, for data in ``fail``) batches until the spout says it caught up; the tuples taken."""
    got: list[SpoutTuple] = []

    def step() -> bool:
        batch = spout.next_batch(max_records=100, timeout_s=0.05)
        got.extend(batch)
        batch.ack_except([t.message_id for t in batch if t.record.data in fail])
        return spout.caught_up()

    assert wait_until(step, TIMEOUT_S, interval_s=0.0), f"not caught up: {spout.lagging_shards()} lag"
    return got


def test_caught_up_needs_every_record_up_to_the_tips_done_and_waits_for_no_empty_shard(
        kinesalite: KinesisEndpoint) -> None:
    stream, shard_ids, seqs = put_into_shards(kinesalite, [4, 0, 3])
    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as spout:
        taken: list[SpoutTuple] = []
        assert wait_until(lambda: bool(taken.extend(spout.next_batch(100, timeout_s=0.05))) or len(taken) == 7,
                          TIMEOUT_S, interval_s=0.0), f"took {len(taken)} of 7"
        # the empty shard is caught up at its first read; the others wait for their records' acks
        assert wait_until(lambda: set(spout.lagging_shards()) == {shard_ids[0], shard_ids[2]}, TIMEOUT_S), \
            spout.lagging_shards()
        assert not spout.caught_up()
        spout.ack_many(t.message_id for t in taken)
        assert wait_until(spout.caught_up, TIMEOUT_S), f"acked everything, still lagging: {spout.lagging_shards()}"
        assert sorted(t.record.sequence_number for t in taken) == sorted(seqs[0] + seqs[2])


def test_a_failed_record_keeps_the_spout_from_catching_up_until_it_is_dead_lettered(
        kinesalite: KinesisEndpoint) -> None:
    letters: list[Any] = []
    stream, _, _ = put_into_shards(kinesalite, [3])
    config = make_config(kinesalite, stream, retry_limit=1,
                         dead_letter=lambda record, reason: letters.append((record.message_id, reason)))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        got = read_until_caught_up(spout, fail={b"0-1"})
        assert [t.attempt for t in got if t.record.data == b"0-1"] == [1, 2]
        assert len(letters) == 1 and sorted(t.record.data for t in got if t.attempt == 1) == [b"0-0", b"0-1", b"0-2"]


def test_a_stream_resharded_before_the_start_is_caught_up_once_the_parent_ended_and_its_children_were_read(
        kinesalite: KinesisEndpoint) -> None:
    client = kinesalite.client()
    stream = kinesalite.create_stream()
    parent = kinesalite.shard_ids(stream)[0]
    kinesalite.put(stream, [f"parent-{i}".encode() for i in range(5)])
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    kinesalite.put(stream, [f"child-{i}".encode() for i in range(6)])
    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as spout:
        got = read_until_caught_up(spout)
        assert sorted(t.record.data for t in got) == sorted([f"parent-{i}".encode() for i in range(5)]
                                                            + [f"child-{i}".encode() for i in range(6)])
        assert {m.shard_id for m in spout.metrics() if m.finished} == {parent}


def test_a_split_while_reading_is_not_waited_for(kinesalite: KinesisEndpoint) -> None:
    client = kinesalite.client()
    stream = kinesalite.create_stream()
    parent = kinesalite.shard_ids(stream)[0]
    kinesalite.put(stream, [f"before-{i}".encode() for i in range(4)])
    with KinesisSpout(make_config(kinesalite, stream, shard_sync_interval_s=0.2), MemoryCheckpointStore()) as spout:
        client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
        wait_for_stream(client, stream)
        got = read_until_caught_up(spout)
        assert sorted(t.record.data for t in got) == [f"before-{i}".encode() for i in range(4)]


def test_a_busy_stream_cannot_keep_the_spout_from_catching_up(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    before = kinesalite.put(stream, [f"before-{i}".encode() for i in range(50)])
    stop = threading.Event()

    def produce() -> None:  # records keep arriving while the spout reads: its tip is the one it had at open()
        while not stop.is_set():
            kinesalite.put(stream, [b"later"] * 5)
            stop.wait(0.005)

    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as spout:
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            got = read_until_caught_up(spout)
        finally:
            stop.set()
            producer.join(5)
    assert {t.record.sequence_number for t in got} >= {seq for _, seq in before}
