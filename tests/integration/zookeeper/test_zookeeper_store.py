"""The ZooKeeper checkpoint store against a real server: layout, compare-and-set, bad data, dead server."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.spark.batch_store import ZooKeeperBatchStore
from kinesis_spout.testing.plugin import ZooKeeperHandle
from kinesis_spout.testing.process import free_port
from kinesis_spout.zookeeper.session import ZooKeeperSession

BIG = 49590338271490256608559692538361571095921575989136588898


def store_for(zookeeper, app: str = "app", stream: str = "stream",
              store_class: type[ZooKeeperCheckpointStore] = ZooKeeperCheckpointStore) -> ZooKeeperCheckpointStore:
    config = SpoutConfig(stream_name=stream, app_name=app, zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix)
    return store_class.from_config(config)


def test_save_load_list_delete(zookeeper) -> None:
    store = store_for(zookeeper)
    store.open()
    try:
        assert store.load("shardId-000000000000") is None and store.list() == {}
        store.save(Checkpoint("shardId-000000000000", str(BIG)).stamped("me"))
        store.save(Checkpoint("shardId-000000000001", str(BIG + 7)).stamped("me"))
        loaded = store.load("shardId-000000000000")
        assert loaded is not None and loaded.sequence_number == str(BIG) and loaded.owner == "me"
        assert sorted(store.list()) == ["shardId-000000000000", "shardId-000000000001"]
        raw = zookeeper.client().get(f"{zookeeper.prefix}/app/stream/checkpoints/shardId-000000000001")[0]
        assert json.loads(raw)["sequence_number"] == str(BIG + 7)
        store.delete("shardId-000000000001")
        assert list(store.list()) == ["shardId-000000000000"]
    finally:
        store.close()
        store.close()  # idempotent


def test_apps_do_not_share_checkpoints(zookeeper) -> None:
    a, b = store_for(zookeeper, app="a"), store_for(zookeeper, app="b")
    a.open(), b.open()
    try:
        a.save(Checkpoint("s", "10"))
        assert b.load("s") is None
    finally:
        a.close(), b.close()


def test_concurrent_writers_never_move_a_checkpoint_backwards(zookeeper) -> None:
    stores = [store_for(zookeeper) for _ in range(4)]
    for store in stores:
        store.open()
    conflicts = [0] * len(stores)  # lower writes that lost to a higher one: refused, never applied

    def write(i: int) -> None:
        for n in range(i, 200, len(stores)):  # interleaved increasing values from 4 writers
            try:
                stores[i].save(Checkpoint("s", str(BIG + n)))
            except CheckpointConflict:
                conflicts[i] += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        final = stores[0].load("s")
        assert final is not None and int(final.sequence_number) == BIG + 199  # the highest write wins
        with pytest.raises(CheckpointConflict, match="refusing to move it back"):
            stores[1].save(Checkpoint("s", str(BIG)))
    finally:
        for store in stores:
            store.close()


def test_unreadable_checkpoint_stops_the_spout_naming_the_znode(zookeeper, moto_kinesis) -> None:
    stream = moto_kinesis.create_stream("s1", shards=1)
    shard = moto_kinesis.shard_ids(stream)[0]
    node = f"{zookeeper.prefix}/app/{stream}/checkpoints/{shard}"
    zookeeper.client().create(node, b"{garbage", makepath=True)
    config = SpoutConfig(stream_name=stream, app_name="app", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=moto_kinesis.endpoint_url,
                         region="us-east-1")
    spout = KinesisSpout(config)
    with pytest.raises(CheckpointError, match=f"{node} is not valid UTF-8 JSON"):
        spout.open()
    spout.close()


def test_unreachable_zookeeper_is_a_clear_error() -> None:
    store = ZooKeeperCheckpointStore(f"127.0.0.1:{free_port()}", "/x", connect_timeout_s=1.0)
    with pytest.raises(CheckpointError, match="cannot connect to ZooKeeper at 127.0.0.1:.* within 1 s"):
        store.open()
    store.close()


def test_batch_id_lives_next_to_the_checkpoints_and_never_moves_back(zookeeper) -> None:
    store = store_for(zookeeper)
    batches = ZooKeeperBatchStore.on_store(store)
    store.open()
    try:
        assert batches.load_batch_id() == 0
        batches.save_batch_id(7)
        batches.save_batch_id(8)
        for taken in (8, 3):  # an id is taken once: two pipelines on one app and stream never share it
            with pytest.raises(CheckpointConflict, match=f"is 8; {taken} is taken"):
                batches.save_batch_id(taken)
        assert batches.load_batch_id() == 8
        assert zookeeper.client().get(f"{zookeeper.prefix}/app/stream/batch_id")[0] == b"8"
        assert store.list() == {}  # not mistaken for a shard's checkpoint
        zookeeper.client().set(f"{zookeeper.prefix}/app/stream/batch_id", b"eight")
        with pytest.raises(CheckpointError, match="unreadable batch id at ZooKeeper node"):
            batches.load_batch_id()
    finally:
        store.close()


class InterleavedSession(ZooKeeperSession):
    """A session that lets another writer in at the worst moment, once: ``competing`` runs right after the next
    ``get`` (the read of a compare-and-set) returns or finds no node, before the caller writes."""

    competing: Callable[[], None] | None = None

    def get(self, path: str, *, what: str | None = None) -> Any:
        try:
            return super().get(path, what=what)
        finally:
            if self.competing is not None:
                competing, self.competing = self.competing, None
                competing()


class InterleavedStore(ZooKeeperCheckpointStore):
    """A ZooKeeper store on an :class:`InterleavedSession` of its own (it starts and closes it, as a store that
    makes its session does); ``competing`` is its session's."""

    def __init__(self, hosts: str, path: str, **settings: Any) -> None:
        session = InterleavedSession(hosts, name=f"checkpoint store for {path.rstrip('/')}", **settings)
        super().__init__(hosts, path, session=session)
        self.owns_session = True
        self.interleaved = session

    @property
    def competing(self) -> Callable[[], None] | None:
        return self.interleaved.competing

    @competing.setter
    def competing(self, competing: Callable[[], None] | None) -> None:
        self.interleaved.competing = competing


