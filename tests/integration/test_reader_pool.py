"""A spout's readers on a shared pool, on kinesalite: many shards on a few threads, full buffers parked and woken,
nothing lost, no thread left after close()."""

from __future__ import annotations

import threading
import time
from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain


def config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(stream_name=stream, app_name="pool", endpoint_url=endpoint.endpoint_url,
                                   region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                                   empty_record_backoff_s=0.2, checkpoint_interval_s=0.0)
    return SpoutConfig(**{**options, **overrides})


def pool_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kinesis-reader")]


def test_a_spout_owning_64_shards_reads_every_record_on_its_4_reader_threads(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=64)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(640)], [f"key-{i}" for i in range(640)])
    assert len({shard for shard, _ in placed}) > 40  # the records are spread over most shards
    with KinesisSpout(config(kinesalite, stream, reader_threads=4), MemoryCheckpointStore()) as spout:
        got = drain(spout, 640, timeout_s=60)
        threads = pool_threads()
        assert spout.flush_checkpoints()
    assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in placed)
    assert 1 <= len(threads) <= 4, threads
    assert pool_threads() == []


def test_a_full_buffer_parks_its_reader_until_records_are_taken_and_nothing_is_lost(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(300)], [f"key-{i}" for i in range(300)])
    cfg = config(kinesalite, stream, reader_threads=1, prefetch_records=5, max_records_per_call=10)
    with KinesisSpout(cfg, MemoryCheckpointStore()) as spout:
        got: list[Any] = []
        while len(got) < 300:
            time.sleep(0.3)  # the buffers fill up (10 records a call, 5 a buffer) and their readers park
            batch = drain(spout, 30, timeout_s=10)
            assert batch, f"stalled after {len(got)} of 300 records"
            got.extend(batch)
        parks = spout._rr.pool.parks
    assert parks > 0
    assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in placed)
    by_shard: dict[str, list[int]] = {}
    for t in got:
        by_shard.setdefault(t.record.shard_id, []).append(int(t.record.sequence_number))
    assert all(seqs == sorted(seqs) for seqs in by_shard.values())


def test_an_idle_shard_is_polled_less_and_less_up_to_the_maximum_and_at_once_again_after_data(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    cfg = config(kinesalite, stream, empty_record_backoff_s=0.2, max_empty_record_backoff_s=0.8)
    with KinesisSpout(cfg, MemoryCheckpointStore()) as spout:
        reader = next(iter(spout._shards.values())).reader
        time.sleep(3.0)  # pauses 0.2, 0.4, 0.8, 0.8, 0.8: about 6 calls (15 without the growth)
        idle_calls = reader.calls
        assert 4 <= idle_calls <= 8, idle_calls
        placed = kinesalite.put(stream, [b"late"], ["k"])
        got = drain(spout, 1, timeout_s=5)
        assert [t.message_id for t in got] == [f"{placed[0][0]}:{placed[0][1]}"]
        assert reader.empty_reads <= 1  # data resets the growth


def test_without_a_maximum_an_idle_shard_keeps_its_pause() -> None:
    from kinesis_spout.kinesis.getter import ShardGetter, StartPosition
    from kinesis_spout.kinesis.reader import BufferedShardReader

    getter = ShardGetter(None, "s", "shardId-000000000000", StartPosition("TRIM_HORIZON"))
    reader = BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=1.0, on_data=lambda: None)
    assert reader.max_empty_backoff_s == 1.0
    grown = BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=1.0, on_data=lambda: None,
                                max_empty_backoff_s=4.0)
    assert grown.max_empty_backoff_s == 4.0
