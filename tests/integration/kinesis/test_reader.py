"""The buffered shard reader and the round-robin reader over several: records come out in order, one at a time or
in chunks within a count and a byte budget, and taking them frees the budget so prefetching goes on; polling slows
down on an idle shard and parks on a full buffer; throttles are retried after a backoff; the reader threads are
named, shared and ended by close; a closed shard's reader ends after its last record; a poll's unexpected error is
raised by take, naming the shard. kinesalite through the fixture (real sequence numbers)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from kinesis_spout.config import MIN_POLL_INTERVAL_S
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import GET_RECORDS_RETRY, ShardGetter
from kinesis_spout.kinesis.retrieval.pool import PARK
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader, RoundRobinReader
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.records import Record
from kinesis_spout.retry import Backoff as RetryBackoffState
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint

TIMEOUT_S = 10.0


def test_taking_one_record_at_a_time_hands_out_every_record_in_order_under_a_byte_budget_of_three_records(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"record-{i:02d}".encode() for i in range(12)], ["pk"] * 12)
    client = make_client(kinesalite.region, kinesalite.endpoint_url, read_timeout_s=10.0)
    getter = ShardGetter(client, stream, placed[0][0], TRIM_HORIZON, max_records=1)
    size = len(b"record-00") + len("pk")
    signal = threading.Event()
    reader = BufferedShardReader(getter, max_records=100, max_bytes=3 * size, empty_backoff_s=0.2,
                                 on_data=signal.set)
    assert reader.take_upto(1, 1 << 30) == []  # nothing read yet
    reader.start()
    taken: list[Record] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(taken) < 12:
            assert time.monotonic() < deadline, f"took {len(taken)} of 12 records in {TIMEOUT_S} s"
            one = reader.take_upto(1, 1 << 30)
            if not one:
                signal.wait(0.2)
                signal.clear()
                continue
            assert len(one) == 1 and one[0].size == size
            taken += one
    finally:
        reader.close(5.0)
    assert [(r.shard_id, r.sequence_number) for r in taken] == placed
    assert [r.data for r in taken] == [f"record-{i:02d}".encode() for i in range(12)]
    assert reader.buffered == 0 and reader.take_upto(1, 1 << 30) == []


def test_a_new_reader_has_not_ended_and_has_the_documented_defaults() -> None:
    getter = ShardGetter(None, "stream", "shardId-000000000007", TRIM_HORIZON)
    reader = BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=0.0, on_data=lambda: None)
    assert reader.shard_id == "shardId-000000000007"
    assert (reader.ended, reader.exhausted, reader.buffered, reader.max_retries) == (False, False, 0, 30)
    assert (reader.millis_behind_latest, reader.calls, reader.records_read, reader.retried_errors) == (None, 0, 0, 0)
    assert reader.empty_backoff_s == MIN_POLL_INTERVAL_S
    assert BufferedShardReader(getter, max_records=10, max_bytes=100, empty_backoff_s=2.5,
                               on_data=lambda: None).empty_backoff_s == 2.5
    policy = GET_RECORDS_RETRY
    assert (policy.initial_s, policy.multiplier, policy.max_s, policy.jitter) == (MIN_POLL_INTERVAL_S, 2.0, 10.0, 1.0)
    assert (policy.max_attempts, policy.deadline_s) == (None, None), "each reader sets its own limit"


def test_the_get_records_backoff_doubles_its_ceiling_up_to_the_maximum_with_full_jitter() -> None:
    def backoff(rng: float) -> RetryBackoffState:
        return RetryBackoffState(replace(GET_RECORDS_RETRY, initial_s=0.1, max_s=1.0), random=lambda: rng)

    top = backoff(1.0)
    assert [round(top.next_delay(), 6) for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert top.failures == 6
    top.reset()
    assert top.failures == 0 and round(top.next_delay(), 6) == 0.1
    half = backoff(0.5)
    assert [round(half.next_delay(), 6) for _ in range(3)] == [0.1, 0.15, 0.25]
    bottom = backoff(0.0)
    assert [bottom.next_delay() for _ in range(3)] == [0.1, 0.1, 0.1]


def test_take_frees_the_byte_budget_so_prefetching_goes_on(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"record-{i:02d}".encode() for i in range(12)], ["pk"] * 12)
    client = make_client(kinesalite.region, kinesalite.endpoint_url, read_timeout_s=10.0)
    getter = ShardGetter(client, stream, placed[0][0], TRIM_HORIZON, max_records=1)
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
            batch = reader.take_upto(2, 1 << 30)
            if not batch:
                signal.wait(0.2)
                signal.clear()
            taken += batch
    finally:
        reader.close(5.0)
    assert [(r.shard_id, r.sequence_number) for r in taken] == placed


# -- one poll at a time: the reader driven by the test instead of a pool -------------------------------------------


def reader_of(endpoint: KinesisEndpoint, stream: str, *, per_call: int = 10_000, **options: Any) -> BufferedShardReader:
    """A reader of the stream's first shard, not started: the test calls ``poll()`` itself, as a pool would."""
    client = make_client(endpoint.region, endpoint.endpoint_url, read_timeout_s=10.0)
    shard = client.list_shards(StreamName=stream)["Shards"][0]["ShardId"] if "shard" not in options else \
        options.pop("shard")
    getter = ShardGetter(client, stream, shard, TRIM_HORIZON, max_records=per_call)
    defaults: dict[str, Any] = dict(max_records=100, max_bytes=1 << 20, empty_backoff_s=0.2, on_data=lambda: None)
    defaults.update(options)
    return BufferedShardReader(getter, **defaults)


