"""ReaderPool scheduling without Kinesis: due times are kept, a parked reader costs nothing until woken, threads
stay bounded, close() stops them. The readers here are scripted Pollables (the pool's own interface); the pool
driving real BufferedShardReaders on kinesalite is tested in tests/integration/kinesis/test_reader_pool.py."""

from __future__ import annotations

import threading
import time

import pytest

from kinesis_spout.kinesis.retrieval.pool import PARK, ReaderPool
from kinesis_spout.testing.process import wait_until


class Scripted:
    """Returns the scripted answers of poll() in turn (None at the end), recording when each poll ran."""

    def __init__(self, shard_id: str, answers: list[float | str | None], room: bool = True) -> None:
        self.shard_id = shard_id
        self.parked = False
        self.answers = list(answers)
        self.room = room
        self.polled: list[float] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def poll(self) -> float | None:
        with self.lock:
            self.polled.append(time.monotonic())
            self.threads.add(threading.current_thread().name)
            answer = self.answers.pop(0) if self.answers else None
        if answer == "park":
            return PARK
        if isinstance(answer, str):  # "+0.3": that long from now
            return time.monotonic() + float(answer)
        return answer

    def has_room(self) -> bool:
        return self.room


def test_a_reader_is_polled_again_no_sooner_than_the_time_it_returned() -> None:
    pool = ReaderPool(2)
    reader = Scripted("s1", ["+0.3", "+0.3", None])
    try:
        pool.add(reader)
        assert wait_until(lambda: len(reader.polled) == 3, 5.0)
    finally:
        pool.close()
    gaps = [b - a for a, b in zip(reader.polled, reader.polled[1:])]
    assert all(gap >= 0.29 for gap in gaps), gaps


def test_a_parked_reader_is_not_polled_until_woken() -> None:
    pool = ReaderPool(1)
    reader = Scripted("s1", ["park", None], room=False)
    try:
        pool.add(reader)
        assert wait_until(lambda: reader.parked, 5.0)
        time.sleep(0.3)
        assert len(reader.polled) == 1  # parked: no thread polls it
        reader.room = True
        pool.wake(reader)
        assert wait_until(lambda: len(reader.polled) == 2, 5.0)
        assert not reader.parked
    finally:
        pool.close()


def test_a_reader_that_has_room_again_by_the_time_it_is_parked_is_polled_at_once() -> None:
    pool = ReaderPool(1)
    reader = Scripted("s1", ["park", None], room=True)  # room came back between its poll and the parking
    try:
        pool.add(reader)
        assert wait_until(lambda: len(reader.polled) == 2, 5.0)
        assert not reader.parked
    finally:
        pool.close()


class TakenDuringTheRoomCheck:
    """A reader whose buffer is full when polled, and whose consumer takes records on its own thread right after the
    pool's room check: it empties the buffer, reads the ``parked`` flag and, if set, wakes the pool, the way
    ``BufferedShardReader.take`` does. The room check waits until the consumer has read the flag, so the
    interleaving is forced, not hoped for."""

    shard_id = "s1"

    def __init__(self, pool: ReaderPool) -> None:
        self.pool = pool
        self.parked = False
        self.full = True
        self.polls = 0
        self.flag_read = threading.Event()
        self.saw_parked: bool | None = None
        self.consumer: threading.Thread | None = None

    def poll(self) -> float | None:
        self.polls += 1
        return PARK if self.polls == 1 else None

    def has_room(self) -> bool:
        room = not self.full
        if self.consumer is None:  # the pool's check after the PARK: the consumer takes records right now
            self.consumer = threading.Thread(target=self.take, name="consumer", daemon=True)
            self.consumer.start()
            assert self.flag_read.wait(5.0), "the consumer never ran"
        return room

    def take(self) -> None:
        self.full = False  # records taken: room again
        self.saw_parked = self.parked
        self.flag_read.set()
        if self.saw_parked:
            self.pool.wake(self)  # waits for the pool's lock, held by the parking thread


