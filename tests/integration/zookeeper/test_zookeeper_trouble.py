"""ZooKeeper trouble and security with a real server: suspended connections, lost sessions, a deadline, digest
auth with ACLs, TLS, and the session timeout."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    InitialPosition,
    KinesisSpout,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.spark.batch_store import ZooKeeperBatchStore
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain
from kinesis_spout.testing.zookeeper import ZooKeeperServer

SECRET = "s3cr3t-Pa55"


def config_for(zookeeper: Any, endpoint: KinesisEndpoint | None = None, stream: str = "stream",
               **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(stream_name=stream, app_name="app", zookeeper=zookeeper.hosts,
                                   zookeeper_prefix=zookeeper.prefix, initial_position=InitialPosition.TRIM_HORIZON,
                                   empty_record_backoff_s=0.2, checkpoint_interval_s=0.0)
    if endpoint is not None:
        options.update(endpoint_url=endpoint.endpoint_url, region=endpoint.region)
    options.update(overrides)
    return SpoutConfig(**options)


def stored(zookeeper: Any, config: SpoutConfig) -> dict[str, int]:
    client = zookeeper.client()
    if not client.exists(config.checkpoint_path):
        return {}
    return {shard: int(json.loads(client.get(f"{config.checkpoint_path}/{shard}")[0])["sequence_number"])
            for shard in client.get_children(config.checkpoint_path)}


def read_some(spout: KinesisSpout, want: int, ack: bool = True) -> list[Any]:
    got = drain(spout, want, ack=ack)
    assert len(got) == want, f"read {len(got)} of {want}"
    return got


def test_writes_wait_while_suspended_and_the_latest_lands_after_reconnect(moto_kinesis, zookeeper) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    moto_kinesis.put(stream, [f"r{i}".encode() for i in range(20)])
    config = config_for(zookeeper, moto_kinesis, stream)
    store = ZooKeeperCheckpointStore.from_config(config)
    with KinesisSpout(config, store) as spout:
        first = read_some(spout, 10)
        assert wait_until(lambda: stored(zookeeper, config) == {first[0].record.shard_id: 10}, 10), "first checkpoint"
        zookeeper.server.stop()
        assert wait_until(lambda: store.state == "SUSPENDED", 20), "the store to see the connection suspended"
        read_some(spout, 10)  # acks keep working; their checkpoint waits for ZooKeeper
        failures_before = spout._writer.failures
        assert wait_until(lambda: spout._writer.failures > failures_before, 10), "the writer to wait on the connection"
        assert spout._writer.unreachable is None  # within the deadline: no error
        zookeeper.server.start()
        assert wait_until(lambda: stored(zookeeper, config) == {first[0].record.shard_id: 20}, 30), \
            "the latest checkpoint to be written after the reconnect"
        assert store.state == "CONNECTED" and store.session_losses == 0


def expire_session(hosts: str, store: ZooKeeperCheckpointStore) -> None:
    """Expire the store's session the way ZooKeeper's own tests do: open and close a second client with the
    same session id and password."""
    from kazoo.client import KazooClient

    client_id = store.session.client_id  # kazoo's (session id, password)
    assert client_id is not None, "the store is not connected"
    session_id, password = client_id
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def test_lost_session_reconnects_rereads_and_reports_a_takeover(moto_kinesis, zookeeper) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    moto_kinesis.put(stream, [f"r{i}".encode() for i in range(30)])
    config = config_for(zookeeper, moto_kinesis, stream, zookeeper_session_timeout_s=2.0)
    store = ZooKeeperCheckpointStore.from_config(config)
    conflicts: list[CheckpointConflict] = []
    with KinesisSpout(config, store, on_checkpoint_conflict=conflicts.append) as spout:
        shard = read_some(spout, 10)[0].record.shard_id
        assert wait_until(lambda: stored(zookeeper, config) == {shard: 10}, 10), "first checkpoint"
        other = ZooKeeperCheckpointStore.from_config(config)  # another worker takes the shard further
        other.open()
        try:
            other.save(Checkpoint(shard, "25").stamped("another-worker"))
        finally:
            other.close()
        expire_session(zookeeper.hosts, store)
        assert wait_until(lambda: store.session_losses == 1 and store.connected, 30), \
            "the store to lose its session and open a new one"
        read_some(spout, 5)  # advances our checkpoint to 15: behind the other worker's 25
        assert wait_until(lambda: len(conflicts) >= 1, 20), "the conflict to be reported"
    assert "another-worker" in str(conflicts[0]) and shard in str(conflicts[0])
    assert spout.checkpoint_conflicts >= 1
    assert stored(zookeeper, config) == {shard: 25}  # never moved back


def test_zookeeper_down_past_the_deadline_is_a_clear_error_that_clears_when_it_returns(moto_kinesis,
                                                                                     zookeeper) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    moto_kinesis.put(stream, [f"r{i}".encode() for i in range(20)])
    config = config_for(zookeeper, moto_kinesis, stream, zookeeper_deadline_s=2.0)
    with KinesisSpout(config) as spout:
        shard = read_some(spout, 5)[0].record.shard_id
        assert wait_until(lambda: stored(zookeeper, config) == {shard: 5}, 10), "first checkpoint"
        zookeeper.server.stop()
        read_some(spout, 5)

        polled: list[Any] = []  # tuples next_tuple gave before the deadline passed (left unacked)

        def raises() -> bool:
            try:
                tup = spout.next_tuple()
                if tup is not None:
                    polled.append(tup)
            except CheckpointError as exc:
                raises.error = exc  # type: ignore[attr-defined]
                return True
            return False

        assert wait_until(raises, 30), "next_tuple to raise once the deadline passed"
        message = str(raises.error)  # type: ignore[attr-defined]
        assert "deadline 2 s" in message and "Nothing is lost" in message and "zookeeper_deadline_s" in message
        spout.ack(f"{shard}:999")  # acks (even unknown ones) still work while it is down
        zookeeper.server.start()
        assert wait_until(lambda: stored(zookeeper, config) == {shard: 10}, 30), "the pending checkpoint to be written"
        assert wait_until(lambda: spout._writer.unreachable is None, 10), "the error to clear"
        for tup in polled:
            spout.ack(tup.message_id)
        assert len(read_some(spout, 10 - len(polled))) == 10 - len(polled)
        assert wait_until(lambda: stored(zookeeper, config) == {shard: 20}, 10), "the rest acked and stored"


def test_session_timeout_option_is_what_zookeeper_grants(zookeeper) -> None:
    for seconds in (2.0, 7.0):
        store = ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_session_timeout_s=seconds))
        store.open()
        try:
            assert store.negotiated_session_timeout_s == seconds
        finally:
            store.close()


def test_digest_auth_lets_only_the_owner_change_checkpoints(zookeeper, caplog) -> None:
    from kazoo.exceptions import NoAuthError

    caplog.set_level(logging.DEBUG)
    owner_config = config_for(zookeeper, zookeeper_auth=f"spout:{SECRET}")
    owner = ZooKeeperCheckpointStore.from_config(owner_config)
    intruder = ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_auth="mallory:guess"))
    anonymous = ZooKeeperCheckpointStore.from_config(config_for(zookeeper))
    for store in (owner, intruder, anonymous):
        store.open()
    try:
        owner.save(Checkpoint("shard-a", "100").stamped("spout"))
        ZooKeeperBatchStore.on_store(owner).save_batch_id(3)
        assert anonymous.load("shard-a").sequence_number == "100"  # world-readable: tools can list
        for store in (intruder, anonymous):
            with pytest.raises(CheckpointError, match="not allowed by the node's ACL") as caught:
                store.save(Checkpoint("shard-a", "200"))
            assert not caught.value.retriable
        with pytest.raises(NoAuthError):
            zookeeper.client().set(f"{owner_config.checkpoint_path}/shard-a", b"{}")
        owner.save(Checkpoint("shard-a", "150"))
        assert owner.load("shard-a").sequence_number == "150"
        acl, _ = zookeeper.client().get_acls(f"{owner_config.checkpoint_path}/shard-a")
        schemes = sorted((a.id.scheme, a.perms) for a in acl)
        assert schemes == [("digest", 31), ("world", 1)]  # the owner may do all, the world may read
    finally:
        for store in (owner, intruder, anonymous):
            store.close()
    assert SECRET not in repr(owner_config) and SECRET not in repr(owner.security)
    assert SECRET not in caplog.text and "guess" not in caplog.text


def test_a_write_the_acl_refuses_is_reported_at_once_and_stays_pending(zookeeper) -> None:
    """An identity the ACL refuses will not be let in by waiting: the writer reports it at once (the spout raises
    it from its next call), not after zookeeper_deadline_s, and keeps the checkpoint pending."""
    from kinesis_spout.checkpoint.writer import CheckpointWriter

    owner = ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_auth=f"spout:{SECRET}"))
    intruder = ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_auth="mallory:guess"))
    owner.open(), intruder.open()
    writer = CheckpointWriter(intruder, 0.0, "mallory", deadline_s=3600.0)
    try:
        owner.save(Checkpoint("shard-a", "100"))
        writer.start()
        writer.offer(Checkpoint("shard-a", "200"))
        assert wait_until(lambda: writer.unreachable is not None, 10), "the refusal was never reported"
        error = writer.unreachable
        assert error is not None and error.retriable is False
        assert str(error).startswith("checkpoint write of shard-a refused, and trying again cannot help: ZooKeeper "
                                     f"at {zookeeper.hosts} refused "), str(error)
        assert "identity 'mallory' is not allowed by the node's ACL; set zookeeper_auth" in str(error)
        assert "Nothing is lost: the newest checkpoints stay pending" in str(error)
        assert not writer.flush(0.3), "the refused checkpoint must stay pending"
        assert owner.load("shard-a").sequence_number == "100"
    finally:
        writer.close(timeout_s=2.0)
        owner.close(), intruder.close()


def test_private_checkpoints_are_not_even_readable_by_others(zookeeper) -> None:
    owner = ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_auth=f"spout:{SECRET}",
                                                            zookeeper_world_readable=False))
    anonymous = ZooKeeperCheckpointStore.from_config(config_for(zookeeper))
    owner.open(), anonymous.open()
    try:
        owner.save(Checkpoint("shard-a", "100"))
        with pytest.raises(CheckpointError, match="unauthenticated client is not allowed"):
            anonymous.load("shard-a")
    finally:
        owner.close(), anonymous.close()


def test_tls_with_client_certificates(tmp_path) -> None:
    with ZooKeeperServer(tls=True) as server:
        files = server.tls_files
        assert files is not None
        config = SpoutConfig(stream_name="s", app_name="a", zookeeper=server.tls_hosts, zookeeper_tls=True,
                             zookeeper_tls_ca_file=str(files.ca_cert), zookeeper_tls_cert_file=str(files.client_cert),
                             zookeeper_tls_key_file=str(files.client_key), zookeeper_deadline_s=3.0)
        store = ZooKeeperCheckpointStore.from_config(config)
        store.open()
        try:
            store.save(Checkpoint("shard-a", "42"))
            assert store.load("shard-a").sequence_number == "42"
        finally:
            store.close()
        no_cert = ZooKeeperCheckpointStore.from_config(SpoutConfig(
            stream_name="s", app_name="a", zookeeper=server.tls_hosts, zookeeper_tls=True,
            zookeeper_tls_ca_file=str(files.ca_cert), zookeeper_deadline_s=2.0))
        with pytest.raises(CheckpointError, match="over TLS"):
            no_cert.open()


def test_kazoo_s_log_lines_keep_their_text_with_the_secret_masked_even_one_with_a_colon(zookeeper, caplog) -> None:
    """kazoo logs through ``kinesis_spout.kazoo``; an opened store masks its password there (a password may hold
    a colon: everything after the user's name is the secret) and lets every line through."""
    store = ZooKeeperCheckpointStore.from_config(config_for(zookeeper, zookeeper_auth="spout:pa:ss-Wd"))
    store.open()
    try:
        caplog.set_level(logging.DEBUG, logger="kinesis_spout.kazoo")
        kazoo_log = logging.getLogger("kinesis_spout.kazoo")
        kazoo_log.warning("sending auth %s then %s", "spout:pa:ss-Wd", "pa:ss-Wd")
        kazoo_log.warning("a line without secrets")
    finally:
        store.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "kinesis_spout.kazoo"]
    assert "sending auth *** then ***" in lines, lines
    assert "a line without secrets" in lines, lines
    assert "pa:ss" not in caplog.text and "ss-Wd" not in caplog.text
