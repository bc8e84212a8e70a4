"""ZooKeeper trouble and security with a real server: suspended connections, lost sessions, a deadline, digest
auth with ACLs, TLS, and the session timeout. Then the checkpoint store's fallbacks, through a fault-injecting proxy
in front of the server: a connection cut in the middle of a pipeline of reads, a node deleted between a listing and
its reads (or while the store is away), an error code the server could answer with; each fallback loses nothing
and skips only what is really gone."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterator

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
from kinesis_spout.spark.bookkeeping.batch_store import ZooKeeperBatchStore
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import in_background, wait_until
from kinesis_spout.testing.spout import drain
from kinesis_spout.testing.zkproxy import (
    ZK_NO_NODE,
    ZK_NODE_EXISTS,
    ZK_OPERATION_TIMEOUT,
    ZK_RUNTIME_INCONSISTENCY,
    Op,
    ZooKeeperFaultProxy,
)
from kinesis_spout.testing.zookeeper import ZooKeeperServer

SECRET = "s3cr3t-Pa55"


def config_for(zookeeper: Any, endpoint: KinesisEndpoint | None = None, stream: str = "stream",
               **overrides: Any) -> SpoutConfig:
    # a static spout, which reads on while ZooKeeper is away and its checkpoints wait (a lease worker, the default
    # with ZooKeeper, pauses instead: coordination/test_leases.py)
    options: dict[str, Any] = dict(stream_name=stream, app_name="app", zookeeper=zookeeper.hosts,
                                   zookeeper_prefix=zookeeper.prefix, initial_position=InitialPosition.TRIM_HORIZON,
                                   empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, coordination="static")
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
        failures_before = spout.checkpoint_write_failures
        assert wait_until(lambda: spout.checkpoint_write_failures > failures_before, 10), \
            "the writer to wait on the connection"
        assert spout.next_tuple() is None  # within the deadline: no error (and all 20 records were read)
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
        assert wait_until(lambda: not raises(), 10), "the error to clear"
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


SHARDS = ["shard-a", "shard-b", "shard-c", "shard-d"]


def batch_store(store: ZooKeeperCheckpointStore) -> ZooKeeperBatchStore:
    """Spark's batch ids, batch ends and heartbeats, next to ``store``'s checkpoints on its session."""
    return ZooKeeperBatchStore.on_store(store)


@pytest.fixture
def proxy(zookeeper: Any) -> Iterator[ZooKeeperFaultProxy]:
    with ZooKeeperFaultProxy(zookeeper.hosts) as running:
        yield running


@pytest.fixture
def store(zookeeper: Any, proxy: ZooKeeperFaultProxy) -> Iterator[ZooKeeperCheckpointStore]:
    opened = ZooKeeperCheckpointStore(proxy.hosts, f"{zookeeper.prefix}/app/stream/checkpoints",
                                      operation_timeout_s=15.0)
    opened.open()
    yield opened
    proxy.release()
    opened.close()


def record_ends(store: ZooKeeperCheckpointStore, batch: int = 0) -> dict[str, bytes]:
    ends = {shard: f"end of {shard}".encode() for shard in SHARDS}
    for shard, payload in ends.items():
        batch_store(store).record_batch_end("q", batch, shard, payload)
    return ends


def live_query(zookeeper: Any, store: ZooKeeperCheckpointStore) -> tuple[int, str, Any, list[str]]:
    """Query "q" with a heartbeat and four batches of ends: its node's version, its root, a client of the test's
    own, and the batches in the order the store's listing gives them (so the order of its batch listings)."""
    batch_store(store).touch_query("q", b"beat")
    for batch in range(4):
        record_ends(store, batch)
    root = batch_store(store).batches_node("q")
    client = zookeeper.client()
    return batch_store(store).query_heartbeats()["q"][1], root, client, client.get_children(root)


