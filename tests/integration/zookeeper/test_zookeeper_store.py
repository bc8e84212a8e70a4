"""The ZooKeeper checkpoint store against a real server: its layout, compare-and-set (also when another writer
comes between a read and a write), bad data, a dead or silent server; what ``list`` returns and what each error
names; lost sessions counted, not only the first; the batch id's parsing; the settings and security taken from the
configuration; fenced writes under leases; and the batch ends and query heartbeats of executor reads."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    InitialPosition,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.checkpoint.zookeeper import ZooKeeperSecurity
from kinesis_spout.spark.bookkeeping.batch_store import ZooKeeperBatchStore
from kinesis_spout.testing.plugin import ZooKeeperHandle
from kinesis_spout.testing.process import free_port, wait_until
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


SEQ = "49590338271490256608559692538361571095921575989136588898"


TIMEOUT_S = 20.0


def batch_store(store: ZooKeeperCheckpointStore) -> ZooKeeperBatchStore:
    """Spark's batch ids, batch ends and heartbeats, next to ``store``'s checkpoints on its session."""
    return ZooKeeperBatchStore.on_store(store)


def config_for(zookeeper: Any, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(stream_name="stream", app_name="app", zookeeper=zookeeper.hosts,
                                   zookeeper_prefix=zookeeper.prefix, initial_position=InitialPosition.TRIM_HORIZON)
    options.update(overrides)
    return SpoutConfig(**options)


@pytest.fixture
def open_store(zookeeper: Any) -> Iterator[Callable[..., ZooKeeperCheckpointStore]]:
    stores: list[ZooKeeperCheckpointStore] = []

    def make(**kw: Any) -> ZooKeeperCheckpointStore:
        store = ZooKeeperCheckpointStore(zookeeper.hosts, f"{zookeeper.prefix}/app/stream/checkpoints", **kw)
        store.open()
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


def test_list_returns_every_stored_checkpoint(open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    store = open_store()
    assert store.list() == {}
    a, b = Checkpoint("a", SEQ, 2).stamped("w"), Checkpoint("b", "7", shard_end=True).stamped("w")
    store.save(a)
    store.save(b)
    assert store.list() == {"a": a, "b": b}
    store.delete("a")
    store.delete("a")  # already gone: nothing to do
    assert store.list() == {"b": b}


def test_errors_while_zookeeper_is_down_say_what_was_waited_for(zookeeper: Any,
                                                                open_store: Callable[..., ZooKeeperCheckpointStore]
                                                                ) -> None:
    store = open_store(operation_timeout_s=0.2, command_retries=1)
    zookeeper.server.stop()
    assert wait_until(lambda: not store.connected, TIMEOUT_S), "the store to see the server go"
    expected = {
        store.list: f"listing {store.path}",
        lambda: store.delete("shard-7"): f"deleting {store.path}/shard-7",
        batch_store(store).load_batch_id: f"reading {batch_store(store).batch_id_node}",
    }
    for call, what in expected.items():
        started = time.monotonic()
        with pytest.raises(CheckpointError) as exc:
            call()
        elapsed = time.monotonic() - started
        assert exc.value.retriable is True
        assert str(exc.value).startswith(f"ZooKeeper at {zookeeper.hosts}: {what} failed within 0.2 s (not connected ("
                                         ), str(exc.value)
        assert str(exc.value).endswith("); is it running and reachable?")
        assert elapsed < 0.95, f"{what} took {elapsed:.2f} s to give up, with a 0.2 s limit"


def test_a_bad_batch_id_is_an_error_naming_the_node_and_quoting_at_most_40_characters(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    store = open_store()
    client = zookeeper.client()
    client.create(batch_store(store).batch_id_node, b"x" * 60, makepath=True)
    with pytest.raises(CheckpointError) as exc:
        batch_store(store).load_batch_id()
    node = batch_store(store).batch_id_node
    assert f"unreadable batch id at ZooKeeper node {node}: {'x' * 40!r} is not" in str(exc.value)
    client.set(batch_store(store).batch_id_node, b"\xff\xfe12")
    with pytest.raises(CheckpointError, match="is not a whole number"):
        batch_store(store).load_batch_id()
    client.set(batch_store(store).batch_id_node, b" 12\n")
    assert batch_store(store).load_batch_id() == 12


def test_a_lost_session_is_reported_once(zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    from kazoo.client import KazooClient

    store = open_store(session_timeout_s=4.0)
    assert store.take_session_lost() is False
    for losses in (1, 2):  # each loss is counted, and reported once
        client_id = store.session.client_id  # kazoo's (session id, password)
        assert client_id is not None, "the store is not connected"
        session_id, password = client_id
        twin = KazooClient(hosts=zookeeper.hosts, client_id=(session_id, password))
        twin.start(timeout=10)
        twin.stop()  # closes the session the store had
        twin.close()
        assert wait_until(lambda: store.session_losses == losses and store.connected, TIMEOUT_S), "a new session"
        assert store.take_session_lost() is True
        assert store.take_session_lost() is False


def test_waiting_for_the_connection_is_bounded() -> None:
    store = ZooKeeperCheckpointStore("127.0.0.1:9", "/never/opened")
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(store.wait_connected(0.05)), daemon=True)
    waiter.start()
    waiter.join(TIMEOUT_S)
    assert answers == [False]


def test_settings_taken_from_the_configuration(zookeeper: Any, tmp_path: Any) -> None:
    files = {}
    for name in ("ca", "cert", "key"):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_text("not read here")
    config = config_for(zookeeper, zookeeper_auth="user:pw", zookeeper_world_readable=False, zookeeper_tls=True,
                        zookeeper_tls_ca_file=str(files["ca"]), zookeeper_tls_cert_file=str(files["cert"]),
                        zookeeper_tls_key_file=str(files["key"]), zookeeper_deadline_s=2.0)
    assert ZooKeeperSecurity.from_config(config) == ZooKeeperSecurity(
        "user:pw", False, True, str(files["ca"]), str(files["cert"]), str(files["key"]))
    assert ZooKeeperCheckpointStore.from_config(config).connect_timeout_s == 2.0
    assert ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_deadline_s=60.0)
                                                ).connect_timeout_s == 15.0


def test_security_gives_kazoo_the_auth_acl_and_tls_files() -> None:
    from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

    assert ZooKeeperSecurity().client_kwargs() == {"default_acl": OPEN_ACL_UNSAFE}
    assert ZooKeeperSecurity("user:pa:ss", world_readable=False).client_kwargs() == {
        "auth_data": [("digest", "user:pa:ss")], "default_acl": [make_digest_acl("user", "pa:ss", all=True)]}
    assert ZooKeeperSecurity("user:pw", tls=True, ca_file="/ca", cert_file="/cert", key_file="/key"
                             ).client_kwargs() == {
        "auth_data": [("digest", "user:pw")],
        "default_acl": [make_digest_acl("user", "pw", all=True), make_acl("world", "anyone", read=True)],
        "use_ssl": True, "verify_certs": True, "ca": "/ca", "certfile": "/cert", "keyfile": "/key"}


def test_a_new_store_has_the_documented_defaults_and_no_lost_session() -> None:
    store = ZooKeeperCheckpointStore("127.0.0.1:9", "/app/stream/checkpoints//")
    assert (store.path, store.session_timeout_s, store.connect_timeout_s, store.command_retries,
            store.operation_timeout_s) == ("/app/stream/checkpoints", 10.0, 15.0, 5, 15.0)
    assert (store.state, store.session_losses, store.connected, store.take_session_lost()) == ("CLOSED", 0, False,
                                                                                               False)
    assert ZooKeeperCheckpointStore("h", "/p", connect_timeout_s=3.0).operation_timeout_s == 3.0
    assert ZooKeeperCheckpointStore("h", "/p", connect_timeout_s=3.0, operation_timeout_s=0.5
                                    ).operation_timeout_s == 0.5


def test_a_server_that_is_not_there_is_a_clear_retriable_error() -> None:
    store = ZooKeeperCheckpointStore("127.0.0.1:9", "/p", connect_timeout_s=0.5)
    with pytest.raises(CheckpointError) as exc:
        store.open()
    assert str(exc.value) == ("cannot connect to ZooKeeper at 127.0.0.1:9 within 0.5 s: is it running and "
                              "reachable? (the zookeeper setting: SpoutConfig.zookeeper, the option "
                              "\"zookeeper\" or --zookeeper)")
    assert exc.value.retriable is True
    tls = ZooKeeperCheckpointStore("127.0.0.1:9", "/p", connect_timeout_s=0.5,
                                   security=ZooKeeperSecurity(tls=True))
    with pytest.raises(CheckpointError, match=r"at 127.0.0.1:9 over TLS \(check the CA and client certificate "
                                              r"files\) within 0.5 s"):
        tls.open()


def test_a_fenced_write_needs_the_lease_at_its_epoch_and_unfence_releases_or_revokes(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    from kinesis_spout.errors import LeaseLost

    store = open_store()
    client = zookeeper.client()
    lease = f"{zookeeper.prefix}/app/stream/leases/s"
    client.create(lease, b"me", makepath=True)
    store.fence("s", lease, 0)
    store.save(Checkpoint("s", "10"))  # created in a transaction that checks the lease
    store.save(Checkpoint("s", "20"))  # set at the version read, same check
    assert store.load("s").sequence_number == "20"  # type: ignore[union-attr]
    client.set(lease, b"another worker")  # the lease moves on: epoch 1
    with pytest.raises(LeaseLost) as lost:
        store.save(Checkpoint("s", "30"))
    assert lost.value.shard_id == "s"
    assert f"({lease} moved past epoch 0: another worker took the shard)" in str(lost.value)
    assert store.load("s").sequence_number == "20"  # type: ignore[union-attr]
    store.unfence("never-fenced")  # nothing to release
    store.fence("s", lease, 1)
    store.unfence("s")  # released (the last checkpoint was written): later writes are not fenced
    client.set(lease, b"next owner")
    store.save(Checkpoint("s", "40"))
    assert store.load("s").sequence_number == "40"  # type: ignore[union-attr]
    store.fence("s", lease, 2)
    store.unfence("s", revoke=True)  # lost: every write refused until fenced again
    with pytest.raises(LeaseLost, match="not written: this worker lost the shard's lease") as revoked:
        store.save(Checkpoint("s", "50"))
    assert revoked.value.shard_id == "s"
    store.fence("s", lease, 2)
    store.save(Checkpoint("s", "50"))
    assert store.load("s").sequence_number == "50"  # type: ignore[union-attr]


@pytest.mark.parametrize("exists", [True, False], ids=["node-exists", "no-node-yet"])
def test_a_fenced_write_never_overwrites_a_higher_checkpoint_written_after_its_read(zookeeper: Any, exists: bool
                                                                                   ) -> None:
    path = f"{zookeeper.prefix}/app/stream/checkpoints"
    ours, theirs = InterleavedStore(zookeeper.hosts, path), ZooKeeperCheckpointStore(zookeeper.hosts, path)
    ours.open()
    theirs.open()
    try:
        lease = f"{zookeeper.prefix}/app/stream/leases/s"
        zookeeper.client().create(lease, b"us", makepath=True)
        ours.fence("s", lease, 0)
        if exists:
            theirs.save(Checkpoint("s", SEQ).stamped("other"))
        higher = str(int(SEQ) + 30)
        ours.competing = lambda: theirs.save(Checkpoint("s", higher).stamped("other"))
        with pytest.raises(CheckpointConflict, match=rf"is {higher} \(by other\); refusing to move it back"):
            ours.save(Checkpoint("s", str(int(SEQ) + 20)).stamped("us"))
        assert ours.competing is None, "the other writer did not get in between"
        stored = theirs.load("s")
        assert stored is not None and (stored.sequence_number, stored.owner) == (higher, "other")
    finally:
        ours.close()
        theirs.close()


def test_batch_ends_are_recorded_once_listed_per_batch_and_deleted_below_a_batch(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    store = open_store()
    client = zookeeper.client()
    node = batch_store(store).batches_node("q")
    assert node == f"{zookeeper.prefix}/app/stream/batches/q"
    assert batch_store(store).batch_end("q", 0, "a") is None and batch_store(store).batch_ends("q", 0) == {}
    assert batch_store(store).delete_batches("q", 5) == 0  # no batches node yet
    assert batch_store(store).record_batch_end("q", 0, "a", b"first") == b"first"
    assert batch_store(store).record_batch_end("q", 0, "a", b"second") == b"first", \
        "a second end must not replace the first"
    assert batch_store(store).record_batch_end("q", 0, "b", b"b0") == b"b0"
    for batch in (1, 2, 10):
        batch_store(store).record_batch_end("q", batch, "a", f"a{batch}".encode())
    batch_store(store).record_batch_end("other", 0, "a", b"other query")
    client.create(f"{node}/notes", b"")  # not a batch: never deleted
    assert batch_store(store).batch_end("q", 0, "a") == b"first" and batch_store(store).batch_end("q", 0, "c") is None
    ends = batch_store(store).batch_ends("q", 0)
    assert ends == {"a": b"first", "b": b"b0"} and all(type(v) is bytes for v in ends.values())
    assert batch_store(store).batch_ends("q", 3) == {}
    assert batch_store(store).delete_batches("q", 2) == 2, "batches 0 and 1, not 2"
    assert sorted(client.get_children(node)) == ["10", "2", "notes"]
    assert batch_store(store).batch_ends("q", 0) == {} and batch_store(store).batch_ends("q", 2) == {"a": b"a2"}
    assert batch_store(store).delete_batches("q", 2) == 0
    assert batch_store(store).batch_ends("other", 0) == {"a": b"other query"}


def test_a_query_heartbeat_is_zookeeper_s_modification_time_in_seconds_and_the_node_version(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    store = open_store()
    client = zookeeper.client()
    assert batch_store(store).query_heartbeats() == {}  # no batches node at all
    before = time.time()
    first = batch_store(store).touch_query("q", b"one")  # creates the node
    assert before - 5.0 <= first <= time.time() + 5.0, (before, first)  # seconds, not milliseconds
    data, stat = client.get(batch_store(store).batches_node("q"))
    assert data == b"one" and first == stat.mtime / 1000.0
    assert batch_store(store).query_heartbeats() == {"q": (first, 0)}
    time.sleep(0.01)
    second = batch_store(store).touch_query("q", b"two")  # sets it
    data, stat = client.get(batch_store(store).batches_node("q"))
    assert data == b"two" and second == stat.mtime / 1000.0 and second >= first
    batch_store(store).touch_query("r", b"")
    beats = batch_store(store).query_heartbeats()
    assert sorted(beats) == ["q", "r"] and beats["q"] == (second, 1)


def test_a_query_s_batch_ends_are_deleted_only_at_the_version_they_were_judged_at(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    store = open_store()
    client = zookeeper.client()
    batch_store(store).touch_query("q", b"beat")
    for batch in range(3):
        for shard in ("a", "b"):
            batch_store(store).record_batch_end("q", batch, shard, b"end")
    judged = batch_store(store).query_heartbeats()["q"][1]
    batch_store(store).touch_query("q", b"beat again")  # the query is alive after all
    assert batch_store(store).delete_query("q", judged, per_transaction=2) is False
    assert batch_store(store).batch_ends("q", 2) == {"a": b"end", "b": b"end"}, "a live query lost its batch ends"
    current = batch_store(store).query_heartbeats()["q"][1]
    assert batch_store(store).delete_query("q", current, per_transaction=2) is True
    assert client.exists(batch_store(store).batches_node("q")) is None and batch_store(store).query_heartbeats() == {}
    assert batch_store(store).delete_query("q", current) is True  # gone already
    # no batch ends: the deletion is one transaction on the query's node
    batch_store(store).touch_query("idle", b"beat")
    batch_store(store).touch_query("idle", b"beat again")
    assert batch_store(store).delete_query("idle", 0) is False, "a query that beat since it was judged was deleted"
    assert client.exists(batch_store(store).batches_node("idle")) is not None
    assert batch_store(store).delete_query("idle", 1) is True
    assert client.exists(batch_store(store).batches_node("idle")) is None


def test_a_suspended_connection_is_no_lost_session_listeners_hear_each_state_and_close_is_silent(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    store = open_store(session_timeout_s=10.0)
    heard: list[str] = []
    store.add_listener(heard.append)
    assert store.state == "CONNECTED" and store.connected
    zookeeper.server.stop()
    assert wait_until(lambda: bool(heard) and not store.connected, TIMEOUT_S), store.state
    assert store.state == "SUSPENDED" and heard == ["SUSPENDED"]
    assert store.session_losses == 0 and store.take_session_lost() is False, "a suspension is not a lost session"
    zookeeper.server.start()
    assert wait_until(lambda: store.connected, TIMEOUT_S), store.state
    # the same session, or (if the restart took longer than the session timeout) a lost one and a new one
    assert store.state == "CONNECTED" and heard in (["SUSPENDED", "CONNECTED"], ["SUSPENDED", "LOST", "CONNECTED"])
    losses = store.session_losses
    assert losses == heard.count("LOST")
    store.close()
    assert store.state == "CLOSED" and not store.connected
    time.sleep(0.2)  # anything kazoo reports about our own close comes now
    assert heard[-1] == "CONNECTED" and store.session_losses == losses, heard


def test_a_server_that_stops_answering_is_a_retriable_error_within_the_operation_timeout(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    import os
    import signal

    store = open_store(operation_timeout_s=1.0, session_timeout_s=10.0)
    store.save(Checkpoint("a", "7"))
    pid = zookeeper.server.pid
    assert pid is not None
    outcome: list[BaseException | Checkpoint | None] = []

    def load() -> None:
        try:
            outcome.append(store.load("a"))
        except BaseException as exc:  # noqa: BLE001 - the test looks at what was raised
            outcome.append(exc)

    os.kill(pid, signal.SIGSTOP)  # the connection stays up, nothing is answered
    try:
        started = time.monotonic()
        caller = threading.Thread(target=load, daemon=True)
        caller.start()
        caller.join(5.0)
        elapsed = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not caller.is_alive(), "load() waited for an answer past its operation timeout"
    (error,) = outcome
    assert isinstance(error, CheckpointError) and error.retriable is True, repr(error)
    assert str(error).startswith(f"ZooKeeper at {zookeeper.hosts}: reading {store.path}/a failed within 1 s "
                                 f"(KazooTimeoutError"), str(error)
    assert elapsed < 1.9, f"gave up after {elapsed:.2f} s, with a 1 s limit"
    assert store.load("a").sequence_number == "7"  # type: ignore[union-attr]


def test_the_errors_of_executor_read_bookkeeping_say_what_was_attempted(
        zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    assert ZooKeeperCheckpointStore(zookeeper.hosts, "/apps/X/").path == "/apps/X"  # only trailing slashes go
    store = open_store(operation_timeout_s=0.2, command_retries=1)
    batches = batch_store(store).batches_node("q")
    zookeeper.server.stop()
    assert wait_until(lambda: not store.connected, TIMEOUT_S), "the store to see the server go"
    expected = {
        lambda: batch_store(store).batch_end("q", 3, "a"): f"reading {batches}/3/a",
        lambda: batch_store(store).record_batch_end("q", 3, "a", b"end"): f"creating {batches}/3/a",
        lambda: batch_store(store).delete_batches("q", 5): f"listing {batches}",
        lambda: batch_store(store).delete_query("q", 0): f"listing {batches}",
        lambda: batch_store(store).touch_query("q", b"beat"): f"writing {batches}",
        batch_store(store).query_heartbeats: f"listing {store.path.rsplit('/', 1)[0]}/batches",
    }
    for call, what in expected.items():
        with pytest.raises(CheckpointError) as exc:
            call()
        assert exc.value.retriable is True
        assert str(exc.value).startswith(f"ZooKeeper at {zookeeper.hosts}: {what} failed within 0.2 s"), \
            str(exc.value)
