"""The checkpoint writer against real stores (memory and ZooKeeper) that fail a write on purpose, and the spout's
last flush on close against a memory store that, like a real one, refuses writes once closed."""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointError,
    InitialPosition,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
    ZooKeeperCheckpointStore,
)
from kinesis_spout.checkpoint.writer import CheckpointWriter
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spout import drain

SHARD = "shardId-000000000000"
TIMEOUT_S = 10.0


class _Faults:
    """A fault script shared by the store subclasses below: the first ``fail`` saves raise a retriable
    ``CheckpointError``; while ``gate`` is set to an unset Event, a save waits for it first (so a test can offer
    more while the write is under way). ``attempts`` lists every sequence number a save was tried with."""

    def __init__(self, fail: int = 0, gate: threading.Event | None = None) -> None:
        self.fail = fail
        self.gate = gate
        self.entered = threading.Event()
        self.attempts: list[str | None] = []
        self.stored: list[str | None] = []  # successful saves, in order
        self._lock = threading.Lock()

    def before_save(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            self.attempts.append(checkpoint.sequence_number)
        self.entered.set()
        gate = self.gate
        if gate is not None and not gate.wait(TIMEOUT_S):
            raise CheckpointError("test gate never opened", retriable=False)
        with self._lock:
            if self.fail > 0:
                self.fail -= 1
                raise CheckpointError(f"injected retriable failure saving {checkpoint.sequence_number}",
                                      retriable=True)

    def after_save(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            self.stored.append(checkpoint.sequence_number)


class FaultyMemoryStore(MemoryCheckpointStore):
    """A memory store whose saves follow a :class:`_Faults` script."""

    def __init__(self, faults: _Faults) -> None:
        super().__init__()
        self.faults = faults

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.faults.before_save(checkpoint)
        super().save(checkpoint, force=force)
        self.faults.after_save(checkpoint)


class FaultyZooKeeperStore(ZooKeeperCheckpointStore):
    """A ZooKeeper store (connected, so the writer does not wait for a connection) whose saves follow a
    :class:`_Faults` script."""

    faults: _Faults

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.faults.before_save(checkpoint)
        super().save(checkpoint, force=force)
        self.faults.after_save(checkpoint)


Store = MemoryCheckpointStore | ZooKeeperCheckpointStore
MakeStore = Callable[[_Faults], Store]


@pytest.fixture(params=["memory", "zookeeper"])
def make_store(request: pytest.FixtureRequest) -> Iterator[MakeStore]:
    """A factory of opened faulty stores, of each kind; closed after the test."""
    opened: list[Store] = []
    zookeeper = request.getfixturevalue("zookeeper") if request.param == "zookeeper" else None

    def make(faults: _Faults) -> Store:
        store: Store
        if zookeeper is None:
            store = FaultyMemoryStore(faults)
        else:
            store = FaultyZooKeeperStore(zookeeper.hosts, f"{zookeeper.prefix}/app/stream/checkpoints")
            store.faults = faults
        store.open()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _writer(store: Store) -> CheckpointWriter:
    writer = CheckpointWriter(store, 0.0, "me", deadline_s=TIMEOUT_S)
    writer.start()
    return writer


def test_a_retriable_write_failure_is_retried_until_the_value_is_stored(make_store: MakeStore) -> None:
    """A write that failed with a retriable error is not counted as written: the value stays pending and lands."""
    faults = _Faults(fail=1)
    store = make_store(faults)
    writer = _writer(store)
    try:
        writer.offer(Checkpoint(SHARD, "10"))
        assert writer.flush(TIMEOUT_S), "the flush did not finish"
        stored = store.load(SHARD)  # flush() returned: nothing pending, no write under way
    finally:
        writer.close()
    assert stored is not None and stored.sequence_number == "10", "the failed write was never retried"
    assert faults.attempts == ["10", "10"]  # failed once, then retried
    assert faults.stored == ["10"]
    assert writer.failures == 1 and writer.writes == 1
    assert writer.written[SHARD].sequence_number == "10"


def test_a_failed_write_never_replaces_a_newer_value_offered_meanwhile(make_store: MakeStore) -> None:
    """While the write of 10 is under way 20 is offered; 10 then fails: 20 is written, 10 is never stored."""
    gate = threading.Event()
    faults = _Faults(fail=1, gate=gate)
    store = make_store(faults)
    writer = _writer(store)
    try:
        writer.offer(Checkpoint(SHARD, "10"))
        assert faults.entered.wait(TIMEOUT_S), "the writer never tried to save 10"
        writer.offer(Checkpoint(SHARD, "20"))  # newer, offered while the save of 10 is under way
        gate.set()  # now the save of 10 fails (retriably)
        assert writer.flush(TIMEOUT_S), "the flush did not finish"
    finally:
        writer.close()
    assert faults.attempts[0] == "10"
    assert faults.stored == ["20"], f"successful saves: {faults.stored}"
    assert store.load(SHARD).sequence_number == "20"


# -- offers made when due: offer_latest -------------------------------------------------------------------------


class _Latest:
    """A shard's checkpoint as the spout keeps it: ``value`` moves on each ack; ``__call__`` is what the writer
    calls when the shard is due (the newest value once, then None until it moves again). Records on which thread
    it ran and whether it could take the writer's lock meanwhile (it must be called without it)."""

    def __init__(self, writer: CheckpointWriter) -> None:
        self.writer = writer
        self.value = 0
        self.given = 0
        self.calls = 0
        self.threads: set[str] = set()
        self.lock_free = True

    def __call__(self) -> Checkpoint | None:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        got: list[bool] = []

        def offer_meanwhile() -> None:  # as the spout does, holding its own lock: the writer's must be free
            got.append(self.writer._cond.acquire(timeout=2.0))
            if got[0]:
                self.writer._cond.release()

        probe = threading.Thread(target=offer_meanwhile)
        probe.start()
        probe.join()
        self.lock_free = self.lock_free and got == [True]
        if self.value == self.given:
            return None
        self.given = self.value
        return Checkpoint(SHARD, str(self.value))


def test_offer_latest_writes_the_value_current_when_the_shard_is_due_once_per_interval(
        make_store: MakeStore) -> None:
    """A thousand offers in one interval make no checkpoint: the writer asks for the value when the shard is due,
    on its own thread and without its lock, and writes the newest one; an offer with nothing new writes nothing."""
    faults = _Faults()
    store = make_store(faults)
    writer = CheckpointWriter(store, 600.0, "me", deadline_s=TIMEOUT_S)
    latest = _Latest(writer)
    writer.start()
    try:
        latest.value = 1
        writer.offer_latest(SHARD, latest)  # first offer of the shard: due at once
        assert wait_until(lambda: faults.stored == ["1"], TIMEOUT_S)
        for value in range(2, 1002):  # acks within the interval: each offer a look-up, no value made
            latest.value = value
            writer.offer_latest(SHARD, latest)
        assert latest.calls == 1 and faults.stored == ["1"]
        assert writer.flush(TIMEOUT_S)
        assert faults.stored == ["1", "1001"] and latest.calls == 2
        writer.offer_latest(SHARD, latest)  # nothing moved since
        assert writer.flush(TIMEOUT_S)
        assert faults.stored == ["1", "1001"] and latest.calls == 3 and writer.writes == 2
    finally:
        writer.close()
    assert latest.threads == {"kinesis-checkpoint-writer"} and latest.lock_free
    assert store.load(SHARD).sequence_number == "1001"


def test_a_look_that_found_nothing_new_counts_as_a_write_for_the_interval() -> None:
    """Acks that do not move the checkpoint (out of order) still mark the shard: the writer's look that finds
    nothing new waits out the interval like a write, instead of taking the caller's lock again on every ack."""
    faults = _Faults()
    store = FaultyMemoryStore(faults)
    store.open()
    writer = CheckpointWriter(store, 0.5, "me", deadline_s=TIMEOUT_S)
    latest = _Latest(writer)
    writer.start()
    try:
        latest.value = 1
        writer.offer_latest(SHARD, latest)
        assert wait_until(lambda: faults.stored == ["1"], TIMEOUT_S)
        time.sleep(0.6)  # the interval after the write has passed
        writer.offer_latest(SHARD, latest)  # an ack that moved nothing
        assert wait_until(lambda: latest.calls == 2, TIMEOUT_S)  # looked at once: nothing new
        writer.offer_latest(SHARD, latest)  # another one at once: not due for another interval
        time.sleep(0.2)
        assert latest.calls == 2, "the shard was looked at again before its interval"
        latest.value = 2
        assert wait_until(lambda: faults.stored == ["1", "2"], TIMEOUT_S)  # due after the interval: written
    finally:
        writer.close()
        store.close()


def test_offer_latest_replaces_a_pending_value_and_a_failing_call_spares_the_other_shards(
        make_store: MakeStore) -> None:
    faults = _Faults(gate=threading.Event())
    store = make_store(faults)
    writer = _writer(store)
    latest = _Latest(writer)

    def broken() -> Checkpoint | None:
        raise RuntimeError("a bug in the caller")

    try:
        writer.offer(Checkpoint("other", "1"))
        assert faults.entered.wait(TIMEOUT_S)  # the writer is busy with "other": what follows stays pending
        writer.offer(Checkpoint(SHARD, "5"))
        latest.value = 7
        writer.offer_latest(SHARD, latest)  # replaces 5
        writer.offer_latest("broken", broken)
        assert faults.gate is not None
        faults.gate.set()
        assert writer.flush(TIMEOUT_S)
    finally:
        writer.close()
    assert sorted(faults.stored) == ["1", "7"], f"successful saves: {faults.stored}"
    assert store.load("broken") is None and store.load(SHARD).sequence_number == "7"


# -- the spout's last flush on close ----------------------------------------------------------------------------


def _close_flushes_before_releasing_the_store(endpoint: KinesisEndpoint, spout_class: type[KinesisSpout]) -> None:
    """The body of the test below. The spout class is an argument so that a subclass that releases the store
    before close() flushes can show that this test catches that order."""
    stream = endpoint.create_stream(shards=1)
    placed = endpoint.put(stream, [f"c{i}".encode() for i in range(20)])
    store = MemoryCheckpointStore()
    config = SpoutConfig(stream_name=stream, app_name="tests", endpoint_url=endpoint.endpoint_url,
                         region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=600.0)
    with spout_class(config, store) as spout:
        assert len(drain(spout, 10)) == 10
        assert wait_until(lambda: store.writes == 1, TIMEOUT_S), "the first advance is written at once"
        assert len(drain(spout, 10)) == 10  # this advance waits for the (long) interval: only close() writes it
        assert store.writes == 1
    assert store.closed
    assert spout.checkpoint_errors is None, f"the last flush failed: {spout.checkpoint_errors}"
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]
    with KinesisSpout(config, store) as again:  # a restart sharing the store reopens it and resumes after 20
        assert again.next_batch(max_records=10, timeout_s=1.0) == []
        assert not store.closed


def test_close_flushes_the_last_checkpoint_before_closing_the_store(moto_kinesis: KinesisEndpoint) -> None:
    """close() writes the newest safe checkpoint first and only then releases the store."""
    _close_flushes_before_releasing_the_store(moto_kinesis, KinesisSpout)


def test_a_flush_of_one_shard_completes_while_other_shards_keep_offering_and_leaves_their_interval_alone(
        make_store: MakeStore) -> None:
    """What a hand-over waits on: one shard's checkpoint stored. Sixteen other shards keep offering (a busy
    consumer acking) while it waits; the wait ends once that shard's value is stored, and the others are still
    written once per interval, not all at once."""
    store = make_store(_Faults())
    writer = CheckpointWriter(store, 1.0, "me", deadline_s=TIMEOUT_S)
    writer.start()
    stop = threading.Event()
    busy = [f"busy{i}" for i in range(16)]

    def acks() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            for shard in busy:
                writer.offer(Checkpoint(shard, str(n), None))
            stop.wait(0.005)

    thread = threading.Thread(target=acks, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: writer.writes >= len(busy), TIMEOUT_S)  # each busy shard's first write
        before = writer.writes
        writer.offer(Checkpoint("handed", "42", None))
        t0 = time.monotonic()
        assert writer.flush_shard("handed", 5.0), "the hand-over's checkpoint was never reported stored"
        took = time.monotonic() - t0
        assert writer.written["handed"].sequence_number == "42"
        assert store.load("handed") is not None and store.load("handed").sequence_number == "42"  # type: ignore[union-attr]
        assert took < 1.0, f"the flush of one shard took {took:.1f} s"
        assert writer.writes - before <= len(busy) * (int(took) + 1) + 1, "the flush made every shard due at once"
    finally:
        stop.set()
        thread.join()
        writer.close(2.0)


def test_a_flush_of_one_shard_is_false_while_its_write_fails_and_true_once_it_is_stored(
        make_store: MakeStore) -> None:
    """A failed write of the shard keeps it unstored: the flush says so (the hand-over keeps the lease); once a
    retry succeeds, a flush says stored. A shard with nothing pending is stored as far as the writer knows."""
    faults = _Faults(fail=1_000_000)
    store = make_store(faults)
    writer = _writer(store)
    try:
        assert writer.flush_shard(SHARD, 0.5), "a shard never offered has nothing to wait for"
        writer.offer(Checkpoint(SHARD, "7", None))
        assert not writer.flush_shard(SHARD, 0.5)
        assert faults.attempts and store.load(SHARD) is None
        faults.fail = 0
        assert writer.flush_shard(SHARD, TIMEOUT_S)
        assert store.load(SHARD) is not None and store.load(SHARD).sequence_number == "7"  # type: ignore[union-attr]
    finally:
        writer.close(2.0)


# -- a failed write under offer_latest ---------------------------------------------------------------------------


class _Once:
    """A shard's checkpoint as the spout gives it to ``offer_latest``: each call returns the changes since the
    previous call, so the next value of ``values`` once, then None (nothing new) for ever."""

    def __init__(self, *values: Checkpoint) -> None:
        self.values = list(values)
        self.calls = 0

    def __call__(self) -> Checkpoint | None:
        self.calls += 1
        return self.values.pop(0) if self.values else None


def _fail_while_offered_again(make_store: MakeStore, fail: int, first: Checkpoint, *later: Checkpoint,
                              ) -> tuple[_Faults, Store, CheckpointWriter, _Once]:
    """The writer makes ``first`` from an ``offer_latest`` callable and tries to save it; while the save is under
    way the spout offers the shard again (an ack), then the save fails: the callable, asked again, has only
    ``later`` (or nothing) to give."""
    gate = threading.Event()
    faults = _Faults(fail=fail, gate=gate)
    store = make_store(faults)
    writer = _writer(store)
    latest = _Once(first, *later)
    writer.offer_latest(SHARD, latest)
    assert faults.entered.wait(TIMEOUT_S), "the writer never tried to save the first value"
    writer.offer_latest(SHARD, latest)  # offered again while the save is under way
    gate.set()  # now the save fails (retriably)
    return faults, store, writer, latest


def _stored(store: Store) -> Checkpoint | None:
    return store.load(SHARD)


def test_a_failed_write_is_retried_when_the_next_look_finds_nothing_new(make_store: MakeStore) -> None:
    """The callable gave 10 once; its save failed; asked again it has nothing new: 10 is still written."""
    faults, store, writer, latest = _fail_while_offered_again(make_store, 1, Checkpoint(SHARD, "10"))
    try:
        assert wait_until(lambda: (_stored(store) or Checkpoint(SHARD, None)).sequence_number == "10", TIMEOUT_S), \
            f"the failed value was never retried: saves tried {faults.attempts}, stored {faults.stored}"
        assert writer.flush(TIMEOUT_S)
    finally:
        writer.close()
    assert faults.attempts == ["10", "10"] and faults.stored == ["10"]
    assert latest.calls >= 2  # the writer did ask for something newer


def test_a_failed_shard_end_is_not_settled_until_it_is_stored(make_store: MakeStore) -> None:
    """The failed value is the shard's end and the checkpoint never moves again: the shard is not settled (a
    hand-over's flush says so) while its saves fail, and its end is stored once the store takes writes again."""
    end = Checkpoint(SHARD, "10", shard_end=True)
    faults, store, writer, _ = _fail_while_offered_again(make_store, 1_000_000, end)
    try:
        assert not writer.flush_shard(SHARD, 0.5), "a shard whose end was never stored was reported settled"
        assert _stored(store) is None
        faults.fail = 0
        assert writer.flush_shard(SHARD, TIMEOUT_S), "the shard end was never retried"
        stored = _stored(store)
        assert stored is not None and stored.shard_end and stored.sequence_number == "10"
    finally:
        writer.close(2.0)


def test_a_newer_value_made_after_a_failed_write_supersedes_it(make_store: MakeStore) -> None:
    """The save of 10 failed; asked again the callable gives 20: 20 is written, 10 never is."""
    faults, store, writer, _ = _fail_while_offered_again(make_store, 1, Checkpoint(SHARD, "10"),
                                                         Checkpoint(SHARD, "20"))
    try:
        assert writer.flush(TIMEOUT_S)
        assert wait_until(lambda: (_stored(store) or Checkpoint(SHARD, None)).sequence_number == "20", TIMEOUT_S)
    finally:
        writer.close()
    assert faults.attempts == ["10", "20"] and faults.stored == ["20"]
