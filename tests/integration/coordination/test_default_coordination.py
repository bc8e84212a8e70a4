"""The default coordination ("auto"): processes started with the same configuration and a ZooKeeper store share
the stream's shards through leases, without the user asking for it; with an in-memory store a spout reads every
shard on its own (Storm's static split), as before."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.lease_worker import WorkerProcesses, lease_owners, spread_evenly
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

APP = "same-config"


def test_two_processes_with_the_same_default_config_share_the_shards(kinesalite: KinesisEndpoint, zookeeper: Any,
                                                                     tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(100)])
    workers = WorkerProcesses(stream=stream, endpoint_url=kinesalite.endpoint_url, zookeeper=zookeeper.hosts,
                              prefix=zookeeper.prefix, app=APP, directory=tmp_path, coordination="default")
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/{APP}/{stream}"
    try:
        workers.start("one")
        workers.start("two")
        assert wait_until(lambda: spread_evenly(zk, base, {"one", "two"}, shards=4), 60), \
            f"leases: {lease_owners(zk, base)}; {workers.errors('one')} {workers.errors('two')}"
        owners = lease_owners(zk, base)
        later = kinesalite.put(stream, [f"s{i}".encode() for i in range(200)])
        everything = {f"{s}:{q}" for s, q in placed + later}
        assert wait_until(lambda: {m for m, _, _ in workers.deliveries()} >= everything, 60), \
            workers.errors("one") + workers.errors("two")
    finally:
        workers.stop_all()
    times = Counter(m for m, _, _ in workers.deliveries())
    twice = sorted(m for m, n in times.items() if n > 1)
    assert not twice, f"{len(twice)} records read by both workers, e.g. {twice[:3]}"
    after_split = {f"{s}:{q}" for s, q in later}
    read_by = {w: {m.rsplit(":", 1)[0] for m, who, _ in workers.deliveries() if who == w and m in after_split}
               for w in ("one", "two")}
    held_by = {w: {shard for shard, owner in owners.items() if owner == w} for w in ("one", "two")}
    assert read_by == held_by, "each worker read exactly the shards it held"


def test_with_an_in_memory_store_a_default_spout_reads_every_shard(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=3)
    placed = kinesalite.put(stream, [f"m{i}".encode() for i in range(60)])
    config = SpoutConfig(stream_name=stream, app_name=APP, endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2)
    with KinesisSpout(config, checkpoint_store=MemoryCheckpointStore()) as spout:
        got = drain(spout, len(placed), timeout_s=30)
        assert sorted(spout.shard_ids) == sorted({s for s, _ in placed})
    assert {t.message_id for t in got} == {f"{s}:{q}" for s, q in placed}
