"""The bounded ZooKeeper session alone, against the real server of the fixture and the fault proxy in front of it:
no I/O before start, bounded calls, the connection states its listeners hear, the session id it keeps, a close
that ends kazoo's threads, reconnecting however long the server is away."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import CheckpointError
from kinesis_spout.testing.process import in_background, wait_until
from kinesis_spout.testing.zkproxy import ZK_OPERATION_TIMEOUT, Op, ZooKeeperFaultProxy
from kinesis_spout.zookeeper import ZooKeeperSession

TIMEOUT_S = 20.0


@pytest.fixture
def proxy(zookeeper: Any) -> Iterator[ZooKeeperFaultProxy]:
    with ZooKeeperFaultProxy(zookeeper.hosts) as running:
        yield running


@pytest.fixture
def sessions() -> Iterator[Callable[..., ZooKeeperSession]]:
    """Started sessions, closed after the test."""
    made: list[ZooKeeperSession] = []

    def start(hosts: str, **settings: Any) -> ZooKeeperSession:
        session = ZooKeeperSession(hosts, **settings)
        made.append(session)
        session.start()
        return session

    yield start
    for session in made:
        session.close()



def expire(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Expire a session the way ZooKeeper's own tests do: join it with a second client, then close that one."""
    from kazoo.client import KazooClient

    twin = KazooClient(hosts=hosts, client_id=client_id)
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def new_threads(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]


def test_the_constructor_does_no_io_and_an_unstarted_session_says_how_to_mend_it() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.3)
    before = set(threading.enumerate())
    try:
        session = ZooKeeperSession(f"127.0.0.1:{listener.getsockname()[1]}", name="checkpoint store for /p")
        assert (session.state, session.connected, session.started, session.session_id, session.client_id,
                session.kept_session(), session.session_losses) == ("CLOSED", False, False, None, None,
                                                                    (None, None), 0)
        with pytest.raises(CheckpointError) as caught:
            session.get("/p/a")
        assert str(caught.value) == (f"checkpoint store for /p at ZooKeeper {session.hosts} is not open: call "
                                     f"open() first (a closed store stays closed until opened again)")
        assert not caught.value.retriable
        with pytest.raises(socket.timeout):
            listener.accept()  # nobody connected
        assert new_threads(before) == []
        session.close()  # closing a session never started is fine too
    finally:
        listener.close()


