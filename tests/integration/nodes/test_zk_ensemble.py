"""A three-server ZooKeeper ensemble on nodes of its own (kinesis_spout.testing.zk_ensemble): its leader partitioned
from the other two, a new leader is elected, and lease workers with their checkpoints on the ensemble keep
delivering while the partition lasts: nothing lost, no stored checkpoint moving backwards."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records
from kinesis_spout.testing.lease_worker import WorkerProcesses, lease_owners, spread_evenly
from kinesis_spout.testing.partitions import heal_groups, partition_groups
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zk_ensemble import ZooKeeperEnsemble

pytestmark = [pytest.mark.zookeeper, pytest.mark.crash]
SHARDS = 4


def ensemble_client(ensemble: ZooKeeperEnsemble) -> Any:
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    client = KazooClient(hosts=ensemble.hosts, timeout=10.0,
                         connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=0.5),
                         command_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=0.5, deadline=30))
    client.start(timeout=30)
    return client


def test_lease_workers_keep_delivering_while_the_leader_is_partitioned_away(
        zookeeper_ensemble: ZooKeeperEnsemble, kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    ensemble = zookeeper_ensemble
    stream = kinesalite.create_stream(shards=SHARDS)
    prefix, app = "/ensemble", "ensemble-workers"
    base = f"{prefix}/{app}/{stream}"
    zk = ensemble_client(ensemble)
    checkpoints: dict[str, list[int]] = defaultdict(list)
    stop = threading.Event()

    def sample() -> None:  # the stored checkpoints over time (a read may wait for the election)
        while not stop.wait(0.2):
            try:
                if zk.exists(f"{base}/checkpoints"):
                    for shard in zk.get_children(f"{base}/checkpoints"):
                        doc = json.loads(zk.get(f"{base}/checkpoints/{shard}")[0])
                        checkpoints[shard].append(int(doc["sequence_number"]))
            except Exception:  # noqa: BLE001 - ZooKeeper electing: a missed sample
                continue

    sent: list[tuple[str, str]] = []
    client = kinesalite.client()

    def produce(n: int, tag: str) -> set[str]:
        placed = put_records(client, stream, [f"{tag}{i}".encode() for i in range(n)],
                             partition_keys=[f"k{i % 32}" for i in range(n)])
        sent.extend(placed)
        return {f"{s}:{q}" for s, q in placed}

    workers = WorkerProcesses(stream=stream, endpoint_url=kinesalite.endpoint_url, zookeeper=ensemble.hosts,
                              prefix=prefix, app=app, directory=tmp_path, session_timeout_s=4.0)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        workers.start("w1")
        workers.start("w2")
        assert wait_until(lambda: spread_evenly(zk, base, {"w1", "w2"}, SHARDS), 60), lease_owners(zk, base)
        first = produce(200, "before")

        def delivered(ids: set[str]) -> bool:
            return ids <= {m for m, _, _ in workers.deliveries()}

        assert wait_until(lambda: delivered(first), 60)
        leader = ensemble.wait_leader()
        partition_groups([leader], ensemble.others(leader))
        new_leader = ensemble.wait_leader(other_than=leader)
        assert new_leader is not leader and ensemble.server(leader).mode() == ""
        during = produce(200, "during")
        assert wait_until(lambda: delivered(during), 60), \
            f"{len(during - {m for m, _, _ in workers.deliveries()})} records sent during the partition undelivered"
        heal_groups([leader], ensemble.others(leader))
        after = produce(200, "after")
        assert wait_until(lambda: delivered(after), 60)
        last: dict[str, int] = {}
        for shard, seq in sent:
            last[shard] = max(last.get(shard, 0), int(seq))
        assert wait_until(lambda: all(checkpoints.get(s, [0])[-1] >= q for s, q in last.items()), 60), \
            "the checkpoints did not reach the last records"
    finally:
        stop.set()
        workers.stop_all()
        sampler.join(10)
        zk.stop()
        zk.close()
    assert all(p.returncode == 0 for p in workers.procs.values()), {n: workers.errors(n) for n in workers.procs}
    assert all(seqs == sorted(seqs) for seqs in checkpoints.values()), "a stored checkpoint moved backwards"
    print(f"leader {leader.name} partitioned, {new_leader.name} elected; {workers.lease_lost()} checkpoint writes "
          f"fenced; {len(workers.deliveries())} deliveries of {len(sent)} records")


def release_layout(jar: Path, lib: Path) -> Path:
    """The server ``jar`` laid out as Apache's binary release lays it out: a jar whose manifest names no class path,
    its dependencies beside it in ``lib``."""
    import zipfile

    with zipfile.ZipFile(jar) as source:
        manifest = source.read("META-INF/MANIFEST.MF").decode()
        unfolded = manifest.replace("\r\n ", "").replace("\n ", "")
        names = next(line for line in unfolded.splitlines() if line.startswith("Class-Path:")).split()[1:]
        lib.mkdir(parents=True)
        released = lib / "zookeeper-3.8.jar"
        with zipfile.ZipFile(released, "w") as target:
            for item in source.infolist():
                data = source.read(item)
                if item.filename == "META-INF/MANIFEST.MF":
                    data = "".join(line + "\n" for line in unfolded.splitlines()
                                   if not line.startswith("Class-Path:")).encode()
                target.writestr(item, data)
    for name in names:
        (lib / Path(name).name).symlink_to(name)
    return released


def test_an_ensemble_runs_from_apache_s_release_layout(ensemble_network: Any, tmp_path: Path) -> None:
    """``KINESIS_SPOUT_ZOOKEEPER_JAR`` may name a release's server jar, whose dependencies are the jars beside it:
    each server of an ensemble runs on them, as the single test server does."""
    from kinesis_spout.testing.zookeeper import default_jar

    if not default_jar().exists():
        pytest.skip(f"no ZooKeeper jar at {default_jar()}")
    jar = release_layout(default_jar(), tmp_path / "lib")
    nodes = [ensemble_network.add_node(f"rel{i}") for i in range(1, 4)]
    with ZooKeeperEnsemble(nodes, jar=jar, start_timeout_s=60.0) as ensemble:
        client = ensemble_client(ensemble)
        try:
            client.create("/released", b"up")
            assert client.get("/released")[0] == b"up"
        finally:
            client.stop()
            client.close()
