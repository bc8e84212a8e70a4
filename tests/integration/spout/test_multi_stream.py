"""``MultiStreamSpout`` on kinesalite and ZooKeeper: two streams read as one spout, each with its own checkpoints and
initial position, acks routed by the stream in the message id, a restart resuming both, per-stream metric labels;
a stream that does not exist refused at ``open()``."""

from __future__ import annotations

import pytest

from kinesis_spout import ConfigError, KinesisSpout, MultiStreamSpout, StreamNotFoundError
from kinesis_spout.metrics import SpoutCollector
from kinesis_spout.records import SpoutTuple
from kinesis_spout.spout.multi import split_message_id
from kinesis_spout.testing import stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.plugin import ZooKeeperHandle
from kinesis_spout.testing.process import wait_until

from .support import TIMEOUT_S, make_config, put_into_shards


def take(spout: MultiStreamSpout, n: int) -> list[SpoutTuple]:
    """Take and ack batches until ``n`` tuples came and the spout is caught up; the tuples."""
    got: list[SpoutTuple] = []

    def step() -> bool:
        batch = spout.next_batch(max_records=100, timeout_s=0.05)
        got.extend(batch)
        batch.ack()
        return len(got) >= n and spout.caught_up()

    assert wait_until(step, TIMEOUT_S, interval_s=0.0), f"took {len(got)} of {n}; lagging {spout.lagging_shards()}"
    return got


def test_two_streams_in_one_spout_keep_their_own_checkpoints_and_starts_and_resume_after_a_restart(
        kinesalite: KinesisEndpoint, zookeeper: ZooKeeperHandle) -> None:
    clicks, click_shards, click_seqs = put_into_shards(kinesalite, [3, 2])
    orders, order_shards, order_seqs = put_into_shards(kinesalite, [2])
    config = make_config(kinesalite, [clicks, orders], zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
                         coordination="static", initial_position={clicks: "TRIM_HORIZON", orders: "LATEST"})
    with pytest.raises(ConfigError, match="MultiStreamSpout"):
        KinesisSpout(config)
    with MultiStreamSpout(config) as spout:
        got = take(spout, 5)  # clicks from TRIM_HORIZON; orders at LATEST: its 2 older records are not read
        assert sorted(split_message_id(t.message_id)[0] for t in got) == [clicks] * 5
        new_orders = kinesalite.client().put_record(StreamName=orders, Data=b"o-new", PartitionKey="pk")
        later = take(spout, 1)
        assert [(split_message_id(t.message_id)[0], t.record.data) for t in later] == [(orders, b"o-new")]
        assert {(m.stream_name, m.shard_id) for m in spout.metrics()} == \
            {(clicks, s) for s in click_shards} | {(orders, order_shards[0])}
        acked = {(s.labels["stream"], s.labels["shard"]): s.value for family in SpoutCollector(spout).collect()
                 if family.name == "kinesis_spout_acked_records" for s in family.samples if s.name.endswith("_total")}
        assert acked == {**{(clicks, s): float(len(q)) for s, q in zip(click_shards, click_seqs)},
                         (orders, order_shards[0]): 1.0}  # per-stream labels on the per-shard metrics
        assert spout.flush_checkpoints()
    # each stream's checkpoints under its own path, the same shard id in both streams kept apart
    assert stored_checkpoints(config.for_stream(clicks)) == {s: (seqs[-1], None)
                                                            for s, seqs in zip(click_shards, click_seqs)}
    assert stored_checkpoints(config.for_stream(orders)) == {order_shards[0]: (new_orders["SequenceNumber"], None)}
    assert order_seqs  # (the records orders had before the start, never read)

    client = kinesalite.client()
    client.put_record(StreamName=clicks, Data=b"c-after", PartitionKey="pk")
    client.put_record(StreamName=orders, Data=b"o-after", PartitionKey="pk")
    with MultiStreamSpout(config) as spout:  # a restart resumes both after their checkpoints
        again = take(spout, 2)
        assert sorted((split_message_id(t.message_id)[0], t.record.data) for t in again) == \
            sorted([(clicks, b"c-after"), (orders, b"o-after")])


def test_a_stream_that_does_not_exist_fails_open_naming_it(
        kinesalite: KinesisEndpoint, zookeeper: ZooKeeperHandle) -> None:
    real = kinesalite.create_stream()
    config = make_config(kinesalite, [real, "no-such-stream"], zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, coordination="static")
    with pytest.raises(StreamNotFoundError, match="no-such-stream"):
        MultiStreamSpout(config).open()
