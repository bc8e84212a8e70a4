"""The shard sync of a LATEST app: closed shards it never read are not handed over and hold none of their children
back, unless the app's stored state up their lineage says it follows them, even from a parent that aged out of the
listing (past the stream's retention).

No emulator can age a shard out, so ListShards is answered by botocore's Stubber on a real client; the checkpoint
store is the project's in-memory one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from kinesis_spout import Checkpoint, InitialPosition, MemoryCheckpointStore
from kinesis_spout.coordination.sync import ShardSync

SEQ = "49590338271490256608559692538361571095921575989136588898"


def shard(shard_id: str, parent: str | None, closed: bool) -> dict[str, Any]:
    seqs = {"StartingSequenceNumber": "1", **({"EndingSequenceNumber": "9"} if closed else {})}
    return {"ShardId": shard_id, **({"ParentShardId": parent} if parent else {}),
            "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"}, "SequenceNumberRange": seqs}


# Z (aged out) -> A (closed) -> B (open)
LISTING = [shard("shardId-000000000001", "shardId-000000000000", True),
           shard("shardId-000000000002", "shardId-000000000001", False)]
Z, A, B = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002"


def ready_ids(store: MemoryCheckpointStore, position: InitialPosition) -> list[str]:
    client = boto3.client("kinesis", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("list_shards", {"Shards": LISTING}, {"StreamName": "s"})
        sync = ShardSync(client, "s", store, interval_s=60.0, owns=lambda s: s, known=set, add=lambda s: None,
                         flush=lambda t: True, on_error=lambda e: None, initial_position=position)
        return [s.shard_id for s in sync.ready(relist=True)]


@pytest.mark.parametrize("position,expected", [(InitialPosition.LATEST, [B]), (InitialPosition.TRIM_HORIZON, [A])])
def test_a_closed_shard_is_skipped_only_at_latest_with_nothing_stored_up_its_lineage(
        position: InitialPosition, expected: list[str]) -> None:
    assert ready_ids(MemoryCheckpointStore(), position) == expected


@pytest.mark.parametrize("parent_checkpoint", [Checkpoint(Z, SEQ, shard_end=True), Checkpoint(Z, SEQ),
                                               Checkpoint.pinned(Z, datetime(2026, 1, 1))])
def test_a_closed_shard_below_a_parent_the_app_followed_is_read_even_after_that_parent_aged_out(
        parent_checkpoint: Checkpoint) -> None:
    store = MemoryCheckpointStore()
    store.save(parent_checkpoint)
    assert ready_ids(store, InitialPosition.LATEST) == [A]  # A first (its child B waits for it)


def test_the_first_start_at_latest_stores_a_pin_on_each_open_shard_and_a_mark_on_each_closed_one() -> None:
    """Owned or not: a worker that starts later, or an owner that takes the open shard after it closed, finds
    where the app started instead of taking it for a shard closed before the start."""
    store = MemoryCheckpointStore()
    client = boto3.client("kinesis", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("list_shards", {"Shards": LISTING}, {"StreamName": "s"})
        sync = ShardSync(client, "s", store, interval_s=60.0, owns=lambda s: [], known=set, add=lambda s: None,
                         flush=lambda t: True, on_error=lambda e: None, initial_position=InitialPosition.LATEST,
                         owner="w1")
        assert sync.sync() == []
    mark, pin = store.load(A), store.load(B)
    assert mark is not None and (mark.shard_end, mark.sequence_number, mark.reset_to) == (True, None, "LATEST")
    assert pin is not None and (pin.shard_end, pin.reset_to, pin.owner) == (False, "AT_TIMESTAMP", "w1")
    assert sync.take_fresh_pins() == {B: pin.timestamp} and sync.take_fresh_pins() == {}
    assert ready_ids(store, InitialPosition.LATEST) == [B]  # a second worker: not a first start, same answer
    assert store.load(B) == pin, "a later worker does not move the app's pin"
