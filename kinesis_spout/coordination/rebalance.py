"""One worker's lease rounds: read who is live and who holds what, give back and take leases by the plan.

Run on the spout's shard sync thread (:class:`~kinesis_spout.coordination.sync.ShardSync` calls :meth:`owns`
with the shards that may be read now). The pure rule is :mod:`kinesis_spout.coordination.assignment`; the
ZooKeeper primitives are :mod:`kinesis_spout.coordination.leases`.
"""

from __future__ import annotations

import logging
from typing import Callable

from kinesis_spout.coordination.assignment import plan
from kinesis_spout.coordination.leases import ZooKeeperLeases
from kinesis_spout.kinesis.shards import Shard

__all__ = ["LeaseBalancer"]

log = logging.getLogger("kinesis_spout.coordination")


class LeaseBalancer:
    """Takes and gives back one worker's shard leases, a round at a time.

    Who calls: the shard sync thread (``owns``, each round). ``hand_back(shard_id)`` is the spout's: it stops
    taking the shard's records, lets its in-flight records finish (bounded), writes their checkpoint and says
    whether it is stored; only then does this balancer release the lease (else a later round tries again).
    ``drop(shard_id)`` (default: none) is the spout's too: it stops reading a shard at once, writing nothing more
    for it, when the round finds its lease moved past the held epoch.
    ``max_moves`` bounds how many leases this worker gives up per round for balance (a finished shard's lease is
    always given up). All of it runs on the calling thread; the held leases are :class:`ZooKeeperLeases`'.
    """

    def __init__(self, leases: ZooKeeperLeases, *, hand_back: Callable[[str], bool],
                 drop_all: Callable[[], None], max_moves: int = 2,
                 drop: Callable[[str], None] | None = None) -> None:
        self.leases = leases
        self.max_moves = max_moves
        self._hand_back = hand_back
        self._drop_all = drop_all
        self._drop = drop
        self.rounds = 0

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
        step = plan(me, ids, workers, owners, sorted(held), self.max_moves)
        for shard_id in step.release:
            if self._hand_back(shard_id):
                leases.release(shard_id, states[shard_id][1])
            else:
                log.warning("worker %s keeps the lease of %s until its checkpoint is stored (a later round gives "
                            "it back)", me, shard_id)
        for shard_id in step.take:
            leases.acquire(shard_id, states[shard_id])
        if step.take or step.release:
            log.info("worker %s: %d live workers, %d shards to read; took %s, gave back %s; waits for %s",
                     me, len(workers), len(ids), step.take or "none", step.release or "none",
                     step.wait or "none")
        now_held = leases.held
        return [s for s in ready if s.shard_id in now_held]
