"""The crash-test helpers of kinesis_spout.testing: kill_at SIGKILLs a consumer in a child process right after the
ack chosen, and stored_checkpoints shows where the next run resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing import SHARD_END, CrashPoint, drain, kill_at, stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream


def consume(config: SpoutConfig, log: str, crash: CrashPoint) -> None:
    """The consumer under test, run in the child: its effect (a line) before each ack, then the report."""
    with KinesisSpout(config) as spout, open(log, "a", buffering=1) as out:
        while True:
            for tup in spout.next_batch(max_records=10, timeout_s=0.5):
                out.write(tup.message_id + "\n")
                spout.ack(tup.message_id)
                crash.acked()


def consume_all(config: SpoutConfig, total: int, crash: CrashPoint) -> None:
    with KinesisSpout(config) as spout:
        while crash.count < total:
            for tup in spout.next_batch(max_records=10, timeout_s=0.5):
                spout.ack(tup.message_id)
                crash.acked()
        assert spout.flush_checkpoints()


def fails(crash: CrashPoint) -> None:
    raise RuntimeError("the consumer broke")


def make_config(endpoint: KinesisEndpoint, zookeeper, stream: str) -> SpoutConfig:
    return SpoutConfig(stream_name=stream, app_name="crash-helpers", zookeeper=zookeeper.hosts,
                       zookeeper_prefix=zookeeper.prefix, endpoint_url=endpoint.endpoint_url, region=endpoint.region,
                       coordination="static", initial_position=InitialPosition.TRIM_HORIZON,
                       checkpoint_interval_s=0.0, empty_record_backoff_s=0.2, max_records_per_call=10)


@pytest.mark.crash
def test_kill_at_stops_the_consumer_right_after_the_chosen_ack_and_the_next_run_resumes(
        kinesalite: KinesisEndpoint, zookeeper, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, [f"r{i}" for i in range(60)])
    config = make_config(kinesalite, zookeeper, stream)
    log = tmp_path / "effects"

    run = kill_at(consume, config, str(log), after_acks=25, timeout_s=120)

    assert run.killed and run.exit_code is None and run.acked == 25
    effects = log.read_text().splitlines()
    assert effects == [f"{shard}:{seq}" for shard, seq in placed[:25]], "the crash fell right after the 25th ack"
    (shard, stored), = stored_checkpoints(config).items()
    position = [seq for _, seq in placed].index(stored.sequence_number)
    assert position < 25 and stored.sub_sequence_number is None  # at most the last ack before the crash
    with KinesisSpout(config) as spout:  # the next run resumes right after the stored checkpoint
        again = drain(spout, 60 - position - 1)
        assert spout.flush_checkpoints()
    assert [t.message_id for t in again] == [f"{s}:{q}" for s, q in placed[position + 1:]]
    assert stored_checkpoints(config) == {shard: (placed[-1][1], None)}


def test_kill_at_without_a_crash_point_waits_for_the_consumer(kinesalite: KinesisEndpoint, zookeeper) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"r{i}" for i in range(20)], [f"k{i}" for i in range(20)])
    config = make_config(kinesalite, zookeeper, stream)
    run = kill_at(consume_all, config, 20, after_acks=None)
    assert run.killed is False and run.exit_code == 0 and run.acked == 20
    last = {shard: seq for shard, seq in placed}  # the last record placed in each shard
    assert stored_checkpoints(config) == {shard: (seq, None) for shard, seq in last.items()}
    broken = kill_at(fails, after_acks=None)
    assert broken.killed is False and broken.exit_code == 1 and broken.acked == 0
    with pytest.raises(ValueError, match="after_acks must be 1 or more"):
        kill_at(fails, after_acks=0)


def test_stored_checkpoints_show_a_shard_read_to_its_end(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    parent = kinesalite.shard_ids(stream)[0]
    kinesalite.put(stream, [f"p{i}" for i in range(5)])
    client = kinesalite.client()
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    placed = kinesalite.put(stream, [f"c{i}" for i in range(6)], [f"k{i}" for i in range(6)])
    store = MemoryCheckpointStore()
    config = SpoutConfig(stream_name=stream, app_name="crash-helpers", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, coordination="static", checkpoint_interval_s=0.0,
                         initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2)
    with KinesisSpout(config, store) as spout:
        assert len(drain(spout, 11)) == 11  # the children are read once the parent is read to its end
        assert spout.flush_checkpoints()
    last = {shard: seq for shard, seq in placed}
    assert stored_checkpoints(store) == {parent: (SHARD_END, None), **{s: (q, None) for s, q in last.items()}}
