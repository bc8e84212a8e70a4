"""The in-memory checkpoint store's whole contract: reads, deletes, and the writes it refuses after close. Written
against mutants the other tests let survive."""

from __future__ import annotations

import pytest

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.errors import CheckpointError
from kinesis_spout.spark.batch_store import batch_store_for

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