def poll_pause(reader: BufferedShardReader) -> tuple[float, float]:
    """One poll; bounds (low, high) of the pause it asked for before the next call (``due`` minus the time of the
    call, which lies between the clock readings before and after it)."""
    before = time.monotonic()
    due = reader.poll()
    after = time.monotonic()
    assert due is not None and due != PARK, f"poll() returned {due}"
    return due - after, due - before


def test_poll_makes_one_call_buffers_and_counts_its_records_and_asks_for_the_next_call_soon(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(5)], ["pk"] * 5)
    signals: list[int] = []
    reader = reader_of(kinesalite, stream, per_call=2, on_data=lambda: signals.append(1))
    low, high = poll_pause(reader)
    assert low <= MIN_POLL_INTERVAL_S <= high + 1e-9
    assert (reader.calls, reader.buffered, reader.records_read, len(signals)) == (1, 2, 2, 1)
    assert reader.millis_behind_latest is not None
    poll_pause(reader)
    poll_pause(reader)
    assert (reader.calls, reader.buffered, reader.records_read, len(signals)) == (3, 5, 5, 3)
    first = reader.take_upto(1, 1 << 30)
    rest = reader.take_upto(10, 1 << 30)
    assert [r.sequence_number for r in first + rest] == [seq for _, seq in placed]
    assert reader.buffered == 0 and reader.take_upto(10, 1 << 30) == [] and not reader.exhausted
    poll_pause(reader)  # nothing new: no signal
    assert (reader.calls, reader.records_read, len(signals)) == (4, 5, 3)


def test_an_idle_shard_is_polled_ever_less_often_up_to_its_maximum_and_soon_again_once_records_come(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    reader = reader_of(kinesalite, stream, empty_backoff_s=0.2, max_empty_backoff_s=0.7)
    for expected in (0.2, 0.4, 0.7, 0.7):
        low, high = poll_pause(reader)
        assert low - 1e-9 <= expected <= high + 1e-9, f"paused {low:.3f}..{high:.3f} s, expected {expected}"
    kinesalite.put(stream, [b"one"], ["pk"])
    low, high = poll_pause(reader)
    assert low <= MIN_POLL_INTERVAL_S <= high + 1e-9 and reader.buffered == 1
    low, high = poll_pause(reader)  # empty again: the pause starts over
    assert low - 1e-9 <= 0.2 <= high + 1e-9
    steady = reader_of(kinesalite, stream, empty_backoff_s=0.3)  # no maximum: the pause does not grow
    poll_pause(steady)  # reads the record
    for _ in range(3):
        low, high = poll_pause(steady)
        assert low - 1e-9 <= 0.3 <= high + 1e-9


def test_a_full_buffer_parks_the_reader_without_a_call_until_records_are_taken(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(12)], ["pk"] * 12)
    size = len(b"r0") + len("pk")
    by_count = reader_of(kinesalite, stream, per_call=3, max_records=3)
    poll_pause(by_count)
    assert not by_count.has_room()
    assert by_count.poll() == PARK and by_count.calls == 1
    assert len(by_count.take_upto(1, 1 << 30)) == 1 and by_count.has_room()
    poll_pause(by_count)
    assert by_count.buffered == 5 and by_count.calls == 2
    by_bytes = reader_of(kinesalite, stream, per_call=2, max_bytes=3 * size)
    poll_pause(by_bytes)  # 2 records: room for more
    poll_pause(by_bytes)  # 4 records: past the budget
    assert by_bytes.poll() == PARK and by_bytes.calls == 2
    assert len(by_bytes.take_upto(1, 1 << 30)) == 1
    assert by_bytes.poll() == PARK, "3 records still fill the byte budget"
    taken = [r for _ in range(3) for r in by_bytes.take_upto(1, 1 << 30)]
    assert by_bytes.buffered == 0 and by_bytes.has_room()
    poll_pause(by_bytes)
    poll_pause(by_bytes)
    assert by_bytes.buffered == 4 and by_bytes.poll() == PARK
    assert len(by_bytes.take_upto(10, 1 << 30)) == 4 and by_bytes.has_room(), \
        "taking every record frees the whole budget"
    assert [r.sequence_number for r in taken if r is not None] == [seq for _, seq in placed[1:4]]
    edge = reader_of(kinesalite, stream, per_call=1, max_bytes=2 * size + 1)  # room while below the budget
    for _ in range(3):
        poll_pause(edge)
    assert edge.buffered == 3 and edge.poll() == PARK


