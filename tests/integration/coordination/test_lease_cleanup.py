"""Lease workers (the default coordination with ZooKeeper checkpoints) clean up after a shard that is gone for
good: once a split's parent is past the stream's retention (no longer listed) and both children have checkpoints
of their own, the parent's checkpoint and its lease node are deleted, and nothing is read twice."""

from __future__ import annotations

from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.lease_worker import lease_owners
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

APP = "cleanup"


def config(endpoint: KinesisEndpoint, zookeeper: Any, stream: str) -> SpoutConfig:
    return SpoutConfig(stream_name=stream, app_name=APP, endpoint_url=endpoint.endpoint_url, region=endpoint.region,
                       zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix, worker_id="only",
                       initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2,
                       checkpoint_interval_s=0.0, zookeeper_session_timeout_s=4.0)


def test_a_parent_past_the_retention_loses_its_checkpoint_and_its_lease_node(kinesalite: KinesisEndpoint,
                                                                            zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    parent = kinesalite.shard_ids(stream)[0]
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/{APP}/{stream}"
    with KinesisSpout(config(kinesalite, zookeeper, stream)) as spout:
        kinesalite.put(stream, [f"p{i}".encode() for i in range(10)])
        assert len(drain(spout, 10)) == 10
        assert spout.flush_checkpoints()
        assert spout.lease_epochs().keys() == {parent}, "the default coordination with ZooKeeper takes leases"
    client = kinesalite.client()
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    placed = kinesalite.put(stream, [f"c{i}".encode() for i in range(40)])
    children = {s for s, _ in placed}
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        proxy.expire_shards({parent})
        through = KinesisEndpoint("kinesalite+expiry", proxy.endpoint_url, kinesalite.region)
        with KinesisSpout(config(through, zookeeper, stream)) as spout:
            got = drain(spout, 40)
            assert spout.flush_checkpoints()
            assert set(lease_owners(zk, base)) == {parent} | children
        assert zk.exists(f"{base}/checkpoints/{parent}"), "kept while a child had no checkpoint of its own"
        with KinesisSpout(config(through, zookeeper, stream)) as spout:
            assert wait_until(lambda: parent not in lease_owners(zk, base), 15), \
                f"the expired parent's lease node outlived its use: {lease_owners(zk, base)}"
            assert not zk.exists(f"{base}/checkpoints/{parent}"), "the expired parent's checkpoint outlived its use"
            assert drain(spout, 1, timeout_s=1.0) == []  # the children resume after their own checkpoints
    assert {bytes(t.record.data) for t in got} == {f"c{i}".encode() for i in range(40)}
    assert set(lease_owners(zk, base)) == children
