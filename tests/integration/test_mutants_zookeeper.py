"""The ZooKeeper checkpoint store, exactly: what ``list`` returns, what its errors name, the lost-session flag, the
batch id's parsing and the settings taken from the configuration. Written against mutants of
kinesis_spout/checkpoint/zookeeper.py the rest of the suite let survive (see benchmarks/results/mutation.md).
A real server through the fixture."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import Checkpoint, CheckpointError, InitialPosition, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.checkpoint.zookeeper import ZooKeeperSecurity
from kinesis_spout.testing.process import wait_until

SEQ = "49590338271490256608559692538361571095921575989136588898"
TIMEOUT_S = 20.0


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
        store.load_batch_id: f"reading {store.batch_id_node}",
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
    client.create(store.batch_id_node, b"x" * 60, makepath=True)
    with pytest.raises(CheckpointError) as exc:
        store.load_batch_id()
    assert f"unreadable batch id at ZooKeeper node {store.batch_id_node}: {'x' * 40!r} is not" in str(exc.value)
    client.set(store.batch_id_node, b"\xff\xfe12")
    with pytest.raises(CheckpointError, match="is not a whole number"):
        store.load_batch_id()
    client.set(store.batch_id_node, b" 12\n")
    assert store.load_batch_id() == 12


def test_a_lost_session_is_reported_once(zookeeper: Any, open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    from kazoo.client import KazooClient

    store = open_store(session_timeout_s=4.0)
    assert store.take_session_lost() is False
    session_id, password = store._client.client_id
    twin = KazooClient(hosts=zookeeper.hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()
    assert wait_until(lambda: store.session_losses == 1 and store.connected, TIMEOUT_S), "a new session"
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


def test_the_client_retries_connecting_forever_and_commands_a_bounded_number_of_times(
        open_store: Callable[..., ZooKeeperCheckpointStore]) -> None:
    from kazoo.exceptions import SessionExpiredError

    store = open_store(command_retries=3)
    connecting, commands = store._client._conn_retry, store._client._retry
    assert (connecting.max_tries, connecting.delay, connecting.max_delay) == (-1, 0.2, 2.0)
    assert (commands.max_tries, commands.delay, commands.max_delay) == (3, 0.1, 2.0)
    assert SessionExpiredError not in commands.retry_exceptions  # a new session is not the old one


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
