"""The in-memory batch store (Spark's batch ids, batch ends and query heartbeats without ZooKeeper): the same
rules as the ZooKeeper one."""

from __future__ import annotations

import pytest

from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.errors import CheckpointConflict, CheckpointError
from kinesis_spout.spark.bookkeeping.batch_store import BatchStore, MemoryBatchStore, batch_store_for


def test_batch_ends_are_recorded_once_listed_per_batch_and_deleted_below_a_batch() -> None:
    store = MemoryBatchStore()
    assert isinstance(store, BatchStore)
    assert store.batch_end("q", 0, "a") is None and store.batch_ends("q", 0) == {}
    assert store.record_batch_end("q", 0, "a", b"first") == b"first"
    assert store.record_batch_end("q", 0, "a", b"second") == b"first", "a second end must not replace the first"
    for batch in (1, 2):
        store.record_batch_end("q", batch, "a", f"a{batch}".encode())
    store.record_batch_end("other", 0, "a", b"other query")
    assert store.delete_batches("q", 2) == 2, "batches 0 and 1, not 2"
    assert store.batch_ends("q", 0) == {} and store.batch_ends("q", 2) == {"a": b"a2"}
    assert store.batch_ends("other", 0) == {"a": b"other query"}


def test_a_query_is_deleted_only_at_the_heartbeat_version_it_was_judged_at() -> None:
    store = MemoryBatchStore()
    assert store.query_heartbeats() == {}
    store.touch_query("q", b"beat")
    store.record_batch_end("q", 0, "a", b"end")
    judged = store.query_heartbeats()["q"][1]
    store.touch_query("q", b"beat again")
    assert store.delete_query("q", judged) is False and store.batch_ends("q", 0) == {"a": b"end"}
    assert store.delete_query("q", store.query_heartbeats()["q"][1]) is True
    assert store.query_heartbeats() == {} and store.batch_ends("q", 0) == {}


def test_batch_ids_are_taken_once_and_refused_while_the_memory_checkpoints_are_closed() -> None:
    checkpoints = MemoryCheckpointStore()
    store = batch_store_for(checkpoints)
    assert batch_store_for(checkpoints) is store, "one batch id sequence per memory checkpoint store"
    store.save_batch_id(2)
    with pytest.raises(CheckpointConflict, match="batch id is 2; 2 is taken"):
        store.save_batch_id(2)
    checkpoints.close()
    with pytest.raises(CheckpointError, match="cannot write batch id 3") as caught:
        store.save_batch_id(3)
    assert not caught.value.retriable and store.load_batch_id() == 2
    checkpoints.open()
    store.save_batch_id(3)
    assert store.load_batch_id() == 3
