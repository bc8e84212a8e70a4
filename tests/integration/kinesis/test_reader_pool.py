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
    from kinesis_spout.kinesis.retrieval.polling import ShardGetter
    from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
    from kinesis_spout.positions import TRIM_HORIZON

    getter = ShardGetter(None, "s", "shardId-000000000000", TRIM_HORIZON)
    reader = BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=1.0, on_data=lambda: None)
    assert reader.max_empty_backoff_s == 1.0
    grown = BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=1.0, on_data=lambda: None,
                                max_empty_backoff_s=4.0)
    assert grown.max_empty_backoff_s == 4.0


def test_records_taken_right_after_a_parking_readers_room_check_wake_it(kinesalite: KinesisEndpoint) -> None:
    """A real reader on kinesalite parks with a full buffer; its consumer's take_upto() runs on another thread right
    after the pool's room check (a hook in has_room waits until the take read the park flag: it called the pool's
    wake(), or returned without). The reader must be polled again: a lost wake-up would stall the shard for good."""
    from kinesis_spout.kinesis.client import make_client
    from kinesis_spout.kinesis.retrieval.polling import ShardGetter
    from kinesis_spout.kinesis.retrieval.pool import PARK, ReaderPool
    from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
    from kinesis_spout.positions import TRIM_HORIZON
    from kinesis_spout.testing.process import wait_until

    class WakeSeen(ReaderPool):
        def __init__(self) -> None:
            super().__init__(1, name="kinesis-reader-racing")
            self.wake_called = threading.Event()

        def wake(self, reader: Any) -> None:
            self.wake_called.set()
            super().wake(reader)

    class TakenAfterRoomCheck(BufferedShardReader):
        parking = False
        consumer: threading.Thread | None = None
        taken: list[Any]

        def poll(self) -> float | None:
            due = super().poll()
            self.parking = due == PARK and self.consumer is None
            return due

        def has_room(self) -> bool:
            room = super().has_room()
            if self.parking:  # the pool's check after the PARK: the consumer takes every record right now
                self.parking = False
                self.taken = []
                self.consumer = threading.Thread(target=lambda: self.taken.extend(self.take_upto(1000, 1 << 30)),
                                                 daemon=True)
                self.consumer.start()
                consumer = self.consumer
                assert wait_until(lambda: pool.wake_called.is_set() or not consumer.is_alive(), 5.0)
            return room

    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(30)])
    pool = WakeSeen()
    getter = ShardGetter(make_client(kinesalite.region, kinesalite.endpoint_url), stream, placed[0][0],
                         TRIM_HORIZON, max_records=10)
    reader = TakenAfterRoomCheck(getter, max_records=5, max_bytes=1 << 20, empty_backoff_s=0.2,
                                 on_data=lambda: None, pool=pool)
    reader.start()
    try:
        assert wait_until(lambda: reader.consumer is not None, 10.0), "the reader never parked"
        assert wait_until(lambda: reader.calls >= 2, 5.0), \
            "the parked reader was never polled again after its records were taken: a stall"
        assert pool.wake_called.is_set()
        got = list(reader.taken)
        assert wait_until(lambda: got.extend(reader.take_upto(1000, 1 << 30)) or len(got) >= 30, 10.0)
    finally:
        reader.close()
        pool.close()
    assert [r.sequence_number for r in got] == [seq for _, seq in placed]