def test_a_throttle_is_retried_after_a_backoff_and_the_reader_gives_up_after_max_retries_keeping_what_it_read(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    placed = kinesis_backend.put(stream, [f"r{i}".encode() for i in range(3)], ["pk"] * 3)
    signals: list[int] = []
    reader = reader_of(through, stream, shard=placed[0][0], per_call=2, max_retries=2,
                       on_data=lambda: signals.append(1))
    poll_pause(reader)
    proxy.inject("GetRecords", "ProvisionedThroughputExceededException", times=3)
    initial = GET_RECORDS_RETRY.initial_s
    for retried in (1, 2):
        low, high = poll_pause(reader)
        assert high >= initial and low <= initial * 2 ** retried, f"paused {low:.3f}..{high:.3f} s"
        assert reader.retried_errors == retried
    assert reader.poll() is None, "a third throttle in a row with max_retries=2 stops the reader"
    assert (reader.calls, reader.retried_errors, len(signals)) == (4, 2, 2)
    assert not reader.exhausted
    assert [r.sequence_number for r in reader.take_upto(10, 1 << 30)] == [seq for _, seq in placed[:2]]
    assert reader.exhausted
    with pytest.raises(KinesisError, match=r"\(gave up after 2 retries\)") as raised:
        reader.take_upto(10, 1 << 30)
    assert raised.value.code == "ProvisionedThroughputExceededException"
    with pytest.raises(KinesisError):
        reader.take_upto(1, 1 << 30)


def test_a_reader_on_a_pool_of_its_own_runs_one_named_thread_that_close_ends_and_then_makes_no_call(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    kinesalite.put(stream, [b"r0"], ["pk"])
    reader = reader_of(kinesalite, stream, empty_backoff_s=0.5)
    name = f"kinesis-reader-{reader.shard_id}"
    before = set(threading.enumerate())
    reader.start()
    reader.start()  # idempotent: one schedule, one thread
    started = [t for t in set(threading.enumerate()) - before]
    assert [t.name for t in started] == [f"{name}-0"] and started[0].daemon
    deadline = time.monotonic() + TIMEOUT_S
    while reader.buffered < 1:
        assert time.monotonic() < deadline, "the record never arrived"
        time.sleep(0.02)
    assert len(reader.take_upto(1, 1 << 30)) == 1  # taking from a reader that was never parked wakes nothing
    calls = reader.calls
    time.sleep(0.7)  # idle: a call about every 0.5 s (twice that if the reader were scheduled twice)
    assert reader.calls - calls <= 2, f"{reader.calls - calls} calls in 0.7 s"
    reader.close(5.0)
    assert not started[0].is_alive(), "close() did not end the reader's thread"
    calls = reader.calls
    assert reader.poll() is None and reader.calls == calls
    reader.start()
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()], "a closed reader started again"
    reader.close(5.0)  # idempotent


def shard_readers(endpoint: KinesisEndpoint, counts: list[int]) -> list[BufferedShardReader]:
    """One stream with a shard per count, ``counts[i]`` records ``"i-0"``, ``"i-1"``... put into shard i (by explicit
    hash key), and a reader of each shard that has polled it once (so it holds them)."""
    client = endpoint.client()
    stream = endpoint.create_stream(shards=len(counts))
    shards = sorted(client.list_shards(StreamName=stream)["Shards"], key=lambda s: int(s["ShardId"].split("-")[1]))
    readers = []
    for index, (shard, count) in enumerate(zip(shards, counts)):
        for i in range(count):
            client.put_record(StreamName=stream, Data=f"{index}-{i}".encode(), PartitionKey="pk",
                              ExplicitHashKey=shard["HashKeyRange"]["StartingHashKey"])
        reader = reader_of(endpoint, stream, shard=shard["ShardId"])
        poll_pause(reader)
        assert reader.buffered == count
        readers.append(reader)
    return readers


def test_round_robin_takes_one_record_per_shard_in_turn_skipping_empty_and_full_shards(
        kinesalite: KinesisEndpoint) -> None:
    readers = shard_readers(kinesalite, [3, 0, 3])
    a = readers[0]
    rr = RoundRobinReader(threads=0)
    assert rr.pool is None
    rr.add(readers)

    def take(full: BufferedShardReader | None = None) -> str | None:
        """One record of the next shard in turn; ``full`` has no room for one (as at its in-flight limit)."""
        records = rr.next_records(lambda shard_id: (0, 0) if full and shard_id == full.shard_id else (1, 1 << 20), 1)
        assert len(records) <= 1
        return records[0].data.decode() if records else None

    assert [take(), take(a), take(a), take(), take(), take(), take()] == \
        ["0-0", "2-0", "2-1", "0-1", "2-2", "0-2", None]
    rr.close()


def test_removing_a_shard_starts_the_turn_over_and_a_failed_shard_s_error_is_raised(
        kinesalite: KinesisEndpoint) -> None:
    readers = shard_readers(kinesalite, [2, 2, 2])
    rr = RoundRobinReader(threads=0)
    rr.add(readers)
    def room(_: str) -> tuple[int, int]:
        return 1, 1 << 20

    assert [r.data for r in rr.next_records(room, 1)] == [b"0-0"]
    rr.remove(readers[1])
    assert [r.data for r in rr.next_records(room, 1)] == [b"0-1"]
    missing = reader_of(kinesalite, "no-such-stream", shard="shardId-000000000000")
    assert missing.poll() is None  # the error is kept for the consumer
    failed = RoundRobinReader(threads=0)
    failed.add([missing])
    with pytest.raises(KinesisError, match="no-such-stream"):
        failed.next_records(room, 1)
    assert missing.exhausted


def test_wait_returns_at_once_for_a_signal_given_before_it_and_otherwise_waits_its_timeout() -> None:
    rr = RoundRobinReader(threads=0)

    def waited(timeout_s: float) -> float:
        started = time.monotonic()
        rr.wait(timeout_s)
        return time.monotonic() - started

    assert waited(0.3) >= 0.3, "no signal: wait() must wait"
    rr.notify()
    assert waited(0) < 1.0
    assert waited(10.0) < 5.0, "a signal given before wait() was lost"
    assert waited(0.3) >= 0.3, "a signal wakes one wait only"
    rr.close()


def test_readers_share_the_round_robin_s_pool_of_threads_which_close_ends(kinesalite: KinesisEndpoint) -> None:
    rr = RoundRobinReader(threads=1)
    assert rr.pool is not None and rr.pool.size == 1
    before = set(threading.enumerate())
    readers = []
    for _ in range(2):
        stream = kinesalite.create_stream()
        kinesalite.put(stream, [b"x"], ["pk"])
        readers.append(reader_of(kinesalite, stream, pool=rr.pool, on_data=rr.notify))
    rr.add(readers)
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + TIMEOUT_S
    while not all(r.buffered for r in readers):
        assert time.monotonic() < deadline, "the records never arrived"
        rr.wait(0.2)
    started = set(threading.enumerate()) - before
    assert [t.name for t in started] == ["kinesis-readers-0"]
    rr.close()
    assert not any(t.is_alive() for t in started), "close() did not end the pool's thread"


def test_a_closed_shard_s_reader_ends_after_its_last_record_and_says_so(kinesalite: KinesisEndpoint) -> None:
    from kinesis_spout.testing.kinesis import wait_for_stream

    client = kinesalite.client()
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"a", b"b"], ["pk"] * 2)
    client.split_shard(StreamName=stream, ShardToSplit=placed[0][0], NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    signals: list[int] = []
    reader = reader_of(kinesalite, stream, shard=placed[0][0], on_data=lambda: signals.append(1))
    due = reader.poll()
    while due is not None:  # until the shard's end
        assert due != PARK and reader.calls < 10, f"no end after {reader.calls} calls"
        due = reader.poll()
    assert reader.ended and not reader.exhausted and signals, "the end was not signalled"
    assert [r.sequence_number for r in reader.take_upto(10, 1 << 30)] == [seq for _, seq in placed]
    assert reader.exhausted and reader.take_upto(10, 1 << 30) == []


def test_a_one_record_buffer_is_parked_when_full_and_woken_by_each_take(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(4)], ["pk"] * 4)
    reader = reader_of(kinesalite, stream, per_call=1, max_records=1)
    reader.start()
    taken: list[Record] = []
    try:
        for _ in range(4):
            deadline = time.monotonic() + TIMEOUT_S
            while not reader.parked:  # read one record, then found no room: parked, no thread spent on it
                assert time.monotonic() < deadline, f"not parked with {reader.buffered} buffered"
                time.sleep(0.02)
            chunk = reader.take_upto(10, 1 << 20) if len(taken) % 2 else reader.take_upto(1, 1)
            assert len(chunk) == 1
            taken += chunk
    finally:
        reader.close(5.0)
    assert [r.sequence_number for r in taken] == [seq for _, seq in placed]


