"""Workers sharing a stream through ZooKeeper leases (coordination="leases"), on kinesalite and a real ZooKeeper:
even and sticky shares, hand-overs without replays (a lease handed over waits for its records in flight, or for
the message timeout), fenced checkpoints that a worker without the lease cannot write, a shard whose lease moved on
or whose worker's registration vanished dropped with its buffer and taken again once free, ZooKeeper outages that
move no shard and lose nothing, and a static spout beside lease workers."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from typing import Any

import pytest

from kinesis_spout import (
    Checkpoint,
    ConfigError,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.coordination.leases import ZooKeeperLeases
from kinesis_spout.errors import LeaseError, LeaseLost
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import ConsumerThread, drain

from .support import buffered, config, handing_back, lease_node, move_lease, worker

SEQ = 49680465285133529400596629017544029581412381053432102914
#: The outage test's session timeouts. A short outage (1 s of a killed server, then its restart: a JVM start, which
#: takes several seconds on a loaded machine) must end well within the session (60 s: the test server's longest); a
#: long one (10 s) outlives it.
SHORT_OUTAGE_SESSION_S = 60.0
SESSION_S = 8.0
#: How long the outage test gives workers to settle after ZooKeeper is back (deadlines: met in seconds on a quiet
#: machine; a loaded one needs longer, and a test that passes pays nothing for the room).
SETTLE_S = 90.0


class FirstDrop:
    """Watches lease workers from a thread of its own: ``at`` is the monotonic time at which it first saw one of
    them hold fewer than ``held`` shards (None while it has not). Who calls: the ZooKeeper outage test, around the
    outage; ``stop()`` ends the thread."""

    def __init__(self, workers: list[ConsumerThread], held: int) -> None:
        self.workers, self.held = workers, held
        self.at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="first-drop", daemon=True)

    def start(self) -> "FirstDrop":
        self._thread.start()
        return self

    def _run(self) -> None:
        while self.at is None and not self._stop.wait(0.02):
            if any(len(w.shards) < self.held for w in self.workers):
                self.at = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_workers_share_the_shards_evenly_and_hand_them_over_without_replays(kinesalite: KinesisEndpoint,
                                                                            zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=8)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(400)])
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    # Sessions long enough for a loaded machine: a starved heartbeat expiring a 4 s session moves leases and replays
    # records, which is not what this test is about (sessions that expire are: test_lease_failover.py).
    a = worker(config(kinesalite, zookeeper, stream, "a", zookeeper_session_timeout_s=30.0), log, lock).start()
    b: ConsumerThread | None = None
    try:
        assert wait_until(lambda: len(a.shards) == 8, SETTLE_S), f"a holds {a.shards}"
        b = worker(config(kinesalite, zookeeper, stream, "b", zookeeper_session_timeout_s=30.0), log, lock).start()
        assert wait_until(lambda: len(a.shards) == 4 and len(b.shards) == 4, SETTLE_S), (a.shards, b.shards)
        assert not set(a.shards) & set(b.shards)
        placed += kinesalite.put(stream, [f"s{i}".encode() for i in range(400)])
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, SETTLE_S)
        before = set(b.shards)
        b.stop()
        assert wait_until(lambda: len(a.shards) == 8, SETTLE_S), "a did not take back what b gave up on close"
        placed += kinesalite.put(stream, [f"t{i}".encode() for i in range(200)])
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, SETTLE_S)
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
        assert zookeeper.client().exists(lease_node(zookeeper, stream, shard))
        # the lease moves on (a new epoch) behind the spout's back, to a live worker: one that is not live would
        # lose it to the spout's next lease round at once (it may drop and take the shard again within one round)
        move_lease(zookeeper, stream, shard, "intruder", register=True)
        spout.ack_many(t.message_id for t in taken)
        assert wait_until(lambda: shard not in spout.shard_ids, 10), "the spout kept the shard"
        # refused, whether the write or the next lease round found the lease moved on first
        assert wait_until(lambda: any(isinstance(c, LeaseLost) for c in conflicts), 10)
        later = spout.next_batch(max_records=100, timeout_s=1)
        assert all(t.record.shard_id != shard for t in later)


def test_a_dropped_shard_stops_its_reading_thread(kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """With a thread per reader (reader_threads=0), the thread of a shard whose lease was lost ends: a worker that
    loses leases again and again does not pile up threads."""
    stream = kinesalite.create_stream(shards=2)
    spout = KinesisSpout(config(kinesalite, zookeeper, stream, "w", reader_threads=0))

    def reading(shard: str) -> bool:
        return any(shard in t.name for t in threading.enumerate())

    with spout:
        assert wait_until(lambda: len(spout.shard_ids) == 2, 10)
        shard = sorted(spout.shard_ids)[0]
        assert wait_until(lambda: reading(shard), 5), [t.name for t in threading.enumerate()]
        move_lease(zookeeper, stream, shard, "intruder", register=True)
        assert wait_until(lambda: shard not in spout.shard_ids, 10), "the spout kept the shard"
        assert wait_until(lambda: not reading(shard), 10), "the dropped shard's reading thread still runs"
        assert reading(sorted(set(spout.shard_ids))[0]), "the other shard's thread was stopped too"


@pytest.mark.parametrize("outage_s, session_s", [(1.0, SHORT_OUTAGE_SESSION_S), (10.0, SESSION_S)],
                         ids=["shorter-than-session", "longer-than-session"])
def test_zookeeper_outages_move_no_shard_when_short_and_lose_nothing_when_long(
        kinesalite: KinesisEndpoint, zookeeper: Any, outage_s: float, session_s: float) -> None:
    """ZooKeeper killed for less than the session timeout (60 s, its restart included): no shard changes hands, no
    epoch moves. Killed for longer than the session (8 s): each worker stops emitting by its own timer (it cannot know
    whether its session survived), and takes its shards again under new epochs once ZooKeeper is back. Nothing is lost
    either way.

    A short outage is short only if the machine lets it be: the server's restart (a JVM start) and the clients'
    reconnection take longer on a loaded machine, and past the session the workers must let their shards go. So no
    worker may let a shard go sooner than the session timeout after the kill, whatever the load; when none let one go,
    no epoch moved; when the machine stretched the outage past the session, the leases were taken again as after a
    long outage."""
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(200)])
    log: list[tuple[str, str]] = []
    lock = threading.Lock()
    workers = [worker(config(kinesalite, zookeeper, stream, name, zookeeper_session_timeout_s=session_s), log,
                      lock).start() for name in ("a", "b")]
    drops = FirstDrop(workers, held=2)
    try:
        assert wait_until(lambda: sorted(len(w.shards) for w in workers) == [2, 2], SETTLE_S)
        assert wait_until(lambda: len({m for m, _ in log}) == 200, SETTLE_S)
        epochs = [w.spout.lease_epochs() for w in workers]
        drops.start()
        killed_at = time.monotonic()  # taken first: no client can see the server gone before this
        zookeeper.server.kill()
        if outage_s > session_s:
            assert wait_until(lambda: all(not w.shards for w in workers), session_s + SETTLE_S), \
                "a worker went on reading without ZooKeeper past its session timeout"
        else:
            assert not wait_until(lambda: drops.at is not None, outage_s)
        zookeeper.server.start()
        placed += kinesalite.put(stream, [f"s{i}".encode() for i in range(200)])
        assert wait_until(lambda: sorted(len(w.shards) for w in workers) == [2, 2], SETTLE_S)
        everything = {f"{s}:{q}" for s, q in placed}
        assert wait_until(lambda: {m for m, _ in log} >= everything, SETTLE_S)
        after = [w.spout.lease_epochs() for w in workers]
        assert all(w.error is None for w in workers), [w.error for w in workers]
    finally:
        drops.stop()
        for w in workers:
            w.stop()
    if outage_s < session_s:
        if drops.at is not None:  # the restart and reconnection took longer than the session on this machine
            assert drops.at - killed_at >= session_s, (
                f"a worker let a shard go {drops.at - killed_at:.1f} s after ZooKeeper went down, within its "
                f"{session_s:g} s session")
        else:
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
    assert rows[parent][1:] == ["finished", "-", "-", "1", placed[-1][1], "done"]  # read to its end, lease given back
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


def worker_node(zookeeper: Any, stream: str, name: str) -> str:
    return f"{zookeeper.prefix}/leases/{stream}/workers/{name}"


def test_leases_with_a_store_other_than_zookeeper_s_is_an_error_naming_it_and_the_fix(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    spout = KinesisSpout(config(kinesalite, zookeeper, "any", "w"), checkpoint_store=MemoryCheckpointStore())
    with pytest.raises(ConfigError) as raised:
        spout.open()
    spout.close()
    assert str(raised.value) == ("coordination 'leases' needs the ZooKeeper checkpoint store (the workers meet "
                                 "there); got MemoryCheckpointStore: use coordination='static' with it")


def test_a_static_spout_beside_lease_workers_names_them_all_and_alone_has_no_lease_epochs(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    cfg = config(kinesalite, zookeeper, stream, "static", coordination="static")
    store = ZooKeeperCheckpointStore.from_config(cfg)
    store.open()
    try:
        for name in ("a", "b"):  # two live lease workers of the app (their nodes go with this store's session)
            ZooKeeperLeases(store, name).join()
        static = KinesisSpout(cfg)
        with pytest.raises(ConfigError) as raised:
            static.open()
        static.close()
    finally:
        store.close()
    assert str(raised.value) == (f"app 'leases' reads stream {stream!r} with leases (live workers: a, b), but this "
                                 f"spout has coordination='static': both would read the same shards. Use "
                                 f"coordination='leases', or another app_name")
    with KinesisSpout(cfg) as spout:
        assert spout.shard_ids == kinesalite.shard_ids(stream)
        assert spout.lease_epochs() == {}


def test_while_zookeeper_is_down_nothing_is_emitted_no_shard_is_dropped_and_close_leaves_the_leases_alone(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """Records buffered during a ZooKeeper outage shorter than the session timeout are held back (the lease may
    have moved on), the shard is kept, and close() does not try to release leases it cannot reach."""
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    kinesalite.put(stream, [f"r{i}".encode() for i in range(5)])
    cfg = config(kinesalite, zookeeper, stream, "w", zookeeper_session_timeout_s=30.0, zookeeper_deadline_s=2.0)
    store = ZooKeeperCheckpointStore.from_config(cfg)
    spout = KinesisSpout(cfg, checkpoint_store=store)
    try:
        spout.open()
        assert len(drain(spout, 5)) == 5
        assert spout.flush_checkpoints()
        assert spout.lease_epochs() == {shard: 0}
        zookeeper.server.kill()
        assert wait_until(lambda: not store.connected, 15)
        kinesalite.put(stream, [f"s{i}".encode() for i in range(5)])
        assert wait_until(lambda: buffered(spout) == 5, 15)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []
        assert spout.next_tuple() is None
        assert spout.shard_ids == [shard] and spout.lease_epochs() == {shard: 0}
        with caplog.at_level(logging.WARNING, logger="kinesis_spout"):
            spout.close()
    finally:
        spout.close()
    assert f"closing without ZooKeeper: the leases of {shard} go when the session times out" in caplog.text
    assert "could not give the leases back" not in caplog.text


def test_a_shard_whose_lease_moved_on_is_dropped_with_its_buffer_and_taken_again_once_free(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(30)])
    conflicts: list[Any] = []
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    with KinesisSpout(config(kinesalite, zookeeper, stream, "w"), on_checkpoint_conflict=conflicts.append) as spout:
        assert wait_until(lambda: buffered(spout) == 30, 15)
        taken = spout.next_batch(max_records=5, timeout_s=5)
        assert len(taken) == 5 and spout.lease_epochs() == {shard: 0}
        move_lease(zookeeper, stream, shard, "intruder")  # epoch 1
        spout.ack_many(t.message_id for t in taken)  # the write is refused: the shard is dropped
        assert wait_until(lambda: bool(conflicts), 10)  # the handler hears of it after the drop
        assert isinstance(conflicts[0], LeaseLost)
        later = spout.next_batch(max_records=100, timeout_s=0)  # the 25 buffered records went with the shard
        assert not later or spout.lease_epochs() == {shard: 2}, "records of the dropped shard were emitted"
        # the intruder is no live worker: the lease is free, and taken again under a new epoch
        assert wait_until(lambda: spout.lease_epochs() == {shard: 2}, 15), spout.lease_epochs()
        again = later + drain(spout, 30 - len(later))
        assert sorted(t.message_id for t in again) == sorted(f"{s}:{q}" for s, q in placed)  # its acks were lost
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("shard ")]
    assert dropped == [f"shard {shard} dropped: its lease was lost to another worker"]


def test_a_worker_whose_registration_vanished_drops_its_shards_and_takes_them_again_under_a_new_epoch(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """As after a lost session: the worker's node is gone, so its leases may be anyone's. The worker drops its
    shards, joins again, takes the lease again under a new epoch and reads on from the stored checkpoint. On close
    it gives the lease back and leaves."""
    stream = kinesalite.create_stream(shards=1)
    shard = kinesalite.shard_ids(stream)[0]
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(10)])
    conflicts: list[Any] = []
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    zk = zookeeper.client()
    me = worker_node(zookeeper, stream, "w")
    with KinesisSpout(config(kinesalite, zookeeper, stream, "w"), on_checkpoint_conflict=conflicts.append) as spout:
        assert len(drain(spout, 5)) == 5 and spout.flush_checkpoints()  # stored: the 5th record
        assert spout.lease_epochs() == {shard: 0}
        zk.delete(me)
        assert wait_until(lambda: spout.lease_epochs() == {shard: 1}, 15), spout.lease_epochs()
        assert zk.exists(me) is not None
        again = drain(spout, 5)
        assert sorted(t.message_id for t in again) == sorted(f"{s}:{q}" for s, q in placed[5:])
        assert spout.flush_checkpoints() and conflicts == []
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("shard ")]
    assert dropped == [f"shard {shard} dropped: this worker may have lost its ZooKeeper session"]
    data, stat = zk.get(lease_node(zookeeper, stream, shard))
    assert (json.loads(data)["owner"], stat.version) == (None, 2), "close gave the lease back"
    assert zk.exists(me) is None


def two_shards_held_by_a(kinesalite: KinesisEndpoint, zookeeper: Any, on_conflict: Any = None, **extra: Any
                         ) -> tuple[str, str, str, KinesisSpout]:
    """A 2-shard stream of 40 records, all buffered by worker ``a``, which holds both leases."""
    stream = kinesalite.create_stream(shards=2)
    kinesalite.put(stream, [f"r{i}".encode() for i in range(40)])
    first, second = sorted(kinesalite.shard_ids(stream))
    a = KinesisSpout(config(kinesalite, zookeeper, stream, "a", **extra), on_checkpoint_conflict=on_conflict).open()
    assert a.shard_ids == [first, second]
    assert wait_until(lambda: buffered(a) == 40, 15)
    return stream, first, second, a


def test_a_lease_handed_over_waits_for_its_records_in_flight_and_the_next_owner_reads_none_of_them_again(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """When ``b`` joins, ``a`` gives it one of its two shards: it stops reading it, waits for the records in flight
    (acked here during the wait, within message_timeout_s), writes their checkpoint, then releases the lease."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, message_timeout_s=2.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        assert len(held) == 40
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15, interval_s=0.01)
        a.ack_many(t.message_id for t in held)
        assert wait_until(lambda: b.shards == [second], 15) and a.shard_ids == [first]
        assert a.next_batch(timeout_s=0) == []  # and raises nothing a round of a's shard sync met
        more = kinesalite.put(stream, [f"s{i}".encode() for i in range(20)])
        new = {f"{s}:{q}" for s, q in more if s == second}
        assert new and wait_until(lambda: {m for m, _ in log} >= new, 15)
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert {m for m, _ in log} == new, "the next owner read records acked during the hand-over again"
    assert "still in flight" not in caplog.text