Interleaved = tuple[InterleavedStore, ZooKeeperCheckpointStore]


@pytest.fixture
def interleaved(zookeeper: ZooKeeperHandle) -> Iterator[Interleaved]:
    """Our (interleaved) store and another writer's store on the same checkpoints, both open."""
    ours, theirs = store_for(zookeeper, store_class=InterleavedStore), store_for(zookeeper)
    assert isinstance(ours, InterleavedStore)
    ours.open(), theirs.open()
    try:
        yield ours, theirs
    finally:
        ours.close(), theirs.close()


@pytest.mark.parametrize("exists", [True, False], ids=["node-exists", "no-node-yet"])
def test_a_higher_checkpoint_written_between_our_read_and_write_wins(interleaved: Interleaved, exists: bool) -> None:
    """Compare-and-set on the version read: another writer stores a higher checkpoint right after our read; our
    write must not overwrite it (it fails on the version, re-reads, and is refused as a move backwards)."""
    ours, theirs = interleaved
    if exists:
        theirs.save(Checkpoint("s", str(BIG)).stamped("other"))
    ours.competing = lambda: theirs.save(Checkpoint("s", str(BIG + 30)).stamped("other"))
    refused = rf"is {BIG + 30} \(by other\); refusing to move it back to {BIG + 20}"
    with pytest.raises(CheckpointConflict, match=refused):
        ours.save(Checkpoint("s", str(BIG + 20)).stamped("us"))
    assert ours.competing is None  # the other writer did get in between
    stored = theirs.load("s")
    assert stored is not None and (stored.sequence_number, stored.owner) == (str(BIG + 30), "other")


def test_a_lower_checkpoint_written_between_our_read_and_write_is_overtaken(interleaved: Interleaved) -> None:
    """The other side of the compare-and-set loop: after the version changed under us, a re-read finds a lower
    value, so our higher one is written."""
    ours, theirs = interleaved
    theirs.save(Checkpoint("s", str(BIG)).stamped("other"))
    ours.competing = lambda: theirs.save(Checkpoint("s", str(BIG + 10)).stamped("other"))
    ours.save(Checkpoint("s", str(BIG + 20)).stamped("us"))
    assert ours.competing is None
    stored = theirs.load("s")
    assert stored is not None and (stored.sequence_number, stored.owner) == (str(BIG + 20), "us")


def test_a_higher_batch_id_written_between_our_read_and_write_wins(interleaved: Interleaved) -> None:
    """Batch ids use the same compare-and-set: a higher id stored right after our read is never overwritten."""
    ours, theirs = interleaved
    their_batches = ZooKeeperBatchStore.on_store(theirs)
    their_batches.save_batch_id(1)
    ours.competing = lambda: their_batches.save_batch_id(9)
    with pytest.raises(CheckpointConflict, match="is 9; 5 is taken"):
        ZooKeeperBatchStore.on_store(ours).save_batch_id(5)
    assert ours.competing is None
    assert their_batches.load_batch_id() == 9


