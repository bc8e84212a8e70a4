"""A merged shard is read only once BOTH of its parents have ended.

Two shards are merged; one parent's records are all read and acked (its end is stored) while the other's are held
unacked, so it cannot end. The merged child must not be handed over then: a partition key of the held parent could
have records in the child, and delivering those before the parent's would break the key's order. The test does
not wait for time to pass: it counts the spout's ListShards calls (a spy on its real client) and lets two full
shard-sync rounds run after the first parent's end was stored, each of which would hand the child over if it were
ready. Then the held records are acked, and the child must follow.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

KEYS = [f"key-{i}" for i in range(16)]


class ListShardsSpy:
    """Counts the ListShards calls made through a client (botocore's event hook on the real client)."""

    def __init__(self, client: Any) -> None:
        self._lock = threading.Lock()
        self._calls = 0
        client.meta.events.register("before-call.kinesis.ListShards", self._seen)

    def _seen(self, **_: Any) -> None:
        with self._lock:
            self._calls += 1

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls


@pytest.mark.parametrize("held_parent", ["ShardToMerge", "AdjacentShardToMerge"])
def test_a_merged_child_waits_until_both_parents_have_ended(kinesalite: KinesisEndpoint, held_parent: str) -> None:
    """``held_parent`` is the parent whose records are held unacked (the child's ParentShardId, or its
    AdjacentParentShardId); the other one ends first."""
    stream = kinesalite.create_stream(shards=2)
    admin = kinesalite.client()
    to_merge, adjacent = kinesalite.shard_ids(stream)
    placed = kinesalite.put(stream, [f"parent-{i}" for i in range(32)], [KEYS[i % 16] for i in range(32)])
    assert {shard for shard, _ in placed} == {to_merge, adjacent}, "both parents hold records"
    admin.merge_shards(StreamName=stream, ShardToMerge=to_merge, AdjacentShardToMerge=adjacent)
    wait_for_stream(admin, stream)
    first, second = (adjacent, to_merge) if held_parent == "ShardToMerge" else (to_merge, adjacent)
    (child,) = set(kinesalite.shard_ids(stream)) - {first, second}
    kinesalite.put(stream, [f"child-{i}" for i in range(10)], [KEYS[i % 16] for i in range(10)])

    client = make_client(kinesalite.region, kinesalite.endpoint_url)
    spy = ListShardsSpy(client)
    store = MemoryCheckpointStore()
    config = SpoutConfig(stream_name=stream, app_name="merge-handover", endpoint_url=kinesalite.endpoint_url,
                         region=kinesalite.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, shard_sync_interval_s=0.2,
                         message_timeout_s=None)
    per_shard = {shard: sum(s == shard for s, _ in placed) for shard in (first, second)}
    order: list[str] = []  # shard of each record delivered, in delivery order
    held: list[str] = []  # message ids of the second parent's records, not acked yet
    with KinesisSpout(config, store, client=client) as spout:
        def take() -> None:
            for tup in spout.next_batch(max_records=500, timeout_s=0.05):
                order.append(tup.record.shard_id)
                if tup.record.shard_id == second:
                    held.append(tup.message_id)
                else:
                    spout.ack(tup.message_id)

        def first_ended_second_held() -> bool:
            take()
            end = store.load(first)
            return end is not None and end.shard_end and len(held) == per_shard[second]

        assert wait_until(first_ended_second_held, 30, interval_s=0.0), f"delivered so far: {order}"
        rounds_from = spy.calls

        def two_more_rounds() -> bool:
            take()
            return spy.calls >= rounds_from + 2

        assert wait_until(two_more_rounds, 30, interval_s=0.0)
        assert child not in order, "the merged child was read while one of its parents had not ended"
        assert child not in spout.shard_ids

        for mid in held:
            spout.ack(mid)

        def child_read() -> bool:
            take()
            return order.count(child) >= 10

        assert wait_until(child_read, 30, interval_s=0.0), f"delivered so far: {order}"
        second_end = store.load(second)
        assert second_end is not None and second_end.shard_end
    assert order.index(child) > max(i for i, shard in enumerate(order) if shard in (first, second))
