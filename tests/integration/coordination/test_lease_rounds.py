"""Lease rounds (:class:`LeaseBalancer` over :class:`ZooKeeperLeases`) at the moments ZooKeeper makes hard: a worker
joining between two reads of another worker's round, two workers taking one free lease, a give-back whose write
never reached ZooKeeper, a take whose reply was lost. A real ZooKeeper through the fixture; worker ``a`` talks to it
through the fault proxy, which forces the interleaving; worker ``b`` talks to it directly."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Callable, Iterator

import pytest

from kinesis_spout import Checkpoint, ZooKeeperCheckpointStore
from kinesis_spout.coordination.assignment import assign
from kinesis_spout.coordination.leases import ZooKeeperLeases
from kinesis_spout.coordination.rebalance import HandBack, LeaseBalancer
from kinesis_spout.errors import CheckpointError
from kinesis_spout.kinesis.shards import Shard
from kinesis_spout.testing.process import in_background, wait_until
from kinesis_spout.testing.zkproxy import ZK_OPERATION_TIMEOUT, Op, ZooKeeperFaultProxy

X, Y = "shardId-000000000000", "shardId-000000000001"


def shard(shard_id: str) -> Shard:
    return Shard(shard_id, None, None, "0", None)


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Worker:
    """One worker's lease rounds, with the spout's side (hand-back, drops) recorded instead of reading records."""

    def __init__(self, hosts: str, path: str, name: str, operation_timeout_s: float = 15.0,
                 refresh_s: float = 300.0) -> None:
        self.store = ZooKeeperCheckpointStore(hosts, path, operation_timeout_s=operation_timeout_s,
                                              session_timeout_s=30.0)
        self.store.open()
        self.leases = ZooKeeperLeases(self.store, name, refresh_s=refresh_s)
        self.leases.join()
        self.handed_back: list[str] = []
        self.hand_overs: list[list[str]] = []  # each call of hand_back: the shards it was given
        self.clock = FakeClock()
        self.balancer = self.balancer_with(settle_s=0.0)

    def balancer_with(self, **options: Any) -> LeaseBalancer:
        """A balancer of this worker's leases, on this worker's clock (``options``: the constructor's)."""
        return LeaseBalancer(self.leases, hand_back=self.hand_back, drop_all=lambda: None, clock=self.clock,
                             **options)

    def hand_back(self, shard_ids: list[str]) -> dict[str, HandBack]:
        """The spout's part of giving leases back: here nothing is read, so the checkpoints are as good as stored."""
        self.handed_back += shard_ids
        self.hand_overs.append(list(shard_ids))
        return {shard_id: "stored" for shard_id in shard_ids}

    def round(self, *shard_ids: str) -> list[str]:
        """One lease round over ``shard_ids``: the shards this worker reads after it."""
        return [s.shard_id for s in self.balancer.owns([shard(s) for s in shard_ids])]


@pytest.fixture
def proxy(zookeeper: Any) -> Iterator[ZooKeeperFaultProxy]:
    with ZooKeeperFaultProxy(zookeeper.hosts) as running:
        yield running


@pytest.fixture
def workers(zookeeper: Any, proxy: ZooKeeperFaultProxy) -> Iterator[Callable[..., Worker]]:
    """Make workers of one app and stream (``through_proxy``: worker ``a``'s way to ZooKeeper); closed after."""
    made: list[Worker] = []
    path = f"{zookeeper.prefix}/app/stream/checkpoints"

    def make(name: str, *, through_proxy: bool = False, operation_timeout_s: float = 15.0,
             refresh_s: float = 300.0) -> Worker:
        made.append(Worker(proxy.hosts if through_proxy else zookeeper.hosts, path, name, operation_timeout_s,
                           refresh_s))
        return made[-1]

    yield make
    proxy.release()
    for worker in made:
        worker.store.close()


def lease(zookeeper: Any, shard_id: str) -> tuple[str | None, int]:
    """The lease of ``shard_id`` as ZooKeeper has it: (owner, epoch)."""
    data, stat = zookeeper.client().get(f"{zookeeper.prefix}/app/stream/leases/{shard_id}")
    return json.loads(data)["owner"], stat.version


def write_lease(zookeeper: Any, shard_id: str, owner: str, *, announce: bool = True) -> None:
    """Name ``owner`` in the lease of ``shard_id`` behind the workers' backs, as another worker of this library
    does (``announce``: the leases' generation moves on in the same transaction) or as a writer that does not
    (an older release during a rolling upgrade)."""
    leases = f"{zookeeper.prefix}/app/stream/leases"
    txn = zookeeper.client().transaction()
    txn.set_data(f"{leases}/{shard_id}", json.dumps({"owner": owner}).encode())
    if announce:
        txn.set_data(leases, b"")
    assert not any(isinstance(result, Exception) for result in txn.commit())


def free_lease(worker: Worker, shard_id: str) -> None:
    """Leave a free lease node for ``shard_id`` (taken and given back: owner none, epoch 1), so that a take is a
    compare-and-set on an existing node."""
    leases = worker.leases
    assert leases.acquire(shard_id, leases.read([shard_id])[shard_id]) == 0
    assert leases.release(shard_id)


def test_a_round_over_many_shards_sends_every_lease_read_before_it_waits_for_an_answer(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """A round over N shards costs one round trip to ZooKeeper, not N: with the answer to ``a``'s first lease read
    held back, all N reads still reach ZooKeeper. The last one (a lease of ``b``'s) is answered with an error (an
    operation time-out): ``a`` reads that lease again on its own. The round then takes ``a``'s fair share of the
    leases nobody holds and none of ``b``'s, each at the epoch ZooKeeper has."""
    shards = [f"shardId-{i:012d}" for i in range(64)]
    a, b = workers("a", through_proxy=True), workers("b")
    for shard_id in shards[48:]:  # b holds the last 16 leases; the other 48 have no lease node yet
        assert b.leases.acquire(shard_id, (None, -1)) == 0
    proxy.hold(Op.GET_DATA)  # the answer to a's first lease read, and every answer after it
    proxy.refuse(Op.GET_DATA, ZK_OPERATION_TIMEOUT, nth=len(shards))  # a's last lease read: one of b's
    a_round = in_background(lambda: a.round(*shards))
    proxy.wait_acted(2)  # the first answer held back and the last read sent: a did not wait for one before the next
    proxy.release()
    read = a_round()
    assert len(read) == 32 and not set(read) & set(shards[48:])
    assert all(lease(zookeeper, s) == ("a", 0) for s in read)
    assert all(lease(zookeeper, s) == ("b", 0) for s in shards[48:])
    assert a.leases.held == {s: 0 for s in read}


def test_a_worker_that_joins_and_takes_a_lease_during_another_worker_s_round_keeps_it(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """``b`` registers and takes the free lease while ``a``'s round waits for its listing of the live workers:
    ``a`` must not see ``b`` as a dead owner and take the lease from it."""
    a = workers("a", through_proxy=True)
    free_lease(a, X)
    proxy.hold(Op.GET_CHILDREN)  # a's listing of the live workers answers only once b has joined and taken X
    a_round = in_background(lambda: a.round(X))
    proxy.wait_acted()
    b = workers("b")
    assert b.leases.acquire(X, b.leases.read([X])[X]) == 2
    proxy.release()
    assert a_round() == [], "a took the lease b had just taken"
    assert lease(zookeeper, X) == ("b", 2)
    assert a.round(X) == [] and b.round(X) == [X] and lease(zookeeper, X) == ("b", 2)


def test_of_two_workers_that_read_a_lease_as_free_only_the_first_to_write_takes_it(
        zookeeper: Any, workers: Callable[..., Worker]) -> None:
    a, b = workers("a"), workers("b")
    free_lease(a, X)
    seen_by_a, seen_by_b = a.leases.read([X])[X], b.leases.read([X])[X]
    assert seen_by_a == seen_by_b == (None, 1)
    assert b.leases.acquire(X, seen_by_b) == 2
    assert a.leases.acquire(X, seen_by_a) is None, "a took a lease that changed since it read it"
    assert lease(zookeeper, X) == ("b", 2)
    assert a.leases.held == {} and b.leases.held == {X: 2}


def test_a_give_back_that_never_reached_zookeeper_is_tried_again_and_the_next_owner_gets_the_shard(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker], caplog: Any) -> None:
    """``a`` gives ``Y`` back to ``b``, but its write never reaches ZooKeeper: the connection drops in its place and
    stays away past the operation deadline (1 s; the session, 30 s, survives). The round says so in a warning and
    does not read ``Y`` (its hand-over is under way); the lease still names ``a``, so ``a`` still holds it and gives
    it back in a later round; ``b`` then takes it."""
    a = workers("a", through_proxy=True, operation_timeout_s=1.0)
    assert a.round(X, Y) == [X, Y]
    b = workers("b")
    assert b.round(X, Y) == []  # a, a live owner, holds both: b waits for one
    proxy.cut_request(Op.MULTI, hold=True)  # the give-back's write: never carried out
    caplog.set_level(logging.WARNING, logger="kinesis_spout")
    assert a.round(X, Y) == [X], "a read the shard it was handing over again"
    assert re.search(f"worker a could not give the lease of {Y} back \\(handed over \\d+ s ago; a later round tries "
                     f"again\\): .*releasing .*/leases/{Y} failed within 1 s", caplog.text), caplog.text
    assert a.handed_back == [Y]
    proxy.release()  # ZooKeeper reachable again, well within the session
    assert a.store.wait_connected(15.0)
    assert lease(zookeeper, Y) == ("a", 0)
    assert a.round(X, Y) == [X]
    assert lease(zookeeper, Y) == (None, 1), "a never gave the lease back: b waits for it forever"
    assert b.round(X, Y) == [Y] and lease(zookeeper, Y) == ("b", 2)
    assert a.round(X, Y) == [X] and a.leases.held == {X: 0}


def test_a_take_whose_reply_was_lost_is_given_back_when_another_worker_should_read_the_shard(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """The lease of ``Y`` names ``a``, which does not hold it: a take whose reply was lost in every try leaves it so
    (a round's next pass takes such a lease again when it stays with ``a``: see the next test). ``a`` counts it as
    its own: once ``b`` joins, ``a`` gives it back and ``b`` takes it."""
    a = workers("a", through_proxy=True)
    free_lease(a, X)
    free_lease(a, Y)
    assert a.round(X) == [X]
    write_lease(zookeeper, Y, "a")  # the take's write, whose reply a never saw
    assert lease(zookeeper, Y) == ("a", 2) and Y not in a.leases.held
    b = workers("b")
    assert b.round(X, Y) == []  # a live owner holds Y
    assert a.round(X, Y) == [X]
    assert lease(zookeeper, Y) == (None, 3), "the lease that names a was not given back: b waits forever"
    assert b.round(X, Y) == [Y] and lease(zookeeper, Y) == ("b", 4)


def test_a_take_whose_reply_was_lost_is_taken_again_under_a_new_epoch_when_the_shard_stays_with_the_worker(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """The reply to ``a``'s take of ``X`` is lost (the write happened): the round's next pass reads the lease
    naming ``a`` and takes it again under a new epoch, fenced at it."""
    a = workers("a", through_proxy=True)
    free_lease(a, X)
    proxy.cut(Op.MULTI)  # the reply to the take of X
    assert a.round(X) == [X]
    assert lease(zookeeper, X) == ("a", 3) and a.leases.held == {X: 3}  # fenced at the epoch it wrote


def test_a_held_lease_that_moved_on_is_dropped_at_the_next_round(
        zookeeper: Any, workers: Callable[..., Worker]) -> None:
    """The lease of a held shard moved past this worker's epoch (given back by a write whose reply was lost, or
    taken while this worker was thought gone): the round drops the shard instead of reading it on unfenced."""
    dropped: list[str] = []
    a = workers("a")
    a.balancer = a.balancer_with(settle_s=0.0, drop=dropped.append)
    assert a.round(X) == [X]
    write_lease(zookeeper, X, "c")  # c, not live
    assert a.round(X) == [X] and dropped == [X]
    assert a.leases.held == {X: 2} and lease(zookeeper, X) == ("a", 2)


def test_a_take_whose_fence_could_not_be_set_is_not_read_and_is_taken_again_once_zookeeper_answers(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """The lease of ``X`` is written, then ZooKeeper goes away (past the 1 s operation deadline) before the shard's
    checkpoint writes are fenced: the round fails and ``X`` is not read (it would be read unfenced). The lease names
    ``a``; the next round takes it again under a new epoch, fenced. (The checkpoints' node is made by a session's
    first fence only: ``b`` leaves the free lease, so that ``a``'s take is its first.)"""
    b = workers("b")
    free_lease(b, X)
    b.store.close()
    a = workers("a", through_proxy=True, operation_timeout_s=1.0)
    proxy.cut_request(Op.EXISTS, nth=3, hold=True)  # is a registered, the leases' generation, then: fencing X
    with pytest.raises(CheckpointError, match="creating .*/checkpoints failed within 1 s"):
        a.round(X)
    assert a.leases.held == {} and lease(zookeeper, X) == ("a", 2)
    proxy.release()
    assert a.store.wait_connected(15.0)
    assert a.round(X) == [X]
    assert lease(zookeeper, X) == ("a", 3) and a.leases.held == {X: 3}


def test_a_give_back_whose_reply_was_lost_is_done_and_forgotten(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """The write that gives ``Y`` back is carried out, its reply lost; the retry finds the lease past ``a``'s epoch:
    ``a`` no longer holds it (nothing is read or written for it), and ``b`` takes it."""
    a = workers("a", through_proxy=True)
    assert a.round(X, Y) == [X, Y]
    b = workers("b")
    proxy.cut(Op.MULTI)
    assert a.round(X, Y) == [X]
    assert a.leases.held == {X: 0} and lease(zookeeper, Y) == (None, 1)
    assert b.round(X, Y) == [Y] and lease(zookeeper, Y) == ("b", 2)


def test_a_round_at_rest_reads_no_lease_node_however_many_shards_there_are(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """Once the leases are balanced and nothing changes, a round reads the leases' generation, not each lease:
    its requests do not grow with the shards (before, each round of each worker read every lease node)."""
    shards = [f"shardId-{i:012d}" for i in range(64)]
    a = workers("a", through_proxy=True)
    assert len(a.round(*shards)) == 64
    b = workers("b")
    for _ in range(32):  # a gives back at most max_moves leases a round, b takes them
        counts = len(a.round(*shards)), len(b.round(*shards))
        if counts == (32, 32):
            break
    assert counts == (32, 32)
    a.round(*shards)  # reads what b's last take changed
    before = proxy.requests()
    for _ in range(5):
        assert len(a.round(*shards)) == 32
    after = proxy.requests()
    sent = {op: n - before.get(op, 0) for op, n in after.items() if n > before.get(op, 0) and op != Op.PING}
    assert sent.get(Op.GET_DATA, 0) == 0, f"rounds at rest read lease nodes: {sent}"
    assert sum(sent.values()) <= 5 * 4, f"rounds at rest sent {sent}"


def test_a_change_by_another_worker_is_read_at_the_next_round_at_rest(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """``b`` gives a lease back while ``a``'s rounds are at rest: ``a``'s next round reads it as free and takes it."""
    b = workers("b")
    assert b.round(X, Y) == [X, Y]
    a = workers("a", through_proxy=True)
    assert a.round(X, Y) == []  # b, a live worker, holds both: a waits (b gives one back at its next round)
    assert b.round(X, Y) == [X]
    assert a.round(X, Y) == [Y], "a did not see the lease b gave back"
    assert lease(zookeeper, Y) == ("a", 2)


def test_a_lease_written_without_moving_the_generation_is_read_again_within_the_refresh_interval(
        zookeeper: Any, workers: Callable[..., Worker]) -> None:
    """A writer that does not announce its change (an older release during a rolling upgrade) is seen once the
    lease states read under the generation are older than ``refresh_s``."""
    dropped: list[str] = []
    a = workers("a", refresh_s=0.5)
    a.balancer = a.balancer_with(settle_s=0.0, drop=dropped.append)
    assert a.round(X) == [X] and a.round(X) == [X]  # the second reads what the take changed: at rest after it
    write_lease(zookeeper, X, "c", announce=False)  # c, not live
    assert wait_until(lambda: a.round(X) == [X] and dropped == [X], 30.0), "the silent change was never read"
    assert lease(zookeeper, X) == ("a", 2)


def test_workers_started_together_take_their_shares_once_the_live_workers_settle(
        zookeeper: Any, workers: Callable[..., Worker]) -> None:
    """Workers started together register one after another: the first to look must not take the shares of those
    not registered yet (it would give them back, each a move). A worker that just joined takes at most 16 leases
    until the live workers it reads have not changed for ``settle_s``: every lease is taken once, by its final
    owner."""
    shards = [f"shardId-{i:012d}" for i in range(64)]
    a = workers("a")
    a.balancer = a.balancer_with()  # the default settle time
    assert len(a.round(*shards)) == 16  # alone, just joined: 16 at most while the others may still register
    a.clock.now = 1.5
    b = workers("b")
    b.balancer = b.balancer_with()
    b.clock.now = 1.5
    assert len(a.round(*shards)) == 16 and len(b.round(*shards)) == 16  # b joined at 1.5: not settled yet
    a.clock.now = b.clock.now = 3.5
    read_a, read_b = a.round(*shards), b.round(*shards)
    assert len(read_a) == len(read_b) == 32 and not set(read_a) & set(read_b)
    assert all(lease(zookeeper, s)[1] == 0 for s in shards), "a lease was taken more than once: it moved"
    assert a.handed_back == [] and b.handed_back == []
    b.store.close()  # b leaves: a, settled once, takes its leases at once though the live workers just changed
    assert len(a.round(*shards)) == 64


def test_a_worker_that_just_joined_waits_no_longer_than_settle_max_s_however_often_workers_come(
        zookeeper: Any, workers: Callable[..., Worker]) -> None:
    shards = [f"shardId-{i:012d}" for i in range(200)]
    a = workers("a")
    a.balancer = a.balancer_with(settle_s=2.0, settle_max_s=5.0)
    for step, name in enumerate(["b", "c", "d"]):  # a worker joins before each of a's rounds, 1.5 s apart
        a.clock.now = 1.5 * step
        workers(name)  # registered, and never takes a lease (it runs no rounds)
        assert len(a.round(*shards)) == 16, f"a took more than 16 leases at {a.clock.now} s, workers still joining"
    a.clock.now = 5.0  # 5 s after its first round a takes its share, though a worker joins again
    workers("e")
    assert len(a.round(*shards)) == 40  # 200 shards over a, b, c, d and e


def test_a_round_hands_its_moves_over_in_one_hand_back(zookeeper: Any, workers: Callable[..., Worker]) -> None:
    """Leases given back for balance in one round are handed over together (one wait for their records in flight,
    in the spout), at most ``max_moves`` of them."""
    shards = [f"shardId-{i:012d}" for i in range(40)]
    a = workers("a")
    assert len(a.round(*shards)) == 40
    b = workers("b")
    assert b.round(*shards) == []  # a holds all: b waits for a to give its share back
    assert len(a.round(*shards)) == 40 - 16
    assert [len(call) for call in a.hand_overs] == [16]
    assert len(a.round(*shards)) == 20 and [len(call) for call in a.hand_overs] == [16, 4]
    assert len(b.round(*shards)) == 20


def test_a_round_sends_all_its_takes_before_it_waits_for_an_answer(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """Taking N leases costs one round trip to ZooKeeper, not N (a failover's or a start's takes would otherwise
    queue one behind the other): with the answer to ``a``'s first take held back, all N takes still reach
    ZooKeeper. The last one is answered with an error (an operation time-out, the server never saw it): ``a`` makes
    that take again on its own. Every lease then names ``a`` at its first epoch, fenced."""
    shards = [f"shardId-{i:012d}" for i in range(32)]
    a = workers("a", through_proxy=True)
    proxy.hold(Op.MULTI)  # the answer to a's first take, and every answer after it
    proxy.refuse(Op.MULTI, ZK_OPERATION_TIMEOUT, nth=len(shards))  # a's last take
    a_round = in_background(lambda: a.round(*shards))
    proxy.wait_acted(2)  # the first answer held back and the last take sent: a did not wait for one before the next
    proxy.release()
    assert a_round() == shards
    assert all(lease(zookeeper, s) == ("a", 0) for s in shards) and a.leases.held == {s: 0 for s in shards}


def test_a_round_whose_take_lost_its_race_plans_again_at_once_and_takes_its_share(
        zookeeper: Any, proxy: ZooKeeperFaultProxy, workers: Callable[..., Worker]) -> None:
    """``b`` takes a lease ``a`` planned to take while ``a``'s round waits for its listing of the live workers:
    ``a``'s take of it loses, and the same round reads the leases again and takes another free one, so ``a``
    holds its share after one round (a failover's takes do not trickle in a round at a time)."""
    shards = [f"shardId-{i:012d}" for i in range(4)]
    a, b = workers("a", through_proxy=True), workers("b")
    for shard_id in shards:
        free_lease(a, shard_id)
    target = min(s for s, w in assign(shards, ["a", "b"], {}).items() if w == "a")  # one a plans to take
    proxy.hold(Op.GET_CHILDREN)  # a's listing of the live workers answers only once b has taken it
    a_round = in_background(lambda: a.round(*shards))
    proxy.wait_acted()
    assert b.leases.acquire(target, b.leases.read([target])[target]) == 2
    proxy.release()
    read = a_round()
    assert len(read) == 2 and target not in read, read
    assert lease(zookeeper, target) == ("b", 2) and all(lease(zookeeper, s) == ("a", 2) for s in read)


def test_a_fenced_checkpoint_written_after_the_checkpoints_node_was_deleted_makes_it_again(
        zookeeper: Any, workers: Callable[..., Worker]) -> None:
    """A session's first fence makes the checkpoints' node; if it is deleted afterwards (an operator's reset), the
    next fenced write of a shard's first checkpoint makes it again instead of failing as if raced."""
    a = workers("a")
    assert a.round(X) == [X]
    zookeeper.client().delete(a.store.path, recursive=True)
    a.store.save(Checkpoint(X, "49590338271490256608559692538361571095921575989136588898"))
    stored = a.store.load(X)
    assert stored is not None and stored.sequence_number == "49590338271490256608559692538361571095921575989136588898"