def test_a_call_whose_reply_is_held_ends_within_the_operation_timeout(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    session = sessions(proxy.hosts, operation_timeout_s=1.0)
    node = f"{zookeeper.prefix}/held"
    session.create(node, b"x", makepath=True)
    proxy.hold(Op.GET_DATA)
    started = time.monotonic()
    result = in_background(lambda: session.get(node), TIMEOUT_S, "the session's call")
    proxy.wait_acted()
    with pytest.raises(CheckpointError) as info:
        result()
    elapsed = time.monotonic() - started
    proxy.release()
    assert info.value.retriable, repr(info.value)
    assert str(info.value).startswith(f"ZooKeeper at {proxy.hosts}: reading {node} failed within 1 s"), str(info.value)
    assert elapsed < 1.9, f"gave up after {elapsed:.2f} s, with a 1 s limit"


def test_pipelined_reads_whose_replies_are_held_end_within_one_operation_timeout_for_them_all(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    """Reads sent at once wait for their answers together: eight held replies cost one operation timeout, not
    eight (a lease round reading a thousand lease nodes through a stalled server must not wait a thousand)."""
    session = sessions(proxy.hosts, operation_timeout_s=1.0)
    nodes = [f"{zookeeper.prefix}/pipelined/n{i}" for i in range(8)]
    for node in nodes:
        session.create(node, b"x", makepath=True)
    proxy.hold(Op.GET_DATA)
    started = time.monotonic()
    answers = in_background(lambda: session.pipelined("get", nodes), TIMEOUT_S, "the pipelined reads")()
    elapsed = time.monotonic() - started
    proxy.release()
    assert sorted(answers) == nodes and all(isinstance(a, Exception) for a in answers.values()), answers
    assert elapsed < 4.0, f"eight held replies took {elapsed:.2f} s, with a 1 s limit for them all"


def test_commands_are_tried_command_retries_more_times_then_fail_retriably(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    session = sessions(proxy.hosts, command_retries=3)
    node = f"{zookeeper.prefix}/retried"
    session.create(node, b"v", makepath=True)
    proxy.answer_error(Op.GET_DATA, ZK_OPERATION_TIMEOUT, times=3)
    assert session.get(node)[0] == b"v", "three time-outs, a fourth try: read"
    proxy.answer_error(Op.GET_DATA, ZK_OPERATION_TIMEOUT, times=4)
    with pytest.raises(CheckpointError, match="OperationTimeoutError") as caught:
        session.get(node)  # four time-outs: no fifth try
    assert caught.value.retriable


class StoppedClock:
    """A monotonic clock that moves only when the session sleeps: the session's retry without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_a_commands_tries_are_0_1_s_apart_doubling_up_to_2_s(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    time_ = StoppedClock()
    session = sessions(proxy.hosts, command_retries=7, operation_timeout_s=30.0, sleep=time_.sleep,
                       clock=time_.clock)
    node = f"{zookeeper.prefix}/paced"
    session.create(node, b"v", makepath=True)
    proxy.answer_error(Op.GET_DATA, ZK_OPERATION_TIMEOUT, times=8)
    with pytest.raises(CheckpointError, match="OperationTimeoutError") as caught:
        session.get(node)
    assert caught.value.retriable
    assert time_.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0], "eight tries, the delay capped at 2 s, no jitter"


def test_a_commands_retries_stop_where_the_next_try_could_not_start_within_the_operation_timeout(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    time_ = StoppedClock()
    session = sessions(proxy.hosts, command_retries=20, operation_timeout_s=1.0, sleep=time_.sleep,
                       clock=time_.clock)
    node = f"{zookeeper.prefix}/bounded"
    session.create(node, b"v", makepath=True)
    started = time_.now
    proxy.answer_error(Op.GET_DATA, ZK_OPERATION_TIMEOUT, times=21)
    with pytest.raises(CheckpointError) as caught:
        session.get(node)
    assert caught.value.retriable
    assert str(caught.value).startswith(f"ZooKeeper at {proxy.hosts}: reading {node} failed within 1 s "
                                        f"(OperationTimeoutError"), str(caught.value)
    assert str(caught.value).endswith("); is it running and reachable?"), str(caught.value)
    assert time_.sleeps == [0.1, 0.2, 0.4], "after 0.7 s the next delay (0.8 s) would end past the 1 s limit"
    assert time_.now - started <= 1.0


def test_listeners_hear_suspended_lost_connected_and_the_session_id_follows_the_new_session(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    session = sessions(proxy.hosts, session_timeout_s=4.0, operation_timeout_s=0.5, command_retries=0)
    heard: list[str] = []
    session.add_listener(heard.append)
    first = session.client_id
    assert first is not None and session.session_id == first[0] and session.kept_session() == (first[0], None)
    proxy.cut(Op.EXISTS, hold=True)  # the connection drops in place of the reply; reconnecting is refused
    result = in_background(lambda: session.exists("/"), TIMEOUT_S, "the session's call")
    proxy.wait_acted()
    assert wait_until(lambda: heard == ["SUSPENDED"], TIMEOUT_S), heard
    kept, down_since = session.kept_session()
    assert kept == first[0] and down_since is not None, "a suspended session's id is kept (it may resume)"
    with pytest.raises(CheckpointError):
        result()
    expire(zookeeper.hosts, first)  # the server ends the session while the client is away
    proxy.release()
    assert wait_until(lambda: heard == ["SUSPENDED", "LOST", "CONNECTED"], TIMEOUT_S), heard
    second = session.client_id
    assert second is not None and second[0] != first[0]
    assert session.session_id == second[0] and session.kept_session() == (second[0], None), \
        "the session id was not updated after the reconnect with a new session"
    assert session.session_losses == 1 and session.take_session_lost() and not session.take_session_lost()


def test_a_session_reconnects_however_long_the_server_is_away(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    """Connecting is tried again without limit: away for several times the longest delay between tries (2 s),
    the session still comes back (on its own session if it did not expire, else on a new one)."""
    session = sessions(proxy.hosts, session_timeout_s=30.0, operation_timeout_s=0.5, command_retries=0)
    proxy.cut(Op.EXISTS, hold=True)
    result = in_background(lambda: session.exists("/"), TIMEOUT_S, "the session's call")
    proxy.wait_acted()
    with pytest.raises(CheckpointError):
        result()
    down = time.monotonic()
    assert not wait_until(lambda: session.connected, 4.0), "reconnected while every connection was refused"
    assert time.monotonic() - down >= 4.0
    proxy.release()
    assert wait_until(lambda: session.connected, TIMEOUT_S), f"never reconnected ({session.state})"
    assert session.exists("/") is not None


def test_close_twice_is_fine_ends_kazoos_threads_and_a_new_start_makes_a_new_session(
        zookeeper: Any) -> None:
    before = set(threading.enumerate())
    session = ZooKeeperSession(zookeeper.hosts)
    session.start()
    session.start()  # idempotent while started
    first = session.session_id
    assert session.connected and first is not None and new_threads(before), "kazoo runs threads while started"
    session.close()
    session.close()
    assert (session.state, session.connected, session.started, session.session_id) == ("CLOSED", False, False,
                                                                                       None)
    assert wait_until(lambda: not new_threads(before), TIMEOUT_S), f"left running: {new_threads(before)}"
    with pytest.raises(CheckpointError, match="is not open: call open\\(\\) first"):
        session.exists("/")
    session.start()
    try:
        assert session.connected and session.session_id not in (None, first)
        assert session.exists("/") is not None
    finally:
        session.close()
    assert wait_until(lambda: not new_threads(before), TIMEOUT_S), f"left running: {new_threads(before)}"


def test_a_store_closes_the_session_it_made_and_leaves_a_given_one_open(zookeeper: Any) -> None:
    from kinesis_spout import Checkpoint, ZooKeeperCheckpointStore
    from kinesis_spout.spark.bookkeeping.batch_store import ZooKeeperBatchStore

    path = f"{zookeeper.prefix}/app/stream/checkpoints"
    session = ZooKeeperSession(zookeeper.hosts)
    shared = ZooKeeperCheckpointStore.on_session(session, path)
    try:
        shared.open()  # starts the given session
        assert session.connected
        batches = ZooKeeperBatchStore.on_store(shared)
        assert batches.session is session
        saved = Checkpoint("a", "7").stamped("w")
        shared.save(saved)
        batches.save_batch_id(3)
        shared.close()
        assert session.connected, "a store closed a session it was given"
        assert shared.load("a") == saved and batches.load_batch_id() == 3
    finally:
        session.close()
    own = ZooKeeperCheckpointStore(zookeeper.hosts, path)
    own.open()
    assert own.load("a") == saved
    own.close()
    assert not own.session.started and own.state == "CLOSED", "a store left the session it made open"


def test_zookeeper_s_answers_are_the_library_s_errors_and_still_kazoo_s(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, sessions: Callable[..., ZooKeeperSession]) -> None:
    """What a request raises, and what a transaction's operations and pipelined reads return, is an error of
    ``kinesis_spout.zookeeper.errors`` (a ``SpoutError``), and also kazoo's class of the same name for code that
    catches that; a delete sent once that gets no answer is a retriable ``NoAnswerError``."""
    import kazoo.exceptions
    from kazoo.handlers.threading import KazooTimeoutError

    from kinesis_spout import SpoutError
    from kinesis_spout.zookeeper import errors

    session = sessions(proxy.hosts, operation_timeout_s=0.5)
    node, missing = f"{zookeeper.prefix}/answers", f"{zookeeper.prefix}/missing"
    session.create(node, b"x", makepath=True)
    raised = []
    for call in (lambda: session.get(missing), lambda: session.create(node, b"y"),
                 lambda: session.set(node, b"y", version=7), lambda: session.delete_once(node, 7)):
        with pytest.raises(SpoutError) as info:
            call()
        raised.append(info.value)

    def build(txn: Any) -> None:  # the write is rolled back, as the check fails
        txn.set_data(node, b"y")
        txn.check(node, 7)

    returned = [*session.commit("a transaction refused", build), session.pipelined("get", [missing])[missing]]
    proxy.hold(Op.DELETE)
    with pytest.raises(errors.NoAnswerError) as unanswered:
        session.delete_once(node, 0)
    proxy.release()
    ours = [errors.NoNodeError, errors.NodeExistsError, errors.BadVersionError, errors.BadVersionError,
            errors.RolledBackError, errors.BadVersionError, errors.NoNodeError, errors.NoAnswerError]
    theirs = [kazoo.exceptions.NoNodeError, kazoo.exceptions.NodeExistsError, kazoo.exceptions.BadVersionError,
              kazoo.exceptions.BadVersionError, kazoo.exceptions.RolledBackError, kazoo.exceptions.BadVersionError,
              kazoo.exceptions.NoNodeError, KazooTimeoutError]
    for error, our_class, their_class in zip([*raised, *returned, unanswered.value], ours, theirs, strict=True):
        assert isinstance(error, our_class) and isinstance(error, their_class), (type(error).__mro__, our_class)
        assert type(error).__name__ == their_class.__name__
    assert unanswered.value.retriable and not raised[0].retriable
