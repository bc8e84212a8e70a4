"""The kill cycle every path shares: wait for progress, wait a random moment, do a fault, sample checkpoints.

A path builds a :class:`Target` (its consumer processes and the process faults it knows), a producer, a ledger
and a checkpoint sampler, then calls :func:`run_faults` with the planned fault kinds and :func:`drain` once the
producer stopped. ZooKeeper restarts and throttling bursts are done here for every path.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from benchmarks.soak.checkpoints import CheckpointSampler
from benchmarks.soak.environment import SoakServers
from benchmarks.soak.faults import THROTTLE, ZOOKEEPER_RESTART, restart_zookeeper, throttle_burst
from benchmarks.soak.ledger import DeliveryLedger, ProgressWatch
from kinesis_spout.testing.process import wait_until

log = logging.getLogger("soak")


class Target(Protocol):
    """A path's consumers. Who calls: :func:`run_faults` and :func:`drain`, on the path's thread."""

    def revive(self) -> list[str]:
        """Start again any consumer that ended on its own; returns what was seen (exit codes, log tails)."""

    def fault(self, kind: str, rng: random.Random) -> str:
        """Do the process fault ``kind`` (a SIGKILL, a pause past the session); returns what was done."""


@dataclass
class PathContext:
    """What a path gets from the runner: the servers, its seeded RNG, the number of faults, a work directory,
    and the time limits (``progress_s``: how long to wait for a delivery before a fault; ``gap_s``: the longest
    random wait after it; ``drain_s``: how long the consumers get to catch up at the end)."""

    servers: SoakServers
    rng: random.Random
    kills: int
    workdir: Path
    progress_s: float = 60.0
    gap_s: float = 1.0
    drain_s: float = 180.0


@dataclass
class FaultStats:
    """The faults done, by kind, with how long each cycle took (random moment + fault + recovery: the time until
    the consumers delivered something new)."""

    done: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    duplicates: Counter[str] = field(default_factory=Counter)  # kind -> duplicates seen in its faults' windows
    fenced: Counter[str] = field(default_factory=Counter)  # kind -> fenced checkpoint writes in those windows
    stall_s: dict[str, float] = field(default_factory=dict)  # kind -> the longest stall in those windows
    windows: "FaultWindows | None" = None  # the per-kind windows, the last one still open after run_faults
    events: list[str] = field(default_factory=list)
    no_progress: int = 0

    def mean_cycle_s(self) -> dict[str, float]:
        return {kind: round(sum(v) / len(v), 2) for kind, v in self.seconds.items() if v}

    def by_kind(self) -> dict[str, dict[str, float]]:
        """Per fault kind: faults, mean cycle seconds, longest stall, duplicates and fenced writes in its windows."""
        means = self.mean_cycle_s()
        return {kind: {"faults": n, "mean_cycle_s": means.get(kind, 0.0),
                       "longest_stall_s": round(self.stall_s.get(kind, 0.0), 1),
                       "duplicates": self.duplicates[kind], "fenced": self.fenced[kind]}
                for kind, n in sorted(self.done.items())}

    def close_window(self) -> None:
        """End the last fault's window (after the drain: what it caused may show until then). Idempotent."""
        if self.windows is not None:
            self.windows.close()


class FaultWindows:
    """Attributes what is seen between one fault's start and the next fault's (the last: the end of the faults)
    to the first one's kind: the duplicates delivered, the fenced checkpoint writes (``fenced()``, a running total,
    when the path counts them) and the longest stall (``watch``). Who calls: :func:`run_faults`."""

    def __init__(self, stats: FaultStats, ledger: DeliveryLedger, watch: ProgressWatch | None,
                 fenced: Callable[[], int] | None) -> None:
        self.stats, self.ledger, self.watch, self.fenced = stats, ledger, watch, fenced
        self.kind: str | None = None
        self.duplicates = self.fences = 0

    def _totals(self) -> tuple[int, int]:
        self.ledger.refresh()
        duplicates = sum(n - 1 for n in self.ledger.counts().values())
        return duplicates, (self.fenced() if self.fenced is not None else 0)

    def close(self) -> None:
        """End the open window, if any, adding what it saw to its kind."""
        if self.kind is None:
            return
        duplicates, fences = self._totals()
        self.stats.duplicates[self.kind] += duplicates - self.duplicates
        self.stats.fenced[self.kind] += fences - self.fences
        if self.watch is not None:
            self.stats.stall_s[self.kind] = max(self.stats.stall_s.get(self.kind, 0.0), self.watch.window_longest_s)
        self.kind = None

    def open(self, kind: str) -> None:
        """End the open window and start one for a fault of ``kind``."""
        self.close()
        self.kind = kind
        self.duplicates, self.fences = self._totals()
        if self.watch is not None:
            self.watch.open_window()