# Kinesis sequence numbers have up to 56 digits: as strings the 55-digit LOW sorts after the 56-digit HIGH
LOW = "9" * 55
HIGH = "1" + "0" * 55


AnyStore = MemoryCheckpointStore | ZooKeeperCheckpointStore


@pytest.fixture(params=["memory", "zookeeper"])
def any_store(request: pytest.FixtureRequest) -> Iterator[AnyStore]:
    """An open store of each kind, closed after the test."""
    store: AnyStore
    if request.param == "memory":
        store = MemoryCheckpointStore()
    else:
        store = store_for(request.getfixturevalue("zookeeper"))
    store.open()
    try:
        yield store
    finally:
        store.close()


def test_stores_compare_sequence_numbers_as_integers(any_store: AnyStore) -> None:
    """A 55-digit number after a 56-digit one is a move backwards (refused); the other way round is progress,
    although as strings it is the opposite."""
    assert len(LOW) == 55 and len(HIGH) == 56 and LOW > HIGH and int(LOW) < int(HIGH)
    any_store.save(Checkpoint("a", HIGH))
    with pytest.raises(CheckpointConflict):
        any_store.save(Checkpoint("a", LOW))
    assert any_store.load("a").sequence_number == HIGH
    any_store.save(Checkpoint("b", LOW))
    any_store.save(Checkpoint("b", HIGH))
    assert any_store.load("b").sequence_number == HIGH


def test_a_store_not_open_or_closed_says_so_and_how_to_mend_it(zookeeper) -> None:
    store = store_for(zookeeper)
    node_path = f"{zookeeper.prefix}/app/stream/checkpoints"
    calls: dict[str, Callable[[], object]] = {
        "load": lambda: store.load("s"), "save": lambda: store.save(Checkpoint("s", "10")),
        "list": store.list, "delete": lambda: store.delete("s"),
        "batch id": ZooKeeperBatchStore.on_store(store).load_batch_id}
    for when in ("before open()", "after close()"):
        for name, call in calls.items():
            with pytest.raises(CheckpointError) as caught:
                call()
            assert str(caught.value) == (f"checkpoint store for {node_path} at ZooKeeper {zookeeper.hosts} is not "
                                         f"open: call open() first (a closed store stays closed until opened "
                                         f"again)"), f"{name} {when}: {caught.value}"
            assert caught.value.retriable is False, f"{name} {when}"
        if when == "before open()":
            store.open()
            store.save(Checkpoint("s", "10"))
            store.close()
    store.open()  # opened again, it works again
    try:
        assert store.load("s").sequence_number == "10"
    finally:
        store.close()


def test_a_refusal_no_retry_can_mend_is_not_retriable_and_says_what_to_do(zookeeper) -> None:
    store = store_for(zookeeper)
    store.open()
    try:
        store.save(Checkpoint("s", "10"))
        node = f"{store.path}/s"
        zookeeper.client().create(f"{node}/stray", b"")  # not a node this library writes
        with pytest.raises(CheckpointError) as caught:
            store.delete("s")
        assert str(caught.value).startswith(f"ZooKeeper at {zookeeper.hosts} refused deleting {node}: NotEmptyError")
        assert str(caught.value).endswith("; trying again cannot help: the node has children this library did not "
                                          "write; remove them or use another path")
        assert caught.value.retriable is False
        assert store.load("s").sequence_number == "10"  # nothing changed
    finally:
        store.close()


def test_a_write_that_loses_every_race_gives_up_with_a_retriable_error_naming_the_node(
        interleaved: Interleaved) -> None:
    """Another writer gets in after every one of our reads (with values below ours, so we never yield to it):
    after 20 tries the write gives up with a retriable error (the writer tries again later), nothing forced."""
    ours, theirs = interleaved
    theirs.save(Checkpoint("s", str(BIG)).stamped("other"))
    written = []

    def compete() -> None:
        written.append(BIG + 1 + len(written))
        theirs.save(Checkpoint("s", str(written[-1])).stamped("other"))
        ours.competing = compete  # again after our next read

    ours.competing = compete
    with pytest.raises(CheckpointError) as caught:
        ours.save(Checkpoint("s", str(BIG + 100)).stamped("us"))
    assert str(caught.value) == f"checkpoint of s at {ours.path}/s: gave up after 20 concurrent updates"
    assert caught.value.retriable is True
    assert len(written) == 20
    stored = theirs.load("s")
    assert stored is not None and (stored.sequence_number, stored.owner) == (str(written[-1]), "other")
