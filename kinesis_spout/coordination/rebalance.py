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

__all__ = ["HandBack", "LeaseBalancer"]

log = logging.getLogger(__name__)

#: What a hand-back says: ``stored`` (the shard's checkpoint is stored: release the lease), ``kept`` (not stored
#: yet: keep the lease, a later round tries again), ``lost`` (the lease was lost meanwhile: the worker forgot it,
#: there is nothing to release).
HandBack = Literal["stored", "kept", "lost"]


class LeaseBalancer:
    """Takes and gives back one worker's shard leases, a round at a time.

    Who calls: the shard sync thread (``owns``, each round). ``hand_back(shard_id)`` is the spout's: it stops
    taking the shard's records, lets its in-flight records finish (bounded), writes their checkpoint and says
    whether it is stored (:data:`HandBack`); only then does this balancer release the lease (else a later round
    tries again). From its first hand-back until its lease is released (or lost, or the shard is this worker's to
    read again by the plan), a shard is *being handed over*: ``owns`` leaves it out, so it is not read again
    meanwhile, and each round that cannot finish the hand-over logs a warning saying for how long it has not.
    ``drop(shard_id)`` (default: none) is the spout's too: it stops reading a shard at once, writing nothing more
    for it, when the round finds its lease moved past the held epoch.
    ``max_moves`` bounds how many leases this worker gives up per round for balance (a finished shard's lease is
    always given up). All of it runs on the calling thread; the held leases are :class:`ZooKeeperLeases`'.
    """

    def __init__(self, leases: ZooKeeperLeases, *, hand_back: Callable[[str], HandBack],
                 drop_all: Callable[[], None], max_moves: int = 2,
                 drop: Callable[[str], None] | None = None) -> None:
        self.leases = leases
        self.max_moves = max_moves
        self._hand_back = hand_back
        self._drop_all = drop_all
        self._drop = drop
        self.rounds = 0
        self._handing: dict[str, float] = {}  # shards being handed over -> when their hand-over began (monotonic)

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
        ids = [s.shard_id for s in ready]
        held = leases.held
        states = leases.read(sorted(set(ids) | set(held)))
        workers = leases.workers()  # after the leases: see above
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
        for shard_id in step.release:
            self._give_back(shard_id, states[shard_id][1])
        for shard_id in step.take:
            leases.acquire(shard_id, states[shard_id])
        if step.take or step.release:
            log.info("worker %s: %d live workers, %d shards to read; took %s, gave back %s; waits for %s",
                     me, len(workers), len(ids), step.take or "none", step.release or "none",
                     step.wait or "none")
        now_held = leases.held
        return [s for s in ready if s.shard_id in now_held and s.shard_id not in self._handing]

    def _give_back(self, shard_id: str, epoch: int) -> None:
        """Hand ``shard_id`` back and release its lease at ``epoch`` once its checkpoint is stored (in ``owns``).
        A hand-back that cannot finish keeps the shard being handed over, with a warning; so does a release that
        fails (ZooKeeper unreachable), whose error is logged here so the round goes on with its takes."""
        me = self.leases.worker_id
        since = self._handing.setdefault(shard_id, time.monotonic())
        outcome = self._hand_back(shard_id)
        if outcome == "lost":
            del self._handing[shard_id]
            return
        if outcome == "kept":
            log.warning("worker %s keeps the lease of %s until its checkpoint is stored (handed over %.0f s ago; a "
                        "later round tries again)", me, shard_id, time.monotonic() - since)
            return
        try:
            self.leases.release(shard_id, epoch)
        except SpoutError as exc:
            log.warning("worker %s could not give the lease of %s back (handed over %.0f s ago; a later round "
                        "tries again): %s", me, shard_id, time.monotonic() - since, exc)
            return
        del self._handing[shard_id]
