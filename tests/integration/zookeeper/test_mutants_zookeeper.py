"""The ZooKeeper checkpoint store, exactly: what ``list`` returns, what its errors name, the lost-session flag, the
batch id's parsing, the settings taken from the configuration, fenced writes (leases), and the batch ends and
heartbeats of executor reads. Written against mutants of
kinesis_spout/checkpoint/zookeeper.py the rest of the suite let survive (see benchmarks/results/mutation.md).
A real server through the fixture."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    InitialPosition,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.checkpoint.zookeeper import ZooKeeperSecurity
from kinesis_spout.spark.batch_store import ZooKeeperBatchStore
from kinesis_spout.testing.process import wait_until

from .test_zookeeper_store import InterleavedStore

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


# -- fenced writes (leases): the lease's version guards each write; unfence releases or revokes ------------------


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


# -- batch ends of executor reads: recorded once, listed, cleaned up; query heartbeats ------------------------------


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
    pid = zookeeper.server._process.pid
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
