"""What a checkpoint store gets from what it declares (no server): a user's store that implements the
``CheckpointStore`` methods alone keeps working with the memory store's behaviour (static coordination, leases
refused, batch ids in memory, no ownership, checkpoints saved one by one), and one that declares a
``zookeeper_home`` gets what the ZooKeeper store gets (leases by default, Spark's batch store and ownership on its
session, under its nodes)."""

from __future__ import annotations

import pytest

from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore, zookeeper_home
from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import ConfigError
from kinesis_spout.spark.bookkeeping.batch_store import MemoryBatchStore, ZooKeeperBatchStore, batch_store_for
from kinesis_spout.spark.bookkeeping.ownership import ZooKeeperOwnership, ownership_for
from kinesis_spout.spark.source.checkpoint_writes import CheckpointWriter
from kinesis_spout.spout.membership import LeaseMembership
from kinesis_spout.spout.opening import coordination_mode

NEVER_DIALLED = "127.0.0.1:1"  # a ZooKeeper store's constructor does no I/O: nothing below connects


class DictStore:
    """A user's store: the protocol's methods, no base class, nothing declared."""

    def __init__(self) -> None:
        self.saved: dict[str, Checkpoint] = {}
        self.saves = 0

    def open(self) -> None: ...

    def load(self, shard_id: str) -> Checkpoint | None:
        return self.saved.get(shard_id)

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.saves += 1
        self.saved[checkpoint.shard_id] = checkpoint

    def list(self) -> dict[str, Checkpoint]:
        return dict(self.saved)

    def delete(self, shard_id: str) -> None:
        self.saved.pop(shard_id, None)

    def close(self) -> None: ...


class DeclaredStore(DictStore):
    """A user's store whose checkpoints live in ZooKeeper, next to a ZooKeeper store it declares as its home."""

    def __init__(self, home: ZooKeeperCheckpointStore) -> None:
        super().__init__()
        self.zookeeper_home = home


def config(coordination: str = "auto") -> SpoutConfig:
    return SpoutConfig(stream_name="s", app_name="a", coordination=coordination)


def test_a_store_declaring_nothing_reads_statically_and_leases_are_refused_naming_the_fix() -> None:
    store = DictStore()
    assert isinstance(store, CheckpointStore) and zookeeper_home(store) is None
    assert coordination_mode(config(), store) == "static"
    with pytest.raises(ConfigError) as raised:
        LeaseMembership(None, "s", "a", "w", session_timeout_s=10.0,  # type: ignore[arg-type] # no registry needed
                        message_timeout_s=None).join(store)
    assert str(raised.value) == ("coordination 'leases' needs the ZooKeeper checkpoint store (the workers meet "
                                 "there); got DictStore: use coordination='static' with it")


def test_a_store_declaring_nothing_keeps_batch_ids_in_memory_has_no_ownership_and_is_written_one_by_one() -> None:
    store = DictStore()
    batches = batch_store_for(store)
    assert isinstance(batches, MemoryBatchStore) and batch_store_for(store) is batches
    batches.save_batch_id(3)
    assert batch_store_for(store).load_batch_id() == 3
    assert ownership_for(store) is None
    done: list[str] = []
    writer = CheckpointWriter()
    for _ in range(2):  # the second write too: nothing is remembered for a transaction
        writer.write(store, [Checkpoint("a", "1"), Checkpoint("b", "2")], done.append)
    assert store.saves == 4 and done == ["a", "b", "a", "b"] and set(store.list()) == {"a", "b"}


def test_a_store_declaring_a_zookeeper_home_gets_leases_and_spark_s_stores_on_its_session() -> None:
    home = ZooKeeperCheckpointStore(NEVER_DIALLED, "/kinesis-spout/a/s/checkpoints")
    store = DeclaredStore(home)
    assert zookeeper_home(store) is home and zookeeper_home(home) is home
    assert coordination_mode(config(), store) == "leases"
    batches = batch_store_for(store)
    assert isinstance(batches, ZooKeeperBatchStore) and batches.session is home.session
    assert batches.batches_node("q") == "/kinesis-spout/a/s/batches/q"
    owner = ownership_for(store)
    assert isinstance(owner, ZooKeeperOwnership) and owner.session is home.session
    assert ownership_for(store) is owner  # one per store, for as long as it lives
