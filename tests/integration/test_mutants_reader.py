"""The buffered shard reader's one-record path: records come out in order, and taking them frees the byte budget
so prefetching goes on. Written against mutants of kinesis_spout/kinesis/reader.py the rest of the suite let
survive (see benchmarks/results/mutation.md). kinesalite through the fixture (real sequence numbers)."""

from __future__ import annotations

import threading
import time

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.getter import ShardGetter, StartPosition
from kinesis_spout.kinesis.reader import Backoff, BufferedShardReader
from kinesis_spout.records import Record
from kinesis_spout.testing.kinesis import KinesisEndpoint

TIMEOUT_S = 10.0


def test_take_one_hands_out_every_record_in_order_under_a_byte_budget_of_three_records(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"record-{i:02d}".encode() for i in range(12)], ["pk"] * 12)
    client = make_client(kinesalite.region, kinesalite.endpoint_url, read_timeout_s=10.0)
    getter = ShardGetter(client, stream, placed[0][0], StartPosition("TRIM_HORIZON"), max_records=1)
    size = len(b"record-00") + len("pk")
    signal = threading.Event()
    reader = BufferedShardReader(getter, max_records=100, max_bytes=3 * size, empty_backoff_s=0.2,
                                 on_data=signal.set)
    assert reader.take_one() is None  # nothing read yet
    reader.start()
    taken: list[Record] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(taken) < 12:
            assert time.monotonic() < deadline, f"took {len(taken)} of 12 records in {TIMEOUT_S} s"
            record = reader.take_one()
            if record is None:
                signal.wait(0.2)
                signal.clear()
                continue
            assert record.size == size
            taken.append(record)
    finally:
        reader.close(5.0)
    assert [(r.shard_id, r.sequence_number) for r in taken] == placed
    assert [r.data for r in taken] == [f"record-{i:02d}".encode() for i in range(12)]
    assert reader.buffered == 0 and reader.take_one() is None


def test_a_new_reader_has_not_ended_and_has_the_documented_defaults() -> None:
    getter = ShardGetter(None, "stream", "shardId-000000000007", StartPosition("TRIM_HORIZON"))
    reader = BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=0.0, on_data=lambda: None)
    assert reader.shard_id == "shardId-000000000007"
    assert (reader.ended, reader.exhausted, reader.buffered, reader.max_retries) == (False, False, 0, 30)
    assert reader.empty_backoff_s == MIN_POLL_INTERVAL_S
    assert BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=2.5,
                               on_data=lambda: None).empty_backoff_s == 2.5
    backoff = Backoff()
    assert (backoff.initial_s, backoff.max_s, backoff.failures) == (MIN_POLL_INTERVAL_S, 10.0, 0)


def test_backoff_doubles_its_ceiling_up_to_the_maximum_with_full_jitter() -> None:
    top = Backoff(initial_s=0.1, max_s=1.0, rng=lambda: 1.0)
    assert [round(top.next_delay(), 6) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert top.failures == 6
    top.reset()
    assert top.failures == 0 and round(top.next_delay(), 6) == 0.1
    half = Backoff(initial_s=0.1, max_s=1.0, rng=lambda: 0.5)
    assert [round(half.next_delay(), 6) for _ in range(3)] == [0.1, 0.15, 0.25]
    bottom = Backoff(initial_s=0.1, max_s=1.0, rng=lambda: 0.0)
    assert [bottom.next_delay() for _ in range(3)] == [0.1, 0.1, 0.1]


def test_take_frees_the_byte_budget_so_prefetching_goes_on(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"record-{i:02d}".encode() for i in range(12)], ["pk"] * 12)
    client = make_client(kinesalite.region, kinesalite.endpoint_url, read_timeout_s=10.0)
    getter = ShardGetter(client, stream, placed[0][0], StartPosition("TRIM_HORIZON"), max_records=1)
    size = len(b"record-00") + len("pk")
    signal = threading.Event()
    reader = BufferedShardReader(getter, max_records=100, max_bytes=3 * size, empty_backoff_s=0.2,
                                 on_data=signal.set)
    reader.start()
    taken: list[Record] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(taken) < 12:
            assert time.monotonic() < deadline, f"took {len(taken)} of 12 records in {TIMEOUT_S} s"
            batch = reader.take(2)
            if not batch:
                signal.wait(0.2)
                signal.clear()
            taken += batch
    finally:
        reader.close(5.0)
    assert [(r.shard_id, r.sequence_number) for r in taken] == placed
