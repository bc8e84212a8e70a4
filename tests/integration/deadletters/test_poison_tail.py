"""Poison records at the end of what a shard holds are dead-lettered within a bounded time, without waiting for a
later record to decode: their letters are written while the spout runs, the shard's checkpoint passes them, and a
parent shard whose last records were poison reaches its end, so its children are read."""

from __future__ import annotations

import json
from pathlib import Path

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig, TextScheme
from kinesis_spout.deadletters import JsonLinesDeadLetters
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream
from kinesis_spout.testing.process import wait_until

POISON = b"\xff\xfe not utf-8"


def config(endpoint: KinesisEndpoint, stream: str, letters: Path, **overrides: object) -> SpoutConfig:
    return SpoutConfig(stream_name=stream, app_name="poison-tail", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON, scheme=TextScheme(),
                       empty_record_backoff_s=0.2, shard_sync_interval_s=1.0,
                       dead_letter=JsonLinesDeadLetters(str(letters)), **overrides)  # type: ignore[arg-type]


def letters_written(path: Path) -> list[str]:
    """The message ids of the letters in the file now (a line cut short by a write under way is not counted)."""
    if not path.exists():
        return []
    ids = []
    for line in path.read_text().splitlines():
        try:
            letter = json.loads(line)
        except ValueError:
            continue
        ids.append(f"{letter['shard_id']}:{letter['sequence_number']}")
    return ids


def test_poison_records_at_a_parents_end_are_dead_lettered_and_the_children_are_read(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    admin = kinesalite.client()
    placed = put_records(admin, stream, [b"good-0", b"good-1", POISON, POISON], partition_keys=["k"] * 4)
    parent = placed[0][0]
    poison_ids = [f"{s}:{q}" for s, q in placed[2:]]
    hash_range = admin.list_shards(StreamName=stream)["Shards"][0]["HashKeyRange"]
    low, high = int(hash_range["StartingHashKey"]), int(hash_range["EndingHashKey"])
    admin.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str((low + high) // 2))
    wait_for_stream(admin, stream)
    keys = [str(i) for i in range(20)]
    children = put_records(admin, stream, [f"child-{i}".encode() for i in range(20)], partition_keys=keys)
    assert {s for s, _ in children} - {parent}, "the split made no child shard"
    letters = tmp_path / "letters.jsonl"
    store = MemoryCheckpointStore()
    delivered: list[str] = []
    with KinesisSpout(config(kinesalite, stream, letters), store) as spout:
        def read() -> bool:
            batch = spout.next_batch(max_records=100, timeout_s=0.2)
            delivered.extend(t.message_id for t in batch)
            batch.ack()
            return len(delivered) >= 22 and len(letters_written(letters)) >= 2

        # Read as a user's loop does, and no close() or flush: the letters must not wait for either.
        assert wait_until(read, 60, interval_s=0.0), (
            f"delivered {len(delivered)} of 22, {len(letters_written(letters))} of 2 dead letters written")
        assert sorted(letters_written(letters)) == sorted(poison_ids)
        assert wait_until(lambda: (stored := store.load(parent)) is not None
                          and stored.shard_end, 30), store.load(parent)
    assert sorted(delivered) == sorted([f"{s}:{q}" for s, q in placed[:2]] + [f"{s}:{q}" for s, q in children])


def test_a_poison_tail_of_a_quiet_shard_is_written_and_checkpointed_past_while_the_spout_runs(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, [b"good-0", POISON, POISON])
    letters = tmp_path / "letters.jsonl"
    store = MemoryCheckpointStore()
    with KinesisSpout(config(kinesalite, stream, letters, checkpoint_interval_s=0.5), store) as spout:
        delivered: list[str] = []

        def read() -> bool:
            batch = spout.next_batch(max_records=100, timeout_s=0.2)
            delivered.extend(t.message_id for t in batch)
            batch.ack()
            stored = store.load(placed[0][0])
            return stored is not None and stored.sequence_number == placed[-1][1]

        assert wait_until(read, 30, interval_s=0.0), (store.load(placed[0][0]), letters_written(letters))
        assert delivered == [f"{placed[0][0]}:{placed[0][1]}"]
        assert sorted(letters_written(letters)) == sorted(f"{s}:{q}" for s, q in placed[1:])
