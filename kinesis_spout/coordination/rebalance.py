"""One worker's lease rounds: read who is live and who holds what, give back and take leases by the plan.

Run on the spout's shard sync thread (:class:`~kinesis_spout.coordination.sync.ShardSync` calls :meth:`owns`
with the shards that may be read now). The pure rule is :mod:`kinesis_spout.coordination.assignment`; the
ZooKeeper primitives are :mod:`kinesis_spout.coordination.leases`.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Literal

from kinesis_spout.coordination.assignment import plan
from kinesis_spout.coordination.leases import ZooKeeperLeases
from kinesis_spout.errors import SpoutError
from kinesis_spout.kinesis.shards import Shard

__all__ = ["MAX_MOVES", "SETTLE_MAX_S", "SETTLE_S", "TAKES_BEFORE_SETTLED", "TAKE_PASSES", "HandBack",
           "LeaseBalancer"]

log = logging.getLogger(__name__)

#: A worker that just joined takes at most this many leases until the live workers it reads have not changed for
#: ``settle_s`` (:data:`SETTLE_S`): workers started together register over a few seconds, and the first to look
#: would otherwise take the shares of those not registered yet, then give them back (moves). A stream of up to this
#: many shards is taken at once.
TAKES_BEFORE_SETTLED = 16
#: How long the live workers must stay unchanged (the default of the ``lease_settle_s`` setting).
SETTLE_S = 2.0
#: ... but a worker waits no longer than this after its first round, however often workers come and go.
SETTLE_MAX_S = 10.0
#: Leases one worker gives back for balance in one round, at most (their hand-overs share one wait).
MAX_MOVES = 16

#: A round whose takes lost their race (another worker changed the lease first) reads the leases and plans again at
#: once, up to this many passes in all, instead of a round later: workers planning from views a few takes apart
#: disagree on a few free shards, and a failover's takes would otherwise trickle in a round at a time.
TAKE_PASSES = 3

#: What a hand-back says: ``stored`` (the shard's checkpoint is stored: release the lease), ``kept`` (not stored
#: yet: keep the lease, a later round tries again), ``lost`` (the lease was lost meanwhile: the worker forgot it,
#: there is nothing to release).
HandBack = Literal["stored", "kept", "lost"]


class LeaseBalancer:
    """Takes and gives back one worker's shard leases, a round at a time.

    Who calls: the shard sync thread (``owns``, each round). ``hand_back(shard_ids)`` is the spout's: it
    stops taking the shards' records, lets their in-flight records finish (bounded, one wait for all), writes their
    checkpoints and says, per shard, whether it is stored (:data:`HandBack`); only then does this balancer release
    the lease (else a later round tries again). From its first hand-back until its lease is released (or lost, or
    the shard is this worker's to read again by the plan), a shard is *being handed over*: ``owns`` leaves it out,
    so it is not read again meanwhile, and each round that cannot finish the hand-over logs a warning saying for
    how long it has not.
    ``drop(shard_id)`` (default: none) is the spout's too: it stops reading a shard at once, writing nothing more
    for it, when the round finds its lease moved past the held epoch.
    ``max_moves`` bounds how many leases this worker gives up per round for balance (a finished shard's lease is
    always given up). A worker that just joined takes at most :data:`TAKES_BEFORE_SETTLED` leases until the live
    workers have not changed for ``settle_s`` (or ``settle_max_s`` passed since its first round); then its share.
    All of it runs on the calling thread; the held leases are :class:`ZooKeeperLeases`'. ``clock`` (monotonic
    seconds) is for tests.
    """

    def __init__(self, leases: ZooKeeperLeases, *, hand_back: Callable[[list[str]], dict[str, HandBack]],
                 drop_all: Callable[[], None], max_moves: int = MAX_MOVES,
                 drop: Callable[[str], None] | None = None, settle_s: float = SETTLE_S,
                 settle_max_s: float = SETTLE_MAX_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.leases = leases
        self.max_moves = max_moves
        self.settle_s, self.settle_max_s = settle_s, settle_max_s
        self._hand_back = hand_back
        self._drop_all = drop_all
        self._drop = drop
        self._clock = clock
        self.rounds = 0
        self._handing: dict[str, float] = {}  # shards being handed over -> when their hand-over began (monotonic)
        self._members: tuple[str, ...] | None = None  # the live workers read last, and since when (monotonic)
        self._members_since = 0.0
        self._joined_at: float | None = None  # this worker's first round since it (re)joined (monotonic)
        self._settled_once = False  # the live workers settled since it (re)joined: it takes its share from then on

    def owns(self, ready: list[Shard]) -> list[Shard]:
        """One round over ``ready`` (the shards that may be read now); returns those this worker holds after it.

        The leases are read before the live workers are listed: a worker registers before it takes a lease, so an
        owner missing from the later listing has left for good (listed first, a worker that joined and took a
        lease between the two reads would look gone, and lose the lease to this worker's compare-and-set). A held
        lease that no longer names this worker at its epoch is dropped; every lease that names this worker counts
        as its own in the plan, held or not (a take whose reply was lost, a give-back whose write failed), so it is
        given back or taken again under a new epoch, never left to strand its shard."""
        self.rounds += 1
        leases = self.leases
        me = leases.worker_id
        if not leases.registered():  # a lost session took our worker node (and our claim on every lease)
            if leases.held:
                log.warning("worker %s lost its ZooKeeper session: dropping its %d shards and joining again",
                            me, len(leases.held))
                self._drop_all()
            leases.join()
            self._joined_at, self._settled_once = None, False
        ids = [s.shard_id for s in ready]
        for attempt in range(TAKE_PASSES):
            if not self._pass(ids, give_back=attempt == 0):
                break
        now_held = leases.held
        return [s for s in ready if s.shard_id in now_held and s.shard_id not in self._handing]

    def _pass(self, ids: list[str], give_back: bool) -> bool:
        """Read the leases and the live workers, plan, give back (the round's first pass only: ``max_moves`` is a
        round's, and a hand-over that could not finish waits for the next round) and take (see :meth:`owns`); True
        when a take lost its race (another worker changed the lease first, planning from an older or a newer
        view)."""
        leases = self.leases
        me = leases.worker_id
        held = leases.held
        states = leases.read(sorted(set(ids) | set(held)))
        workers = leases.workers()  # after the leases: see owns()
        for shard_id, epoch in held.items():
            if states[shard_id] != (me, epoch):
                log.warning("worker %s: the lease of %s moved past epoch %d (now %s at %d); dropping the shard",
                            me, shard_id, epoch, states[shard_id][0] or "nobody", states[shard_id][1])
                if self._drop is not None:
                    self._drop(shard_id)
                leases.forget(shard_id)
        held = leases.held
        owners = {shard: owner for shard, (owner, _) in states.items()}
        step = plan(me, ids, workers, owners, sorted(held), self.max_moves, sorted(self._handing))
        for shard_id in list(self._handing):
            if shard_id not in step.release:  # the lease moved on, or the shard is this worker's to read again
                del self._handing[shard_id]
        if step.release and give_back:
            self._give_back({shard_id: states[shard_id][1] for shard_id in step.release})
        take = step.take if self._settled(workers) else step.take[:max(0, TAKES_BEFORE_SETTLED - len(held))]
        if len(take) < len(step.take):
            log.info("worker %s takes %d of the %d leases it may take until the live workers settle (%d live; the "
                     "rest once they have not changed for %.0f s)", me, len(take), len(step.take), len(workers),
                     self.settle_s)
        epochs = leases.acquire_many({shard_id: states[shard_id] for shard_id in take}) if take else {}
        taken = [shard_id for shard_id, epoch in epochs.items() if epoch is not None]
        lost = [shard_id for shard_id, epoch in epochs.items() if epoch is None]
        released = step.release if give_back else []
        if take or released:
            log.info("worker %s: %d live workers, %d shards to read; took %s, gave back %s; waits for %s%s",
                     me, len(workers), len(ids), _some(taken), _some(released), _some(step.wait),
                     f"; lost the race for {_some(lost)}" if lost else "")
        return bool(lost)

    def _settled(self, workers: list[str]) -> bool:
        """Notes the live workers read this round; says whether they settled since this worker (re)joined: they
        have not changed for ``settle_s``, or its first round since it joined was ``settle_max_s`` ago."""
        now = self._clock()
        if self._joined_at is None:
            self._joined_at = now
        if tuple(workers) != self._members:
            self._members, self._members_since = tuple(workers), now
        if not self._settled_once:
            self._settled_once = (now - self._members_since >= self.settle_s
                                  or now - self._joined_at >= self.settle_max_s)
        return self._settled_once

    def _give_back(self, epochs: dict[str, int]) -> None:
        """Hand the shards of ``epochs`` back (one hand-over for them all) and release each one's lease at its
        epoch once its checkpoint is stored. A hand-back that cannot finish keeps the shard being handed over, with
        a warning; so does a release that fails (ZooKeeper unreachable), whose error is logged here so the round
        goes on with the rest and its takes."""
        me = self.leases.worker_id
        now = time.monotonic()
        for shard_id in epochs:
            self._handing.setdefault(shard_id, now)
        outcomes = self._hand_back(list(epochs))
        for shard_id, epoch in epochs.items():
            since = self._handing[shard_id]
            outcome = outcomes[shard_id]
            if outcome == "lost":
                del self._handing[shard_id]
                continue
            if outcome == "kept":
                log.warning("worker %s keeps the lease of %s until its checkpoint is stored (handed over %.0f s ago; "
                            "a later round tries again)", me, shard_id, time.monotonic() - since)
                continue
            try:
                self.leases.release(shard_id, epoch)
            except SpoutError as exc:
                log.warning("worker %s could not give the lease of %s back (handed over %.0f s ago; a later round "
                            "tries again): %s", me, shard_id, time.monotonic() - since, exc)
                continue
            del self._handing[shard_id]


def _some(shard_ids: list[str]) -> str:
    """Shard ids for a log line: all of up to 8, else how many and the first."""
    if not shard_ids:
        return "none"
    return ", ".join(shard_ids) if len(shard_ids) <= 8 else f"{len(shard_ids)} shards ({shard_ids[0]}, ...)"
