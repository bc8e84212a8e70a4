"""The checkpoint writer's deadline, its error, and its re-read after a lost ZooKeeper session, exactly. Written
against mutants of kinesis_spout/checkpoint/writer.py the rest of the suite let survive (see
benchmarks/results/mutation.md). Real stores: ZooKeeper through the fixture, and the memory store, subclassed (as
in test_checkpoint_writer.py) to fail or to report a lost connection on purpose."""

from __future__ import annotations

import threading
from typing import Any

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    MemoryCheckpointStore,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.checkpoint.writer import CheckpointWriter
from kinesis_spout.testing.process import wait_until

TIMEOUT_S = 20.0


class FailingStore(MemoryCheckpointStore):
    """Every save fails (retriable); each attempt first notes whether the writer had declared the store
    unreachable by then."""

    def __init__(self) -> None:
        super().__init__()
        self.writer: CheckpointWriter | None = None
        self.unreachable_at_attempt: list[bool] = []

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        assert self.writer is not None
        self.unreachable_at_attempt.append(self.writer.unreachable is not None)
        raise CheckpointError(f"injected failure saving {checkpoint.sequence_number}", retriable=True)


class DisconnectedStore(MemoryCheckpointStore):
    """A store that says its connection is down (as the ZooKeeper store does while SUSPENDED) until ``up`` is
    set; ``wait_connected`` blocks like the real one."""

    def __init__(self) -> None:
        super().__init__()
        self.up = threading.Event()

    def wait_connected(self, timeout_s: float) -> bool:
        return self.up.wait(timeout_s)


def started(store: Any, deadline_s: float, **kw: Any) -> CheckpointWriter:
    writer = CheckpointWriter(store, 0.0, "me", deadline_s=deadline_s, **kw)
    writer.start()
    return writer


def test_the_deadline_is_reached_at_the_first_failure_past_it_with_the_write_error_as_cause() -> None:
    store = FailingStore()
    writer = started(store, 0.0)
    store.writer = writer
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: len(store.unreachable_at_attempt) >= 2, TIMEOUT_S)
        assert store.unreachable_at_attempt[:2] == [False, True]
        error = writer.unreachable
        assert isinstance(error, CheckpointError) and error.retriable is True
        message = str(error)
        assert "checkpoints could not be written for 0 s (deadline 0 s): injected failure saving 7. " in message
        assert "Nothing is lost" in message and "zookeeper_deadline_s" in message
        assert writer.failures >= 2 and str(writer.last_error) == "injected failure saving 7"
    finally:
        writer.close(0.5)


def test_no_error_before_the_deadline() -> None:
    store = FailingStore()
    writer = started(store, 60.0)
    store.writer = writer
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: len(store.unreachable_at_attempt) >= 3, TIMEOUT_S)
        assert store.unreachable_at_attempt[:3] == [False, False, False]
        assert writer.unreachable is None
    finally:
        writer.close(0.5)


def test_a_lost_connection_past_the_deadline_is_an_error_without_a_cause_that_clears_when_it_is_back() -> None:
    store = DisconnectedStore()
    writer = started(store, 0.0)
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: writer.unreachable is not None, TIMEOUT_S)
        message = str(writer.unreachable)
        assert "(deadline 0 s). Nothing is lost" in message, message
        assert writer.last_error is None and writer.writes == 0
        store.up.set()
        assert wait_until(lambda: writer.writes == 1 and writer.unreachable is None, TIMEOUT_S)
        assert store.load("a") is not None and store.load("a").owner == "me"  # type: ignore[union-attr]
    finally:
        writer.close(2.0)


def expire_session(hosts: str, store: ZooKeeperCheckpointStore) -> None:
    """Expire the store's session: open and close a second client with its session id and password."""
    from kazoo.client import KazooClient

    session_id, password = store._client.client_id  # type: ignore[union-attr]
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def test_after_a_lost_session_the_writer_reports_exactly_the_shards_another_owner_moved_past_it(zookeeper: Any) -> None:
    path = f"{zookeeper.prefix}/app/stream/checkpoints"
    store = ZooKeeperCheckpointStore(zookeeper.hosts, path, session_timeout_s=4.0)
    store.open()
    other = ZooKeeperCheckpointStore(zookeeper.hosts, path)
    other.open()
    conflicts: list[CheckpointConflict] = []
    writer = started(store, TIMEOUT_S, on_conflict=conflicts.append)
    try:
        for shard in ("taken", "mine-again", "deleted", "untouched", "anonymous"):
            writer.offer(Checkpoint(shard, "10"))
        assert wait_until(lambda: writer.writes == 5, TIMEOUT_S), "the first writes"
        other.save(Checkpoint("taken", "25").stamped("another-worker"))
        other.save(Checkpoint("mine-again", "25").stamped("me"))  # our own owner name: not a takeover
        other.delete("deleted")
        other.save(Checkpoint("anonymous", "30"))  # no owner recorded
        expire_session(zookeeper.hosts, store)
        assert wait_until(lambda: store.session_losses == 1 and store.connected, TIMEOUT_S), "a new session"
        writer.offer(Checkpoint("new", "5"))  # the next write re-reads the store first
        assert wait_until(lambda: writer.writes == 6, TIMEOUT_S), "the write after the lost session"
        assert writer.flush(5.0)
        reported = sorted(str(c) for c in conflicts)
        assert len(reported) == 2 and writer.conflicts == 2, reported
        assert reported[0].startswith("checkpoint of anonymous was moved to 30 by unknown while our ZooKeeper "
                                      "session was lost (we had written 10)"), reported[0]
        assert reported[1].startswith("checkpoint of taken was moved to 25 by another-worker while"), reported[1]
        assert isinstance(writer.last_error, CheckpointConflict)
        assert other.load("taken").sequence_number == "25"  # type: ignore[union-attr]
    finally:
        writer.close(5.0)
        store.close()
        other.close()
