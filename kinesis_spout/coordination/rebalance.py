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
    taking the shard's records, lets its in-flight records finish (bounded), writes their checkpoint, and then
    this balancer releases the lease. ``max_moves`` bounds how many leases this worker gives up per round for
    balance (a finished shard's lease is always given up).
    """

    def __init__(self, leases: ZooKeeperLeases, *, hand_back: Callable[[str], None],
                 drop_all: Callable[[], None], max_moves: int = 2) -> None:
        self.leases = leases
        self.max_moves = max_moves
        self._hand_back = hand_back
        self._drop_all = drop_all
        self.rounds = 0

    def owns(self, ready: list[Shard]) -> list[Shard]:
        """One round over ``ready`` (the shards that may be read now); returns those this worker holds after it."""
        self.rounds += 1
        leases = self.leases
        if not leases.registered():  # a lost session took our worker node (and our claim on every lease)
            if leases.held:
                log.warning("worker %s lost its ZooKeeper session: dropping its %d shards and joining again",
                            leases.worker_id, len(leases.held))
                self._drop_all()
            leases.join()
        ids = [s.shard_id for s in ready]
        held = leases.held
        workers = leases.workers()
        states = leases.read(sorted(set(ids) | set(held)))
        owners = {shard: owner for shard, (owner, _) in states.items()}
        step = plan(leases.worker_id, ids, workers, owners, sorted(held), self.max_moves)
        for shard_id in step.release:
            self._hand_back(shard_id)
            leases.release(shard_id)
        for shard_id in step.take:
            leases.acquire(shard_id, states[shard_id])
        if step.take or step.release:
            log.info("worker %s: %d live workers, %d shards to read; took %s, gave back %s; waits for %s",
                     leases.worker_id, len(workers), len(ids), step.take or "none", step.release or "none",
                     step.wait or "none")
        now_held = leases.held
        return [s for s in ready if s.shard_id in now_held]