def test_take_upto_takes_oldest_first_within_a_count_and_a_byte_budget_and_always_one_record(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(9)], ["pk"] * 9)
    size = len(b"r0") + len("pk")
    reader = reader_of(kinesalite, stream, per_call=9, max_bytes=9 * size)
    poll_pause(reader)
    assert reader.poll() == PARK
    chunks = [reader.take_upto(2, 100 * size), reader.take_upto(100, 2 * size + 1), reader.take_upto(100, 1),
              reader.take_upto(100, 0)]
    assert [len(c) for c in chunks] == [2, 3, 1, 0]
    assert reader.has_room() and reader.buffered == 3
    assert len(reader.take_upto(100, 3 * size)) == 3 and reader.take_upto(100, 100) == []
    refilled = reader_of(kinesalite, stream, per_call=9, max_bytes=9 * size)
    poll_pause(refilled)
    assert refilled.poll() == PARK and len(refilled.take_upto(100, 1 << 20)) == 9
    assert refilled.has_room(), "taking every record frees the whole byte budget"
    taken = [r.sequence_number for c in chunks for r in c]
    assert taken == [seq for _, seq in placed[:6]]
    missing = reader_of(kinesalite, "no-such-stream", shard="shardId-000000000000")
    assert missing.poll() is None
    with pytest.raises(KinesisError, match="no-such-stream"):
        missing.take_upto(10, 100)