def test_a_lease_handed_over_with_records_never_acked_goes_after_message_timeout_and_they_are_read_again(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """The wait for the records in flight is bounded by message_timeout_s (1 s here, under the 10 s it is at most):
    then the lease goes anyway, and the next owner reads the records that were still in flight."""
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, message_timeout_s=1.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    try:
        held = drain(a, 40, ack=False)
        assert len(held) == 40
        a.ack_many(t.message_id for t in held if t.record.shard_id == first)
        unacked = {t.message_id for t in held if t.record.shard_id == second}
        b.start()
        assert wait_until(lambda: b.shards == [second] and a.shard_ids == [first], 8), (b.shards, a.shard_ids)
        assert wait_until(lambda: {m for m, _ in log} >= unacked, 15)
        assert a.next_batch(timeout_s=0) == []  # and raises nothing a round of a's shard sync met
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert (f"handing {second} over with {len(unacked)} records still in flight: the next owner reads them again"
            in caplog.text)


def test_a_lease_lost_during_its_hand_over_has_its_last_checkpoint_refused_and_reported_and_nothing_is_lost(
        kinesalite: KinesisEndpoint, zookeeper: Any, caplog: Any) -> None:
    """The lease of the shard ``a`` is handing over moves on while ``a`` waits for its records in flight: the
    checkpoint of those records is refused (a LeaseLost for a shard ``a`` no longer reads, passed to the handler),
    and the next owner reads them again. The shard's checkpoints are written once a minute, so the only write after
    its first is the hand-over's own, once its records in flight are done: the lease is lost then, not during the
    wait (``test_lease_hand_over.py`` has that case)."""
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    conflicts: list[Any] = []
    stream, first, second, a = two_shards_held_by_a(kinesalite, zookeeper, conflicts.append, message_timeout_s=5.0,
                                                    checkpoint_interval_s=60.0)
    log: list[tuple[str, str]] = []
    b = worker(config(kinesalite, zookeeper, stream, "b"), log, threading.Lock())
    checkpoint = f"{zookeeper.prefix}/leases/{stream}/checkpoints/{second}"
    try:
        held = drain(a, 40, ack=False)
        assert len(held) == 40
        mine = [t for t in held if t.record.shard_id == second]
        a.ack(mine[0].message_id)  # the shard's first write, at once; its next one would be a minute away
        assert wait_until(lambda: zookeeper.reader().exists(checkpoint) is not None, 10)
        held = [t for t in held if t is not mine[0]]
        b.start()
        assert wait_until(lambda: handing_back(caplog, second), 15, interval_s=0.01)
        move_lease(zookeeper, stream, second, "intruder")
        a.ack_many(t.message_id for t in held)
        assert wait_until(lambda: bool(conflicts), 15), "the refused checkpoint was not reported"
        assert [(type(c), c.shard_id) for c in conflicts] == [(LeaseLost, second)]
        assert wait_until(lambda: b.shards == [second], 15) and a.shard_ids == [first]
        again = {t.message_id for t in mine[1:]}
        assert wait_until(lambda: {m for m, _ in log} >= again, 15)
        assert a.next_batch(timeout_s=0) == []  # and raises nothing a round of a's shard sync met
        assert b.error is None
    finally:
        b.stop()
        a.close()
    assert "handler raised" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.getMessage().startswith("shard ")], \
        "a shard no longer read was dropped"
