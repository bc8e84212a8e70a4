"""Which worker should own which shard: even, sticky, and computed the same way by every worker.

PURE: no I/O, no clock. Every worker of an app runs :func:`assign` on what it read from ZooKeeper (the live
workers, each shard's current owner) and acts only on its own part of the result (:func:`plan`): it takes the
shards assigned to it that nobody live owns, and gives up, a few per round, the shards it owns that are assigned
to someone else. It never takes a shard from a live owner: that owner releases it first (after its in-flight
records are done and their checkpoint is written), so a lease moves without replays and never has two readers.

The rule:

- quotas: with ``S`` shards and ``n`` live workers, each worker gets ``S // n`` and ``S % n`` of them one more;
  the extra ones go first to the workers that hold more than ``S // n`` now, then to the others, by worker id in
  each group, so nothing moves needlessly;
- sticky: a live owner keeps its shards, up to its quota (its lowest shard ids first);
- the rest go, in shard-id order, each to the worker below its quota that ranks highest for that shard by a hash
  of the shard's and the worker's ids (rendezvous hashing).

So counts differ by at most one, and when nothing changes nothing moves. And workers that plan from views a few
takes apart agree: a worker that took its free shards (or the first of them by id) changes neither the quotas nor
any other worker's free shards, because a free shard's worker depends on the hash, not on how many shards went
before it; so workers taking a failed worker's shards at once do not race each other for the same leases.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping, Sequence

__all__ = ["Plan", "assign", "plan"]


def assign(shards: Sequence[str], workers: Sequence[str], owners: Mapping[str, str | None]) -> dict[str, str]:
    """The target owner of each of ``shards`` among the live ``workers``, given the current ``owners`` (an owner
    that is not a live worker counts as none). Empty when there are no workers."""
    live = sorted(set(workers))
    if not live:
        return {}
    ordered = sorted(set(shards))
    held: dict[str, list[str]] = {w: [] for w in live}
    for shard in ordered:
        owner = owners.get(shard)
        if owner is not None and owner in held:
            held[owner].append(shard)
    base, extra = divmod(len(ordered), len(live))
    by_holding = sorted(live, key=lambda w: (len(held[w]) <= base, w))
    quota = {w: base + (1 if i < extra else 0) for i, w in enumerate(by_holding)}
    target: dict[str, str] = {}
    count = {w: 0 for w in live}
    for worker in live:
        for shard in held[worker][:quota[worker]]:
            target[shard] = worker
            count[worker] += 1
    for shard in ordered:
        if shard not in target:
            worker = max((w for w in live if count[w] < quota[w]), key=lambda w: _rank(shard, w))
            target[shard] = worker
            count[worker] += 1
    return target


def _rank(shard: str, worker: str) -> int:
    """How highly ``worker`` ranks for the free ``shard``: a hash of both ids, the same on every worker."""
    return int.from_bytes(hashlib.blake2b(f"{shard}\n{worker}".encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Plan:
    """What one worker does in a round: ``take`` (assigned to it, owned by no live worker), ``release`` (owned by it,
    assigned elsewhere, at most ``max_moves``; or no longer to be read at all), ``wait`` (assigned to it, still
    owned by a live worker that will release it)."""

    take: list[str] = field(default_factory=list)
    release: list[str] = field(default_factory=list)
    wait: list[str] = field(default_factory=list)


def plan(me: str, shards: Sequence[str], workers: Sequence[str], owners: Mapping[str, str | None],
         held: Sequence[str], max_moves: int = 2, handing: Sequence[str] = ()) -> Plan:
    """This worker's part of :func:`assign`. ``held`` are the shards it holds leases for (``owners`` may lag behind
    it). A shard whose lease names ``me`` in ``owners`` counts as this worker's too, held or not (a take whose reply
    was lost, a give-back whose write failed): it is taken again (a new epoch) when assigned to ``me``, released
    otherwise. A shard of this worker's not in ``shards`` (finished, or gone from the stream) is released at once.
    ``handing`` are shards whose hand-over began in an earlier round and is not done: while they are still to move
    they come first among the ``max_moves`` (so a hand-over, once begun, is finished before another begins)."""
    live = set(workers) | {me}
    target = assign(shards, sorted(live), owners)
    holding = set(held)
    mine = holding | {s for s, owner in owners.items() if owner == me}
    take = sorted(s for s, w in target.items() if w == me and s not in holding
                  and (owners.get(s) is None or owners.get(s) not in live or owners.get(s) == me))
    wait = sorted(s for s, w in target.items() if w == me and s not in holding and s not in take)
    gone = sorted(s for s in mine if s not in target)
    to_move = sorted(s for s in mine if s in target and target[s] != me)
    begun = [s for s in to_move if s in set(handing)]
    moving = begun + [s for s in to_move if s not in begun][:max(0, max_moves - len(begun))]
    return Plan(take=take, release=gone + moving, wait=wait)
