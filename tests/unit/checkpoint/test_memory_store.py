"""The in-memory checkpoint store's whole contract: reads, deletes, forced resets, a checkpoint never moved back,
batch ids taken once, and the writes it refuses after close (until opened again)."""

from __future__ import annotations

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.errors import CheckpointConflict, CheckpointError
from kinesis_spout.spark.bookkeeping.batch_store import batch_store_for

SEQ = "49590338271490256608559692538361571095921575989136588898"


def test_closed_is_false_until_close_and_again_after_open() -> None:
    store = MemoryCheckpointStore()
    assert store.closed is False
    store.close()
    assert store.closed is True
    store.open()
    assert store.closed is False


def test_list_is_a_copy_and_delete_removes_only_that_shard() -> None:
    store = MemoryCheckpointStore()
    a, b = Checkpoint("a", SEQ), Checkpoint("b", "7")
    store.save(a)
    store.save(b)
    listed = store.list()
    assert listed == {"a": a, "b": b}
    listed.clear()
    assert store.list() == {"a": a, "b": b}
    store.delete("a")
    store.delete("never-stored")
    assert store.list() == {"b": b} and store.load("a") is None


def test_writes_after_close_name_what_was_refused() -> None:
    store = MemoryCheckpointStore()
    store.close()
    with pytest.raises(CheckpointError, match=f"cannot write the checkpoint of a \\({SEQ}\\)") as exc:
        store.save(Checkpoint("a", SEQ))
    assert exc.value.retriable is False
    with pytest.raises(CheckpointError, match="cannot write batch id 5"):
        batch_store_for(store).save_batch_id(5)


def test_memory_store_reset_overrides_and_a_batch_id_is_taken_once() -> None:
    store = MemoryCheckpointStore()
    store.save(Checkpoint("s", "100"))
    store.save(Checkpoint("s", "7"), force=True)
    assert store.load("s").sequence_number == "7"
    assert batch_store_for(store).load_batch_id() == 0
    batch_store_for(store).save_batch_id(5)
    for taken in (5, 4):  # two pipelines on one app and stream never share an id
        with pytest.raises(CheckpointConflict, match=f"batch id is 5; {taken} is taken"):
            batch_store_for(store).save_batch_id(taken)
    assert batch_store_for(store).load_batch_id() == 5


def test_memory_store_never_moves_backwards() -> None:
    store = MemoryCheckpointStore()
    store.save(Checkpoint("s", "100"))
    store.save(Checkpoint("s", "100"))  # same value is fine
    with pytest.raises(CheckpointConflict, match="not moved back from 100 to 99"):
        store.save(Checkpoint("s", "99"))
    store.save(Checkpoint("s", "100", shard_end=True))
    with pytest.raises(CheckpointConflict):
        store.save(Checkpoint("s", "100"))  # un-finishing a shard is moving back
    assert store.load("s") == Checkpoint("s", "100", shard_end=True)


def test_memory_store_refuses_writes_after_close_until_reopened() -> None:
    """Like a real store: closed means no writes (a clear, non-retriable error); open() again and the data kept
    before the close is still there."""
    store = MemoryCheckpointStore()
    store.open()
    store.save(Checkpoint("s", "10"))
    batch_store_for(store).save_batch_id(3)
    store.close()
    store.close()  # idempotent
    assert store.closed
    with pytest.raises(CheckpointError, match="memory checkpoint store is closed") as caught:
        store.save(Checkpoint("s", "20"))
    assert not caught.value.retriable
    with pytest.raises(CheckpointError, match="closed"):
        batch_store_for(store).save_batch_id(4)
    assert store.load("s").sequence_number == "10" and batch_store_for(store).load_batch_id() == 3  # reads still work
    store.open()
    store.save(Checkpoint("s", "20"))
    batch_store_for(store).save_batch_id(4)
    assert store.load("s").sequence_number == "20" and batch_store_for(store).load_batch_id() == 4 and store.writes == 2
