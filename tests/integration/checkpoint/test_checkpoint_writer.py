"""The checkpoint writer against real stores (memory and ZooKeeper) that fail, refuse or lose their connection on
purpose: each shard is written at once, then once per interval with its newest value; a failed write is retried
with a growing pause and never replaces a newer value; a store that stays down past the deadline is an error that
clears once it is back; a conflict goes to the handler; after a lost ZooKeeper session the writer reads the store
again and reports the shards another owner moved past it; flush and close never hang on a stuck store and end the
writer's one named thread. Also the spout's last flush on close, against a memory store that, like a real one,
refuses writes once closed."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import (
    Checkpoint,
    CheckpointConflict,
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
TIMEOUT_S = 20.0  # a bound on every wait: generous, the machine may be busy


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


def test_a_flush_of_several_shards_writes_them_all_now_and_says_which_are_stored(make_store: MakeStore) -> None:
    """A round's hand-overs wait on their shards together: every one of them is due at once (an hour's interval
    would otherwise hold all but the first), and the flush says which are stored (a shard never offered is)."""
    store = make_store(_Faults())
    writer = CheckpointWriter(store, 3600.0, "me", deadline_s=TIMEOUT_S)
    writer.start()
    try:
        shards = [f"moving{i}" for i in range(4)]
        for shard in shards:  # each shard's first write goes at once: offer a second value to have one pending
            writer.offer(Checkpoint(shard, "1", None))
        assert wait_until(lambda: writer.writes >= len(shards), TIMEOUT_S)
        for shard in shards:
            writer.offer(Checkpoint(shard, "2", None))
        assert writer.flush_shards([*shards, "never-offered"], TIMEOUT_S) == {*shards, "never-offered"}
        assert all(store.load(s).sequence_number == "2" for s in shards)  # type: ignore[union-attr]
    finally:
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
        assert wait_until(lambda: getattr(_stored(store), "sequence_number", None) == "10", TIMEOUT_S), \
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
        assert wait_until(lambda: getattr(_stored(store), "sequence_number", None) == "20", TIMEOUT_S)
    finally:
        writer.close()
    assert faults.attempts == ["10", "20"] and faults.stored == ["20"]


class FailingStore(MemoryCheckpointStore):
    """Every save fails (retriable); each attempt first notes whether the writer had declared the store
    unreachable by then."""

    def __init__(self) -> None:
        super().__init__()
        self.writer: CheckpointWriter | None = None
        self.unreachable_at_attempt: list[bool] = []

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        assert self.writer is not None
        self.unreachable_at_attempt.append(self.writer.unreachable is not None)
        raise CheckpointError(f"injected failure saving {checkpoint.sequence_number}", retriable=True)


class DisconnectedStore(MemoryCheckpointStore):
    """A store that says its connection is down (as the ZooKeeper store does while SUSPENDED) until ``up`` is
    set; ``wait_connected`` blocks like the real one."""

    def __init__(self) -> None:
        super().__init__()
        self.up = threading.Event()
        self.failed_waits = 0  # waits (not quick checks) that ended with the connection still down

    def wait_connected(self, timeout_s: float) -> bool:
        up = self.up.wait(timeout_s)
        if not up and timeout_s > 0:
            self.failed_waits += 1
        return up


def started(store: Any, deadline_s: float, **kw: Any) -> CheckpointWriter:
    writer = CheckpointWriter(store, 0.0, "me", deadline_s=deadline_s, **kw)
    writer.start()
    return writer


def test_the_deadline_is_reached_at_the_first_failure_past_it_with_the_write_error_as_cause() -> None:
    store = FailingStore()
    writer = started(store, 0.0)
    store.writer = writer
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: len(store.unreachable_at_attempt) >= 2, TIMEOUT_S)
        assert store.unreachable_at_attempt[:2] == [False, True]
        error = writer.unreachable
        assert isinstance(error, CheckpointError) and error.retriable is True
        message = str(error)
        assert "checkpoints could not be written for 0 s (deadline 0 s): injected failure saving 7. " in message
        assert "Nothing is lost" in message and "zookeeper_deadline_s" in message
        assert writer.failures >= 2 and str(writer.last_error) == "injected failure saving 7"
    finally:
        writer.close(0.5)


def test_no_error_before_the_deadline() -> None:
    store = FailingStore()
    writer = started(store, 60.0)
    store.writer = writer
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: len(store.unreachable_at_attempt) >= 3, TIMEOUT_S)
        assert store.unreachable_at_attempt[:3] == [False, False, False]
        assert writer.unreachable is None
    finally:
        writer.close(0.5)


def test_a_lost_connection_past_the_deadline_is_an_error_without_a_cause_that_clears_when_it_is_back(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout.checkpoint")
    store = DisconnectedStore()
    writer = started(store, 0.0)
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: writer.unreachable is not None, TIMEOUT_S)
        message = str(writer.unreachable)
        assert "(deadline 0 s). Nothing is lost" in message, message
        assert writer.last_error is None and writer.writes == 0
        # each wait for the connection that ends without it counts as one failed write
        assert wait_until(lambda: store.failed_waits >= 2 and writer.failures == store.failed_waits, TIMEOUT_S), \
            (writer.failures, store.failed_waits)
        store.up.set()
        assert wait_until(lambda: writer.writes == 1 and writer.unreachable is None, TIMEOUT_S)
        assert store.load("a") is not None and store.load("a").owner == "me"  # type: ignore[union-attr]
        for value in ("8", "9"):
            writer.offer(Checkpoint("a", value))
            assert writer.flush(TIMEOUT_S)
    finally:
        writer.close(2.0)
    again = [r for r in caplog.records if r.getMessage() == "checkpoints are being written again"]
    assert len(again) == 1, "said once, when the writes came back"


def test_close_with_the_store_down_gives_up_and_ends_the_writer_s_thread() -> None:
    store = DisconnectedStore()
    writer = CheckpointWriter(store, 0.0, "me")
    before = writer_threads()
    writer.start()
    (thread,) = writer_threads() - before
    writer.offer(Checkpoint("a", "7"))
    writer.close(1.0)
    thread.join(TIMEOUT_S)
    assert not thread.is_alive(), "the writer kept waiting for a connection after close()"
    assert store.load("a") is None


def expire_session(hosts: str, store: ZooKeeperCheckpointStore) -> None:
    """Expire the store's session: open and close a second client with its session id and password."""
    from kazoo.client import KazooClient

    client_id = store.session.client_id  # kazoo's (session id, password)
    assert client_id is not None, "the store is not connected"
    session_id, password = client_id
    twin = KazooClient(hosts=hosts, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def test_after_a_lost_session_the_writer_reports_exactly_the_shards_another_owner_moved_past_it(zookeeper: Any) -> None:
    path = f"{zookeeper.prefix}/app/stream/checkpoints"
    store = ZooKeeperCheckpointStore(zookeeper.hosts, path, session_timeout_s=4.0)
    store.open()
    other = ZooKeeperCheckpointStore(zookeeper.hosts, path)
    other.open()
    conflicts: list[CheckpointConflict] = []
    writer = started(store, TIMEOUT_S, on_conflict=conflicts.append)
    try:
        for shard in ("taken", "mine-again", "deleted", "untouched", "anonymous"):
            writer.offer(Checkpoint(shard, "10"))
        assert wait_until(lambda: writer.writes == 5, TIMEOUT_S), "the first writes"
        other.save(Checkpoint("taken", "25").stamped("another-worker"))
        other.save(Checkpoint("mine-again", "25").stamped("me"))  # our own owner name: not a takeover
        other.delete("deleted")
        other.save(Checkpoint("anonymous", "30"))  # no owner recorded
        expire_session(zookeeper.hosts, store)
        assert wait_until(lambda: store.session_losses == 1 and store.connected, TIMEOUT_S), "a new session"
        writer.offer(Checkpoint("new", "5"))  # the next write re-reads the store first
        assert wait_until(lambda: writer.writes == 6, TIMEOUT_S), "the write after the lost session"
        assert writer.flush(5.0)
        reported = sorted(str(c) for c in conflicts)
        assert len(reported) == 2 and writer.conflicts == 2, reported
        assert reported[0].startswith("checkpoint of anonymous was moved to 30 by unknown while our ZooKeeper "
                                      "session was lost (we had written 10)"), reported[0]
        assert reported[1].startswith("checkpoint of taken was moved to 25 by another-worker while"), reported[1]
        assert isinstance(writer.last_error, CheckpointConflict)
        assert other.load("taken").sequence_number == "25"  # type: ignore[union-attr]
    finally:
        writer.close(5.0)
        store.close()
        other.close()


class RecordingStore(MemoryCheckpointStore):
    """A memory store that notes every save (sequence number and when it happened); while ``gate`` is cleared, a
    save waits for it first (``entered`` is set when one does), so a test can hold a write under way."""

    def __init__(self) -> None:
        super().__init__()
        self.saves: list[tuple[str | None, float]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.entered.set()
        assert self.gate.wait(TIMEOUT_S), "the test never opened the gate"
        super().save(checkpoint, force=force)
        self.saves.append((checkpoint.sequence_number, time.monotonic()))

    def values(self) -> list[str | None]:
        return [value for value, _ in self.saves]


def writer_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "kinesis-checkpoint-writer"}


def start_writer(store: RecordingStore, interval_s: float) -> tuple[CheckpointWriter, threading.Thread]:
    """A started writer and its thread."""
    writer = CheckpointWriter(store, interval_s, "me")
    before = writer_threads()
    writer.start()
    started = writer_threads() - before
    assert len(started) == 1, f"threads started: {started}"
    return writer, started.pop()


def test_the_writer_runs_on_one_named_daemon_thread_that_close_ends() -> None:
    store = RecordingStore()
    writer, thread = start_writer(store, 0.0)
    others = writer_threads()
    writer.start()  # idempotent: no second thread
    assert writer_threads() == others
    assert thread.daemon, "a spout never closed would keep the process from exiting"
    assert writer.flush(2.0) is True  # nothing offered: nothing to wait for
    writer.offer(Checkpoint("a", "5"))
    writer.close(5.0)
    assert store.values() == ["5"] and store.load("a").owner == "me"  # type: ignore[union-attr]
    assert not thread.is_alive(), "close() did not end the writer's thread"
    writer.close(5.0)  # idempotent


def test_a_shard_is_written_at_once_then_once_per_interval_with_its_newest_value_and_flush_writes_it_now() -> None:
    store = RecordingStore()
    writer = CheckpointWriter(store, 600.0, "me")
    writer.start()
    try:
        writer.offer(Checkpoint("a", "1"))
        assert wait_until(lambda: store.values() == ["1"], TIMEOUT_S), "a shard's first value is written at once"
        writer.offer(Checkpoint("a", "2"))
        writer.offer(Checkpoint("a", "3"))
        time.sleep(0.5)
        assert store.values() == ["1"], "written again within the interval"
        assert writer.flush(0.5) is True  # a short flush still waits for the write it asks for
        assert store.values() == ["1", "3"], "the flush wrote something else than the newest value"
        writer.offer(Checkpoint("a", "4"))
        time.sleep(0.5)
        assert store.values() == ["1", "3"], "after a flush the interval no longer applies"
        assert writer.writes == 2 and writer.written["a"].sequence_number == "3"
    finally:
        writer.close(5.0)
    assert store.values() == ["1", "3", "4"], "close() did not write the last value"


def test_a_value_offered_within_the_interval_is_written_when_the_interval_is_up_without_a_flush() -> None:
    interval = 0.3
    store = RecordingStore()
    writer = CheckpointWriter(store, interval, "me")
    writer.start()
    try:
        writer.offer(Checkpoint("a", "1"))
        assert wait_until(lambda: store.values() == ["1"], TIMEOUT_S)
        writer.offer(Checkpoint("a", "2"))
        assert wait_until(lambda: store.values() == ["1", "2"], TIMEOUT_S), "the writer never woke up to write it"
        (_, first), (_, second) = store.saves
        assert second - first >= interval, f"written again after {second - first:.3f} s"
    finally:
        writer.close(5.0)


def test_flush_waits_for_the_write_under_way_until_its_timeout_and_close_does_not_hang_on_a_stuck_store() -> None:
    store = RecordingStore()
    store.gate.clear()
    writer = CheckpointWriter(store, 0.0, "me")
    writer.start()
    releaser = threading.Timer(3.0, store.gate.set)  # a flush or close that waits on the stuck write ends then
    releaser.start()
    try:
        writer.offer(Checkpoint("a", "1"))
        assert store.entered.wait(TIMEOUT_S), "the writer never tried to save"
        assert writer.flush(0.3) is False, "flush returned while the write was still under way"
        writer.close(0.3)
        assert not store.gate.is_set(), "close() waited for the stuck write instead of its timeout"
    finally:
        releaser.cancel()
        store.gate.set()
    assert wait_until(lambda: store.values() == ["1"], TIMEOUT_S), "the write under way was lost"


def test_close_writes_the_pending_value_of_a_shard_not_due_yet_even_when_its_flush_has_no_time_left() -> None:
    store = RecordingStore()
    writer, thread = start_writer(store, 600.0)
    writer.offer(Checkpoint("a", "1"))
    assert wait_until(lambda: store.values() == ["1"], TIMEOUT_S)
    writer.offer(Checkpoint("a", "2"))  # not due for 600 s
    writer.close(0.0)  # no time to flush: the thread still writes what is pending before it ends
    thread.join(TIMEOUT_S)
    assert store.values() == ["1", "2"]


class FlakyStore(RecordingStore):
    """A recording store whose saves fail (retriable) at the attempts numbered in ``failing`` (from 1)."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.failing = failing
        self.attempts = 0

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.attempts += 1
        if self.attempts in self.failing:
            raise CheckpointError(f"injected failure of attempt {self.attempts}", retriable=True)
        super().save(checkpoint, force=force)


def test_a_write_failing_after_earlier_successes_is_retried_too(caplog: pytest.LogCaptureFixture) -> None:
    store = FlakyStore(failing={2, 4})
    writer = CheckpointWriter(store, 0.0, "me")
    writer.start()
    try:
        for value in ("1", "2", "3"):
            writer.offer(Checkpoint("a", value))
            assert writer.flush(TIMEOUT_S), f"{value} was not written"
    finally:
        writer.close(5.0)
    assert store.values() == ["1", "2", "3"] and store.attempts == 5
    assert (writer.writes, writer.failures) == (3, 2)
    failed = [(r.levelname, r.getMessage()) for r in caplog.records if "checkpoint write of a failed" in r.getMessage()]
    assert failed == [("WARNING", f"checkpoint write of a failed (will retry): injected failure of attempt {n}")
                      for n in (2, 4)]


def test_a_failing_store_is_retried_with_a_growing_pause_not_in_a_tight_loop() -> None:
    store = FailingStore()
    writer = started(store, 60.0)
    store.writer = writer
    try:
        writer.offer(Checkpoint("a", "7"))
        time.sleep(1.2)  # pauses of 0.1, 0.2, 0.4, 0.8 s: at most 5 attempts by now, whatever the load
        attempts = len(store.unreachable_at_attempt)
        assert 1 <= attempts <= 6, f"{attempts} attempts in 1.2 s"
    finally:
        writer.close(0.5)


def test_concurrent_flushes_leave_the_interval_in_force_afterwards() -> None:
    store = RecordingStore()
    store.gate.clear()
    writer = CheckpointWriter(store, 600.0, "me")
    writer.start()
    try:
        writer.offer(Checkpoint("a", "1"))
        assert store.entered.wait(TIMEOUT_S)
        results: list[bool] = []
        flushers = [threading.Thread(target=lambda: results.append(writer.flush(TIMEOUT_S))) for _ in range(2)]
        for flusher in flushers:
            flusher.start()
        time.sleep(0.3)  # both flushes wait for the write under way
        store.gate.set()
        for flusher in flushers:
            flusher.join(TIMEOUT_S)
        assert results == [True, True]
        writer.offer(Checkpoint("a", "2"))
        time.sleep(0.5)
        assert store.values() == ["1"], "after the flushes the interval no longer applies"
    finally:
        store.gate.set()
        writer.close(5.0)


def test_a_conflict_is_reported_to_the_handler_and_its_value_dropped_not_retried(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout.checkpoint")
    store = RecordingStore()
    store.save(Checkpoint("a", "50").stamped("another-worker"))
    conflicts: list[CheckpointConflict] = []
    writer = CheckpointWriter(store, 0.0, "me", on_conflict=conflicts.append)
    writer.start()
    try:
        writer.offer(Checkpoint("a", "10"))
        assert writer.flush(TIMEOUT_S), "a conflicting value must be dropped, not retried"
        assert len(conflicts) == 1 and isinstance(conflicts[0], CheckpointConflict)
        assert "checkpoint of a not moved back from 50 to 10" in str(conflicts[0])
        assert (writer.conflicts, writer.failures, writer.writes) == (1, 0, 0)
        assert writer.last_error is conflicts[0]
        assert store.load("a").sequence_number == "50"  # type: ignore[union-attr]
        writer.offer(Checkpoint("a", "60"))
        assert writer.flush(TIMEOUT_S) and store.load("a").sequence_number == "60"  # type: ignore[union-attr]
    finally:
        writer.close(5.0)
    assert not [r for r in caplog.records if r.getMessage() == "checkpoints are being written again"]


class FirstSaveOfEachShardFails(RecordingStore):
    """A recording store whose first save of each shard fails (retriable); a failing save also waits for the
    gate first, so a test can have the writer try one shard while the other is offered."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[str] = set()

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.entered.set()
        assert self.gate.wait(TIMEOUT_S), "the test never opened the gate"
        if checkpoint.shard_id not in self.failed:
            self.failed.add(checkpoint.shard_id)
            raise CheckpointError(f"injected failure saving {checkpoint.shard_id}", retriable=True)
        super().save(checkpoint, force=force)


def test_failed_writes_of_two_shards_are_both_kept_and_retried() -> None:
    store = FirstSaveOfEachShardFails()
    writer = CheckpointWriter(store, 0.0, "me")
    store.gate.clear()
    writer.start()
    try:
        writer.offer(Checkpoint("a", "1"))
        assert store.entered.wait(TIMEOUT_S), "the writer never tried to save a"
        writer.offer(Checkpoint("b", "2"))  # pending while the save of a is under way
        store.gate.set()  # a fails and is pending again beside b; then b fails too
        assert writer.flush(TIMEOUT_S), "the flush did not finish"
    finally:
        writer.close(5.0)
    assert store.failed == {"a", "b"} and writer.failures == 2
    stored = {shard: store.load(shard) for shard in ("a", "b")}
    assert {shard: c.sequence_number if c else None for shard, c in stored.items()} == {"a": "1", "b": "2"}, \
        "a shard's failed write was dropped"


def test_the_deadline_counts_from_when_the_connection_was_first_seen_down() -> None:
    store = DisconnectedStore()
    writer = started(store, 1.0)  # the first wait for the connection (2 s) already outlasts the deadline
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: writer.unreachable is not None or writer.failures >= 2, TIMEOUT_S)
        assert (writer.failures, store.failed_waits) == (1, 1), "the error came a wait later than its deadline"
        assert "(deadline 1 s)" in str(writer.unreachable)
    finally:
        writer.close(0.5)


