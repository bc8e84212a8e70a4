"""The seeded fault schedule and the faults every path shares (ZooKeeper restarts, throttling bursts).

A path names its fault kinds with weights and the kinds that must make up a minimum share (a driver kill in at
least one fault of five on the Spark paths); :func:`plan` turns them into the run's list of faults from the seeded
RNG, so ``--seed`` replays the same faults (kinds, order, moments and parameters; the processes' own timing
still varies). Process faults (SIGKILL, SIGSTOP) are the path's own; the two below act on the servers.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from benchmarks.soak.environment import SoakServers

THROTTLED = "ProvisionedThroughputExceededException"
ZOOKEEPER_RESTART = "zookeeper-restart"
THROTTLE = "throttle"


@dataclass(frozen=True)
class FaultMix:
    """The faults of a path: ``weights`` by kind; ``at_least`` kind -> the share of all faults it must have."""

    weights: dict[str, float]
    at_least: dict[str, float]


def plan(rng: random.Random, kills: int, mix: FaultMix) -> list[str]:
    """The kinds of ``kills`` faults in order: the required shares first (rounded up), the rest drawn by weight,
    then shuffled."""
    kinds: list[str] = []
    for kind, share in mix.at_least.items():
        kinds += [kind] * min(kills - len(kinds), math.ceil(kills * share))
    names = list(mix.weights)
    weights = [mix.weights[k] for k in names]
    kinds += rng.choices(names, weights, k=kills - len(kinds))
    rng.shuffle(kinds)
    return kinds


def restart_zookeeper(servers: SoakServers, rng: random.Random) -> str:
    """Stop ZooKeeper (a crash or a clean stop) for 0.5 to 3 s, then start it again. Returns what was done."""
    crash = rng.random() < 0.5
    down = rng.uniform(0.5, 3.0)
    servers.restart_zookeeper(down, crash)
    return f"ZooKeeper {'killed' if crash else 'stopped'} for {down:.1f} s"


def throttle_burst(servers: SoakServers, rng: random.Random) -> str:
    """Answer the next 5 to 30 ``GetRecords`` calls (and some ``PutRecords`` calls) with throttling errors."""
    assert servers.proxy is not None
    reads = rng.randint(5, 30)
    puts = rng.randint(0, 5)
    servers.proxy.inject("GetRecords", THROTTLED, times=reads)
    if puts:
        servers.proxy.inject("PutRecords", THROTTLED, times=puts)
    return f"{reads} GetRecords and {puts} PutRecords throttled"