def test_batch_ends_cut_mid_pipeline_reads_the_lost_ones_again_and_skips_one_deleted_while_away(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    ends = record_ends(store)
    node = f"{batch_store(store).batches_node('q')}/0"
    client = zookeeper.client()
    order = client.get_children(node)  # the order of the store's listing, so of its reads
    proxy.cut(Op.GET_DATA, nth=2, hold=True)  # the first read answered, the others lost with the connection
    result = in_background(lambda: batch_store(store).batch_ends("q", 0))
    proxy.wait_acted()
    gone = order[1]  # its read lost in the pipeline, then deleted before the store is back
    client.delete(f"{node}/{gone}")
    proxy.release()
    assert result() == {s: v for s, v in ends.items() if s != gone}


def test_batch_ends_skip_a_shard_deleted_between_the_listing_and_the_reads(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    ends = record_ends(store)
    node = f"{batch_store(store).batches_node('q')}/0"
    client = zookeeper.client()
    order = client.get_children(node)  # the order the store's listing gives too
    proxy.hold(Op.GET_CHILDREN)
    result = in_background(lambda: batch_store(store).batch_ends("q", 0))
    proxy.wait_acted()
    client.delete(f"{node}/{order[0]}")  # the first the store will read
    proxy.release()
    assert result() == {s: v for s, v in ends.items() if s != order[0]}


def test_query_heartbeats_cut_mid_pipeline_are_read_again(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    for query in ("q1", "q2", "q3"):
        batch_store(store).touch_query(query, b"beat")
    batch_store(store).touch_query("q2", b"beat again")
    before = batch_store(store).query_heartbeats()
    assert sorted(before) == ["q1", "q2", "q3"] and before["q2"][1] == 1
    proxy.cut(Op.EXISTS, hold=True)  # every read of the pipeline lost
    result = in_background(batch_store(store).query_heartbeats)
    proxy.wait_acted()
    proxy.release()
    assert result() == before


def test_delete_query_lists_again_what_a_cut_lost_and_skips_a_batch_deleted_while_away(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    version, root, client, order = live_query(zookeeper, store)
    proxy.cut(Op.GET_CHILDREN, nth=2, hold=True)  # the root's listing answered, the batches' listings lost
    result = in_background(lambda: batch_store(store).delete_query("q", version, per_transaction=3))
    proxy.wait_acted()
    client.delete(f"{root}/{order[0]}", recursive=True)  # its listing was lost; gone before the store is back
    proxy.release()
    assert result() is True
    assert client.exists(root) is None


def test_delete_query_skips_a_batch_deleted_between_the_listings(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    version, root, client, order = live_query(zookeeper, store)
    proxy.hold(Op.GET_CHILDREN)  # the root's listing
    result = in_background(lambda: batch_store(store).delete_query("q", version))
    proxy.wait_acted()
    client.delete(f"{root}/{order[0]}", recursive=True)  # the first batch the store will list
    proxy.release()
    assert result() is True
    assert client.exists(root) is None


def test_delete_query_counts_its_root_deleted_meanwhile_as_done(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    batch_store(store).touch_query("q", b"beat")
    record_ends(store, 0)
    version = batch_store(store).query_heartbeats()["q"][1]
    root = batch_store(store).batches_node("q")
    proxy.hold(Op.MULTI)  # the transaction that deletes the batch ends, before the one that deletes the root
    result = in_background(lambda: batch_store(store).delete_query("q", version))
    proxy.wait_acted()
    client = zookeeper.client()
    client.delete(root)  # another clean-up got there first
    proxy.release()
    assert result() is True
    assert client.exists(root) is None


def test_delete_batches_goes_on_past_a_batch_deleted_meanwhile(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    for batch in (1, 2):
        record_ends(store, batch)
    base = batch_store(store).batches_node("q")
    proxy.hold(Op.GET_CHILDREN, nth=2)  # the listing of batch 1 (the first, in number order)
    result = in_background(lambda: batch_store(store).delete_batches("q", 3))
    proxy.wait_acted()
    client = zookeeper.client()
    client.delete(f"{base}/1", recursive=True)
    proxy.release()
    assert result() == 1, "batch 2 is deleted by this call, batch 1 was by someone else"
    assert client.get_children(base) == []


def test_a_batch_end_deleted_between_its_create_and_its_read_is_a_clear_error(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    batch_store(store).record_batch_end("q", 7, "shard-a", b"first")  # another task's end: the store's create finds it
    proxy.hold(Op.CREATE)
    result = in_background(lambda: batch_store(store).record_batch_end("q", 7, "shard-a", b"second"))
    proxy.wait_acted()
    node = f"{batch_store(store).batches_node('q')}/7/shard-a"
    zookeeper.client().delete(node)  # a clean-up far ahead, before the store reads the end that stands
    proxy.release()
    with pytest.raises(CheckpointError) as caught:
        result()
    assert not caught.value.retriable
    assert str(caught.value) == (f"batch end {node} vanished right after it was written; was the batch cleaned up "
                                 f"by a query that is further on?")


def test_a_heartbeat_whose_node_another_query_created_meanwhile_is_written_over_it(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    node = batch_store(store).batches_node("q")
    proxy.hold(Op.SET_DATA)  # its answer: no such node
    result = in_background(lambda: batch_store(store).touch_query("q", b"mine"))
    proxy.wait_acted()
    client = zookeeper.client()
    client.create(node, b"theirs", makepath=True)  # so the store's create finds it there
    proxy.release()
    beat = result()
    data, stat = client.get(node)
    assert data == b"mine" and beat == stat.mtime / 1000.0


def test_a_heartbeat_that_keeps_racing_gives_up_with_a_retriable_error_naming_the_node(
        proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    node = batch_store(store).batches_node("q")
    proxy.answer_error(Op.SET_DATA, ZK_NO_NODE, times=20)
    proxy.answer_error(Op.CREATE, ZK_NODE_EXISTS, times=20)
    with pytest.raises(CheckpointError) as caught:
        batch_store(store).touch_query("q", b"beat")
    assert caught.value.retriable
    assert str(caught.value) == f"heartbeat of {node}: gave up after 20 attempts"


def test_an_error_the_server_answers_with_is_a_retriable_error_that_names_it(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    saved = Checkpoint("a", "17").stamped("w")
    store.save(saved)
    node = f"{store.path}/a"
    proxy.answer_error(Op.GET_DATA, ZK_RUNTIME_INCONSISTENCY)
    with pytest.raises(CheckpointError) as caught:
        store.load("a")
    assert caught.value.retriable
    assert str(caught.value).startswith(f"ZooKeeper at {proxy.hosts}: reading {node} failed: "
                                        f"RuntimeInconsistency")
    assert store.load("a") == saved


def test_a_time_out_the_server_answers_with_is_tried_again_as_many_times_as_configured(
        zookeeper: Any, proxy: ZooKeeperFaultProxy) -> None:
    store = ZooKeeperCheckpointStore(proxy.hosts, f"{zookeeper.prefix}/app/stream/checkpoints", command_retries=1)
    store.open()
    try:
        saved = Checkpoint("a", "17").stamped("w")
        store.save(saved)
        proxy.answer_error(Op.GET_DATA, ZK_OPERATION_TIMEOUT, times=1)
        assert store.load("a") == saved, "one time-out, one retry: read"
        proxy.answer_error(Op.GET_DATA, ZK_OPERATION_TIMEOUT, times=2)
        with pytest.raises(CheckpointError, match="OperationTimeoutError") as caught:
            store.load("a")  # two time-outs: no third try
        assert caught.value.retriable
    finally:
        store.close()


def test_an_error_at_each_later_step_of_a_call_says_which_step_failed(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    batches = batch_store(store).batches_node("q")
    client = zookeeper.client()
    batch_store(store).record_batch_end("q", 0, "shard-a", b"end")
    lease = f"{zookeeper.prefix}/leases/a"
    client.create(lease, b"worker", makepath=True)  # at version 0
    store.fence("a", lease, 0)
    steps: list[tuple[Op, int, Callable[[], Any], str]] = [
        (Op.GET_CHILDREN, 1, lambda: batch_store(store).batch_ends("q", 0), f"listing {batches}/0"),
        (Op.GET_DATA, 1, lambda: batch_store(store).record_batch_end("q", 0, "shard-a", b"again"),  # after the create
         f"reading {batches}/0/shard-a"),
        (Op.CREATE, 1, lambda: batch_store(store).touch_query("s", b"beat"),  # after the set found no node
         f"creating {batch_store(store).batches_node('s')}"),
        (Op.EXISTS, 1, lambda: batch_store(store).touch_query("r", b"beat"),
         f"reading {batch_store(store).batches_node('r')}"),
        (Op.MULTI, 2, lambda: batch_store(store).delete_query("q", 0), f"deleting 1 nodes of {batches}"),  # the root's
        (Op.MULTI, 1, lambda: store.save(Checkpoint("a", "5")),
         f"writing {store.path}/a fenced by {lease} at epoch 0"),
    ]
    for op, nth, call, what in steps:
        proxy.answer_error(op, ZK_RUNTIME_INCONSISTENCY, nth=nth)
        with pytest.raises(CheckpointError) as caught:
            call()
            pytest.fail(f"no error {what}")
        assert str(caught.value).startswith(f"ZooKeeper at {proxy.hosts}: {what} failed: RuntimeInconsistency"), \
            str(caught.value)
    client.set(f"{store.path}/a", b"\xff not a checkpoint")
    for call in (lambda: store.load("a"), lambda: store.save(Checkpoint("a", "6"))):
        with pytest.raises(CheckpointError, match=f"^checkpoint at ZooKeeper {proxy.hosts} {store.path}/a is not "
                                                  f"valid UTF-8 JSON"):
            call()


def test_the_batch_id_s_and_a_conflict_s_errors_name_what_they_are_about(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, store: ZooKeeperCheckpointStore) -> None:
    node = batch_store(store).batch_id_node
    batch_store(store).save_batch_id(3)
    client = zookeeper.client()
    proxy.hold(Op.GET_DATA)
    result = in_background(lambda: batch_store(store).save_batch_id(4))
    for attempt in range(1, 21):  # another pipeline writes between each of our reads and our write
        proxy.wait_acted(attempt)
        client.set(node, b"3")  # a lower id: ours is not refused, only its write loses the race
        if attempt < 20:
            proxy.hold(Op.GET_DATA)
        proxy.release()
    with pytest.raises(CheckpointError) as caught:
        result()
    assert caught.value.retriable and str(caught.value) == f"batch id at {node}: gave up after 20 concurrent updates"
    client.set(node, b"three")
    with pytest.raises(CheckpointError, match=f"^unreadable batch id at ZooKeeper node {node}: 'three'"):
        batch_store(store).save_batch_id(5)
    client.create(f"{store.path}/a", Checkpoint("a", "50").to_json(), makepath=True)  # written by no one we know
    with pytest.raises(CheckpointConflict) as conflict:
        store.save(Checkpoint("a", "40"))
    assert str(conflict.value) == (f"checkpoint of a at {store.path}/a is 50 (by unknown); refusing to move it back "
                                   f"to 40")