def test_a_take_right_after_the_room_check_of_a_parking_reader_wakes_it() -> None:
    """The park flag is set before the room check: a take() after the check sees the flag and wakes the reader.
    Set after the check, the take() sees no flag, nobody wakes the reader, and its shard stalls for good."""
    pool = ReaderPool(1)
    reader = TakenDuringTheRoomCheck(pool)
    try:
        pool.add(reader)
        assert wait_until(lambda: reader.polls == 2, 5.0), \
            f"the parked reader was never polled again (the consumer saw parked={reader.saw_parked}): a stall"
        assert reader.saw_parked is True and not reader.parked
    finally:
        pool.close()
        if reader.consumer is not None:
            reader.consumer.join(5.0)


def test_many_readers_share_at_most_the_pools_threads_and_each_is_polled() -> None:
    pool = ReaderPool(3, name="test-readers")
    readers = [Scripted(f"s{i}", ["+0.05"] * 4) for i in range(50)]
    try:
        for reader in readers:
            pool.add(reader)
        assert wait_until(lambda: all(len(r.polled) == 5 for r in readers), 10.0)
        assert pool.threads <= 3
        used = set().union(*(r.threads for r in readers))
        assert used <= {f"test-readers-{i}" for i in range(3)}
        assert pool.polls == 250
    finally:
        pool.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("test-readers-")]


def test_a_pool_at_rest_wakes_about_two_threads_per_poll_not_all_of_them() -> None:
    """16 idle readers polled every 100 ms on 8 threads (a due reader every 6 ms or so, each poll instant): one
    thread times the next due reader and the rest sleep until notified (about 2 wake-ups per poll). When every idle
    thread timed the first reader, as before, it was about 4.5."""
    class SlowFirst(Scripted):  # a first poll that keeps its thread busy: the pool starts all its threads
        def poll(self) -> float | None:
            if not self.polled:
                time.sleep(0.2)
            return super().poll()

    pool = ReaderPool(8)
    # every 100 ms, their due times spread over those 100 ms
    readers = [SlowFirst(f"s{i}", [f"+{0.1 + i * 0.00625}"] + ["+0.1"] * 100) for i in range(16)]
    try:
        for reader in readers:
            pool.add(reader)
        assert wait_until(lambda: pool.polls >= 50, 10.0)
        assert pool.threads == 8
        polls, wakeups = pool.polls, pool.wakeups
        assert wait_until(lambda: pool.polls >= polls + 200, 10.0)
        per_poll = (pool.wakeups - wakeups) / (pool.polls - polls)
    finally:
        pool.close()
    assert per_poll <= 3.0, f"{per_poll:.1f} thread wake-ups per poll"


def test_one_reader_is_never_polled_by_two_threads_at_once() -> None:
    pool = ReaderPool(4)
    inside = threading.Semaphore(1)
    overlaps: list[str] = []

    class Slow(Scripted):
        def poll(self) -> float | None:
            if not inside.acquire(blocking=False):
                overlaps.append(self.shard_id)
                return None
            try:
                time.sleep(0.01)
                return super().poll()
            finally:
                inside.release()

    reader = Slow("s1", [0.0] * 30)  # due at once, every time
    try:
        pool.add(reader)
        pool.add(Scripted("s2", [0.0] * 30))
        assert wait_until(lambda: len(reader.polled) == 31, 10.0)
    finally:
        pool.close()
    assert overlaps == []


def test_close_stops_the_threads_and_later_adds_do_nothing() -> None:
    pool = ReaderPool(2, name="closing-readers")
    reader = Scripted("s1", ["+0.05"] * 1000)
    pool.add(reader)
    assert wait_until(lambda: len(reader.polled) >= 2, 5.0)
    pool.close()
    pool.close()  # idempotent
    polled = len(reader.polled)
    pool.add(Scripted("s2", []))
    time.sleep(0.2)
    assert len(reader.polled) == polled
    assert not [t for t in threading.enumerate() if t.name.startswith("closing-readers-")]


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        ReaderPool(0)