class RefusingStore(RecordingStore):
    """A recording store that refuses every save with an error no retry can mend (as ZooKeeper refuses an
    identity its ACL does not allow) until ``allowed`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.allowed = threading.Event()

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        if not self.allowed.is_set():
            raise CheckpointError("not allowed by the node's ACL")
        super().save(checkpoint, force=force)


def test_a_refused_write_is_an_error_at_once_its_value_stays_pending_and_the_error_clears_once_written() -> None:
    store = RefusingStore()
    writer = CheckpointWriter(store, 0.0, "me", deadline_s=600.0)
    writer.start()
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: writer.unreachable is not None, TIMEOUT_S), "no error long before the deadline"
        assert not writer.unreachable.retriable  # type: ignore[union-attr]
        assert str(writer.unreachable) == (
            "checkpoint write of a refused, and trying again cannot help: not allowed by the node's ACL. Nothing "
            "is lost: the newest checkpoints stay pending and are tried again; records since the last stored "
            "checkpoint are replayed after a restart")
        store.allowed.set()
        assert writer.flush(TIMEOUT_S) and store.values() == ["7"]
        assert writer.unreachable is None
    finally:
        writer.close(5.0)


def test_a_look_that_found_nothing_new_leaves_the_writer_writing_what_comes_next(
        caplog: pytest.LogCaptureFixture) -> None:
    store = RecordingStore()
    writer = CheckpointWriter(store, 0.0, "me")
    looks: list[str] = []

    def latest() -> Checkpoint | None:
        looks.append("look")
        return Checkpoint("a", "9") if len(looks) > 1 else None

    def broken() -> Checkpoint | None:
        raise RuntimeError("a bug in the caller")

    writer.start()
    try:
        writer.offer_latest("a", latest)
        assert writer.flush(TIMEOUT_S) and looks == ["look"] and store.values() == []
        writer.offer_latest("a", latest)  # the checkpoint moved since: due at once (no flush to hurry it)
        assert wait_until(lambda: store.values() == ["9"], TIMEOUT_S), "the look that found nothing stopped it"
        writer.offer_latest("b", broken)
        assert writer.flush(TIMEOUT_S)
    finally:
        writer.close(5.0)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        "could not get the latest checkpoint of b"]
