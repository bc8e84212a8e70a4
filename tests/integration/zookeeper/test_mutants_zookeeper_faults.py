"""The ZooKeeper checkpoint store's fallbacks, through a fault-injecting proxy in front of a real server: a
connection cut in the middle of a pipeline of reads, a node deleted between a listing and its reads (or while the
store is away), an error code the server could answer with. Written against mutants of
kinesis_spout/checkpoint/zookeeper.py that the tests without faults let survive (see
benchmarks/results/mutation.md): each fallback must lose nothing and skip only what is really gone."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import Checkpoint, CheckpointConflict, CheckpointError, ZooKeeperCheckpointStore
from kinesis_spout.spark.batch_store import ZooKeeperBatchStore
from kinesis_spout.testing.process import in_background
from kinesis_spout.testing.zkproxy import (
    ZK_NO_NODE,
    ZK_NODE_EXISTS,
    ZK_OPERATION_TIMEOUT,
    ZK_RUNTIME_INCONSISTENCY,
    Op,
    ZooKeeperFaultProxy,
)

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