def progressed(ledger: DeliveryLedger) -> Callable[[], bool]:
    """A predicate: whether a new id was delivered since this call."""
    base = ledger.refresh()
    return lambda: ledger.refresh() > base


def recovery(target: Target, ledger: DeliveryLedger, events: list[str]) -> Callable[[], bool]:
    """A predicate: whether a new id was delivered since this call; each call first starts again any consumer
    that died on its own (noted in ``events``)."""
    delivered = progressed(ledger)

    def check() -> bool:
        events.extend(target.revive())
        return delivered()

    return check


def run_faults(ctx: PathContext, target: Target, kinds: list[str], ledger: DeliveryLedger,
               sampler: CheckpointSampler, watch: ProgressWatch | None = None,
               fenced: Callable[[], int] | None = None) -> FaultStats:
    """Do each fault of ``kinds`` in order: once the consumers delivered something (the start), then each a random
    moment after the consumers recovered from the one before (delivered something new since it, or ``progress_s``
    passed). A cycle's time, noted under its kind, runs from the moment it began waiting to that recovery.
    The checkpoints are sampled before each fault; consumers that died on their own are started again. With
    ``watch`` (and ``fenced``, a running total of fenced checkpoint writes), what each fault's window saw is added
    to its kind (:class:`FaultWindows`); the last window stays open for the drain (``stats.close_window()``)."""
    stats = FaultStats()
    windows = stats.windows = FaultWindows(stats, ledger, watch, fenced)
    if not wait_until(progressed(ledger), ctx.progress_s, interval_s=0.1):
        stats.no_progress += 1
        stats.events.append(f"no delivery within {ctx.progress_s:g} s of the start")
    for number, kind in enumerate(kinds, 1):
        began = time.monotonic()
        time.sleep(ctx.rng.uniform(0.0, ctx.gap_s))  # a random moment, not synchronisation
        sampler.sample()
        recovered = recovery(target, ledger, stats.events)
        windows.open(kind)
        if kind == ZOOKEEPER_RESTART:
            what = restart_zookeeper(ctx.servers, ctx.rng)
        elif kind == THROTTLE:
            what = throttle_burst(ctx.servers, ctx.rng)
        else:
            what = target.fault(kind, ctx.rng)
        stats.done[kind] += 1
        if not wait_until(recovered, ctx.progress_s, interval_s=0.1):
            stats.no_progress += 1
            stats.events.append(f"fault {number} ({kind}): no delivery within {ctx.progress_s:g} s after it")
        stats.seconds[kind].append(time.monotonic() - began)
        log.info("fault %d/%d %s: %s (%.1f s with the recovery)", number, len(kinds), kind, what,
                 time.monotonic() - began)
    return stats


def drain(ctx: PathContext, target: Target, ledger: DeliveryLedger, produced: set[str], stats: FaultStats,
          also: Callable[[], bool] | None = None) -> float:
    """Wait up to ``drain_s`` until every produced id was delivered (and ``also()`` holds), reviving consumers
    that end; returns the seconds it took."""
    began = time.monotonic()

    def caught_up() -> bool:
        stats.events.extend(target.revive())
        ledger.refresh()
        if not produced <= ledger.counts().keys():
            return False
        return also is None or also()

    if not wait_until(caught_up, ctx.drain_s, interval_s=0.5):
        stats.events.append(f"not caught up after {ctx.drain_s:g} s of draining")
    return time.monotonic() - began