def test_next_records_takes_a_chunk_of_one_shard_in_turn_within_the_room_each_shard_has(
        kinesalite: KinesisEndpoint) -> None:
    readers = shard_readers(kinesalite, [7, 0, 6])
    a = readers[0]
    rr = RoundRobinReader(threads=0)
    rr.add(readers)
    room = {r.shard_id: (100, 1 << 20) for r in readers}

    def take(n: int) -> list[str]:
        return [r.data.decode() for r in rr.next_records(lambda shard_id: room[shard_id], n)]

    assert take(2) == ["0-0", "0-1"]
    assert take(2) == ["2-0", "2-1"]
    assert take(2) == ["0-2", "0-3"], "the turn goes back to the first shard"
    room[a.shard_id] = (0, 1 << 20)  # no room for a record in flight: its turn is skipped
    assert take(2) == ["2-2", "2-3"]
    room[a.shard_id] = (5, 0)  # no room for a byte
    assert take(2) == ["2-4", "2-5"]
    room[a.shard_id] = (5, 1)  # one byte of room: one record, however big
    assert take(2) == ["0-4"]
    room[a.shard_id] = (1, 1 << 20)
    assert take(10) == ["0-5"]
    room[a.shard_id] = (5, 1 << 20)
    assert take(10) == ["0-6"] and take(10) == []
    missing = reader_of(kinesalite, "no-such-stream", shard="shardId-000000000000")
    assert missing.poll() is None
    rr.add([missing])
    room[missing.shard_id] = (5, 1 << 20)
    with pytest.raises(KinesisError, match="no-such-stream"):
        take(10)


def test_an_unexpected_exception_of_a_poll_is_kept_and_raised_by_take_as_an_error_naming_the_shard() -> None:
    # a getter without a client: its first call fails with an AttributeError, not a SpoutError
    getter = ShardGetter(None, "stream", "shardId-000000000003", TRIM_HORIZON)
    signalled = threading.Event()
    reader = BufferedShardReader(getter, max_records=10, max_bytes=1000, empty_backoff_s=0.0,
                                 on_data=signalled.set)
    assert reader.poll() is None, "a failed reader is done"
    assert signalled.is_set(), "the consumer must hear of the error"
    assert reader.exhausted
    for take in (lambda: reader.take_upto(5, 1 << 30), lambda: reader.take_upto(5, 1000),
                 lambda: reader.take_upto(1, 1)):
        with pytest.raises(KinesisError) as exc:
            take()
        assert str(exc.value).startswith("reader of shardId-000000000003 failed: AttributeError("), str(exc.value)
