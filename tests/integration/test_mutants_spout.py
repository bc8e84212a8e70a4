"""The spout's ack, fail and checkpoint paths through ``next_tuple`` (the one-tuple loop the other tests barely
use). Written against mutants of kinesis_spout/spout.py the rest of the suite let survive (see
benchmarks/results/mutation.md). kinesalite (real sequence numbers) through the fixture."""

from __future__ import annotations

from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, RetryBackoff, SpoutConfig
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

TIMEOUT_S = 15.0


def make_config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="tests", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        retry_backoff=RetryBackoff(initial_s=0.01, multiplier=2.0, max_s=0.05))
    options.update(overrides)
    return SpoutConfig(**options)


def next_tuple(spout: KinesisSpout, timeout_s: float = TIMEOUT_S) -> SpoutTuple:
    """The next tuple ``next_tuple`` gives (it never waits: polled until one comes or the time is up)."""
    got: list[SpoutTuple] = []

    def one() -> bool:
        tup = spout.next_tuple()
        if tup is not None:
            got.append(tup)
        return bool(got)

    assert wait_until(one, timeout_s, interval_s=0.01), "next_tuple gave nothing in time"
    return got[0]


def test_next_tuple_emits_a_failed_record_again_and_the_checkpoint_waits_for_it(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(5)], ["pk"] * 5)
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        first = [next_tuple(spout) for _ in range(5)]
        assert [(t.record.sequence_number, t.attempt) for t in first] == [(seq, 1) for _, seq in placed]
        for tup in first:
            if tup.record.data != b"r1":
                spout.ack(tup.message_id)
            else:
                spout.fail(tup.message_id)
        again = next_tuple(spout)
        assert (again.message_id, again.attempt, again.record.data) == (first[1].message_id, 2, b"r1")
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[0][1]  # type: ignore[union-attr]
        spout.ack(again.message_id)
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
        assert spout.next_tuple() is None


def test_an_empty_closed_shard_is_finished_once_with_no_sequence_number_and_its_children_are_read(
        kinesalite: KinesisEndpoint) -> None:
    client = kinesalite.client()
    stream = kinesalite.create_stream()
    parent = kinesalite.shard_ids(stream)[0]
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    placed = kinesalite.put(stream, [f"child-{i}".encode() for i in range(6)])
    assert parent not in {shard for shard, _ in placed}
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got: list[SpoutTuple] = []

        def read_and_ack() -> bool:
            tup = spout.next_tuple()  # keeps the spout's housekeeping going after the parent finished
            if tup is not None:
                got.append(tup)
                spout.ack(tup.message_id)
            return len(got) == 6

        assert wait_until(read_and_ack, TIMEOUT_S, interval_s=0.01), f"read {len(got)} of 6"
        assert spout.flush_checkpoints()
        finished = {m.shard_id: m.finished for m in spout.metrics()}
    assert finished[parent] is True
    stored = store.load(parent)
    assert stored is not None and stored.shard_end is True and stored.sequence_number is None
    assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in placed)


def test_failed_and_timed_out_records_reach_the_dead_letter_handler_with_their_reason_and_unknown_ids_are_counted(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(3)], ["pk"] * 3)
    dead: list[tuple[str, str]] = []
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, retry_limit=0, message_timeout_s=0.3,
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    with KinesisSpout(config, store) as spout:
        first = [next_tuple(spout) for _ in range(3)]
        spout.ack(first[0].message_id)
        spout.fail(first[1].message_id)
        assert wait_until(lambda: len(dead) == 1, TIMEOUT_S)  # written on the dead-letter thread
        assert dead == [(first[1].message_id, "failed on attempt 1 of 1")]
        assert wait_until(lambda: spout.next_tuple() is None and len(dead) == 2, TIMEOUT_S), dead
        assert dead[1] == (first[2].message_id, "timed out on attempt 1 of 1")
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
        spout.ack("not a message id")
        spout.ack(f"shardId-000000000099:{placed[0][1]}")
        spout.fail("not a message id either")
        assert spout.unknown_message_ids == 3


def test_a_retry_waits_its_backoff_and_comes_back_with_the_scheme_s_values(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    kinesalite.put(stream, [b"only"], ["pk"])
    config = make_config(kinesalite, stream, retry_limit=3,
                         retry_backoff=RetryBackoff(initial_s=0.3, multiplier=2.0, max_s=1.0))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = next_tuple(spout)
        assert first.attempt == 1 and first.values is not None
        spout.fail(first.message_id)
        assert spout.next_tuple() is None  # not due yet
        again = next_tuple(spout)
        assert (again.message_id, again.attempt, again.values) == (first.message_id, 2, first.values)
        spout.ack(again.message_id)
