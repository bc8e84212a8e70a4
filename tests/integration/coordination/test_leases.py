"""Workers sharing a stream through ZooKeeper leases (coordination="leases"), on kinesalite and a real ZooKeeper:
even and sticky shares, hand-overs without replays, fenced checkpoints that a worker without the lease cannot
write."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from kinesis_spout import Checkpoint, KinesisSpout, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.coordination.leases import ZooKeeperLeases
from kinesis_spout.errors import LeaseError, LeaseLost
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import ConsumerThread, drain

from .support import config, worker

SEQ = 49680465285133529400596629017544029581412381053432102914
#: The outage test's session timeouts. A short outage (1 s of a killed server, then its restart: a JVM start, which
#: takes several seconds on a loaded machine) must end well within the session; a long one (10 s) outlives it.
SHORT_OUTAGE_SESSION_S = 30.0
SESSION_S = 8.0


def test_workers_share_the_shards_evenly_and_hand_them_over_without_replays(kinesalite: KinesisEndpoint,
                                                                            zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=8)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(400)])
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    a = worker(config(kinesalite, zookeeper, stream, "a"), log, lock).start()
    b: ConsumerThread | None = None
    try:
        assert wait_until(lambda: len(a.shards) == 8, 15), f"a holds {a.shards}"
        b = worker(config(kinesalite, zookeeper, stream, "b"), log, lock).start()
        assert wait_until(lambda: len(a.shards) == 4 and len(b.shards) == 4, 20), (a.shards, b.shards)
        assert not set(a.shards) & set(b.shards)
        placed += kinesalite.put(stream, [f"s{i}".encode() for i in range(400)])
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, 30)
        before = set(b.shards)
        b.stop()
        assert wait_until(lambda: len(a.shards) == 8, 15), "a did not take back what b gave up on close"
        placed += kinesalite.put(stream, [f"t{i}".encode() for i in range(200)])
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, 30)
        assert a.error is None and b.error is None
        assert a.spout.flush_checkpoints()
    finally:
        a.stop()
        if b is not None:
            b.stop()
    times = Counter(m for m, _ in log)
    assert {m for m, n in times.items() if n > 1} == set(), "a hand-over replayed records"
    by_b = {m.rsplit(":", 1)[0] for m, w in log if w == "b"}
    assert by_b == before, "b read exactly the shards it held"
    store = ZooKeeperCheckpointStore.from_config(a.spout.config)
    store.open()
    try:
        last: dict[str, int] = {}
        for shard, seq in placed:
            last[shard] = max(last.get(shard, 0), int(seq))
        assert {s: int(cp.sequence_number) for s, cp in store.list().items()} == last
    finally:
        store.close()


def test_a_worker_without_the_lease_cannot_write_the_checkpoint(zookeeper: Any) -> None:
    """A zombie (its session gone, its lease taken by another worker at a new epoch) keeps its fence: its write
    fails with LeaseLost and the stored checkpoint does not move. A plain set() would have gone through."""
    cfg = SpoutConfig(stream_name="zombie", app_name="leases", zookeeper=zookeeper.hosts,
                      zookeeper_prefix=zookeeper.prefix)
    zombie_store, live_store = ZooKeeperCheckpointStore.from_config(cfg), ZooKeeperCheckpointStore.from_config(cfg)
    zombie_store.open(), live_store.open()
    try:
        zombie, live = ZooKeeperLeases(zombie_store, "zombie"), ZooKeeperLeases(live_store, "live")
        zombie.join(), live.join()
        shard = "shardId-000000000000"
        assert zombie.acquire(shard, live.read([shard])[shard]) == 0
        zombie_store.save(Checkpoint(shard, str(SEQ)))
        # the zombie's session ends (as after SIGSTOP past the timeout): its worker node goes; the other takes over
        zookeeper.client().delete(f"{zombie.workers_path}/zombie")
        assert live.workers() == ["live"]
        seen = live.read([shard])[shard]
        assert seen == ("zombie", 0)
        assert live.acquire(shard, seen) == 1
        live_store.save(Checkpoint(shard, str(SEQ + 10)))
        with pytest.raises(LeaseLost, match="no longer holds its lease"):
            zombie_store.save(Checkpoint(shard, str(SEQ + 20)))
        assert live_store.load(shard).sequence_number == str(SEQ + 10)
        zombie.forget(shard)  # the spout drops the shard: later writes are refused without asking ZooKeeper
        with pytest.raises(LeaseLost, match="lost the shard's lease"):
            zombie_store.save(Checkpoint(shard, str(SEQ + 30)))
        live.release(shard)
        assert live.read([shard])[shard] == (None, 2)
    finally:
        zombie_store.close(), live_store.close()


def test_two_live_workers_with_one_worker_id_is_a_clear_error(zookeeper: Any) -> None:
    cfg = SpoutConfig(stream_name="twins", app_name="leases", zookeeper=zookeeper.hosts,
                      zookeeper_prefix=zookeeper.prefix)
    first, second = ZooKeeperCheckpointStore.from_config(cfg), ZooKeeperCheckpointStore.from_config(cfg)
    first.open(), second.open()
    try:
        ZooKeeperLeases(first, "same").join()
        ZooKeeperLeases(first, "same").join()  # again in the same session: fine
        with pytest.raises(LeaseError, match="another live worker is registered as 'same'"):
            ZooKeeperLeases(second, "same").join()
    finally:
        first.close(), second.close()


def test_a_spout_whose_lease_moved_on_stops_emitting_that_shard(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(50)])
    conflicts: list[Any] = []
    spout = KinesisSpout(config(kinesalite, zookeeper, stream, "w"), on_checkpoint_conflict=conflicts.append)
    with spout:
        assert wait_until(lambda: len(spout.shard_ids) == 2, 10)
        taken = spout.next_batch(max_records=10, timeout_s=5)
        shard = taken[0].record.shard_id
        zk = zookeeper.client()
        lease = f"{zookeeper.prefix}/leases/{stream}/leases/{shard}"  # {prefix}/{app}/{stream}/leases/{shard}
        assert zk.exists(lease)
        # the lease moves on (a new epoch) behind the spout's back, to a live worker: one that is not live would
        # lose it to the spout's next lease round at once (it may drop and take the shard again within one round)
        moved = zk.transaction()
        moved.create(f"{zookeeper.prefix}/leases/{stream}/workers/intruder", b"{}", ephemeral=True)
        moved.set_data(lease, b'{"owner": "intruder"}')
        assert not [r for r in moved.commit() if isinstance(r, Exception)]
        spout.ack_many(t.message_id for t in taken)
        assert wait_until(lambda: shard not in spout.shard_ids, 10), "the spout kept the shard"
        # refused, whether the write or the next lease round found the lease moved on first
        assert wait_until(lambda: any(isinstance(c, LeaseLost) for c in conflicts), 10)
        later = spout.next_batch(max_records=100, timeout_s=1)
        assert all(t.record.shard_id != shard for t in later)


@pytest.mark.parametrize("outage_s, session_s", [(1.0, SHORT_OUTAGE_SESSION_S), (10.0, SESSION_S)],
                         ids=["shorter-than-session", "longer-than-session"])
def test_zookeeper_outages_move_no_shard_when_short_and_lose_nothing_when_long(
        kinesalite: KinesisEndpoint, zookeeper: Any, outage_s: float, session_s: float) -> None:
    """ZooKeeper killed for less than the session timeout (30 s, its restart included): no shard changes hands, no
    epoch moves. Killed for longer than the session (8 s): each worker stops emitting by its own timer (it cannot know
    whether its session survived), and takes its shards again under new epochs once ZooKeeper is back. Nothing is lost
    either way."""
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(200)])
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    workers = [worker(config(kinesalite, zookeeper, stream, name, zookeeper_session_timeout_s=session_s), log,
                      lock).start() for name in ("a", "b")]
    try:
        assert wait_until(lambda: sorted(len(w.shards) for w in workers) == [2, 2], 20)
        assert wait_until(lambda: len({m for m, _ in log}) == 200, 20)
        epochs = [w.spout.lease_epochs() for w in workers]
        zookeeper.server.kill()
        if outage_s > session_s:
            assert wait_until(lambda: all(not w.shards for w in workers), outage_s + 2), \
                "a worker went on reading without ZooKeeper past its session timeout"
        else:
            assert not wait_until(lambda: any(len(w.shards) < 2 for w in workers), outage_s)
        zookeeper.server.start()
        placed += kinesalite.put(stream, [f"s{i}".encode() for i in range(200)])
        assert wait_until(lambda: sorted(len(w.shards) for w in workers) == [2, 2], 30)
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, 30)
        after = [w.spout.lease_epochs() for w in workers]
        assert all(w.error is None for w in workers), [w.error for w in workers]
    finally:
        for w in workers:
            w.stop()
    if outage_s < session_s:
        assert after == epochs, "a short ZooKeeper outage moved a lease"
    else:
        moved = {s for before, now in zip(epochs, after) for s in before if now.get(s) != before[s]}
        assert moved, "leases were taken again under new epochs"


def test_status_shows_owners_epochs_checkpoints_lineage_and_live_workers(kinesalite: KinesisEndpoint,
                                                                         zookeeper: Any, capsys: Any) -> None:
    from kinesis_spout.cli import main

    stream = kinesalite.create_stream(shards=1)
    parent = kinesalite.shard_ids(stream)[0]
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(20)])
    admin = kinesalite.client()
    admin.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    from kinesis_spout.testing.kinesis import wait_for_stream

    wait_for_stream(admin, stream)
    log: list[tuple[str, str]] = []
    w = worker(config(kinesalite, zookeeper, stream, "w1", shard_sync_interval_s=1.0), log, threading.Lock())
    w.start()
    try:
        assert wait_until(lambda: len(w.shards) == 2 and len(log) == 20, 20), w.shards
        assert w.spout.flush_checkpoints()
        args = ["status", "--stream", stream, "--app", "leases", "--zookeeper", zookeeper.hosts, "--prefix",
                zookeeper.prefix, "--endpoint-url", kinesalite.endpoint_url, "--region", kinesalite.region]
        assert main(args) == 0
        out = capsys.readouterr().out
    finally:
        w.stop()
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("shardId-")}
    assert "live workers: w1" in out
    assert rows[parent][1:] == ["finished", "-", "-", "1", placed[-1][1]]  # read to its end, lease given back
    children = [s for s in rows if s != parent]
    assert len(children) == 2
    for child in children:
        assert rows[child][1:5] == ["open", parent, "w1", "0"] and rows[child][5] == "-"


def test_a_static_spout_beside_lease_workers_of_its_app_is_a_clear_error(kinesalite: KinesisEndpoint,
                                                                        zookeeper: Any) -> None:
    from kinesis_spout import ConfigError

    stream = kinesalite.create_stream(shards=1)
    with KinesisSpout(config(kinesalite, zookeeper, stream, "leaser")):
        static = KinesisSpout(config(kinesalite, zookeeper, stream, "static", coordination="static"))
        with pytest.raises(ConfigError, match="with leases \\(live workers: leaser\\).*coordination='static'"):
            static.open()
        static.close()
    with KinesisSpout(config(kinesalite, zookeeper, stream, "static", coordination="static")) as spout:
        assert spout.shard_ids  # once the lease workers are gone, the static split may read it


def test_a_corrupt_lease_znode_is_a_clear_error_naming_it(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    from kinesis_spout.errors import LeaseError

    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    node = f"{zookeeper.prefix}/leases/{stream}/leases/{shard}"
    zookeeper.client().create(node, b"not a lease", makepath=True)
    spout = KinesisSpout(config(kinesalite, zookeeper, stream, "w"))
    with pytest.raises(LeaseError, match=f"lease znode {node} is not a lease"):
        spout.open()
    spout.close()


def test_a_stream_deleted_under_a_running_worker_is_a_clear_error(kinesalite: KinesisEndpoint,
                                                                  zookeeper: Any) -> None:
    from kinesis_spout.errors import KinesisError

    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [b"a", b"b"])
    with KinesisSpout(config(kinesalite, zookeeper, stream, "w")) as spout:
        assert len(drain(spout, 2)) == 2
        kinesalite.client().delete_stream(StreamName=stream)

        def raises() -> bool:
            try:
                spout.next_batch(max_records=10, timeout_s=0.2)
            except KinesisError as exc:
                raised.append(exc)
                return True
            return False

        raised: list[KinesisError] = []
        assert wait_until(raises, 30), "reading a deleted stream went on silently"
    assert stream in str(raised[0]) or "not found" in str(raised[0]).lower()
