"""Pieces the paths share: the producer, ledger, progress watch and checkpoint sampler of one path, run around
its fault cycles, and the result they give."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from benchmarks.soak.checkpoints import CheckpointSampler
from benchmarks.soak.cycle import FaultStats, PathContext, Target, drain, run_faults
from benchmarks.soak.faults import FaultMix, plan
from benchmarks.soak.ledger import DeliveryLedger, ProgressWatch
from benchmarks.soak.producer import Producer
from benchmarks.soak.report import PathResult

SHARDS = 4
SESSION_S = 4.0
#: SIGSTOP this long: past the session timeout, so the session expires while the consumer is paused
PAUSE_S = SESSION_S + 3.0


@dataclass
class Soak:
    """One path's run: its stream, producer, ledger, progress watch and checkpoint sampler."""

    ctx: PathContext
    name: str
    stream: str
    prefix: str
    app: str
    producer: Producer
    ledger: DeliveryLedger
    watch: ProgressWatch
    sampler: CheckpointSampler
    result: PathResult

    def soak(self, target: Target, mix: FaultMix, also: Callable[[], bool] | None = None,
             fenced: Callable[[], int] | None = None) -> FaultStats:
        """Do the planned faults under the live producer, stop it, drain, and count the deliveries (``fenced``: a
        running total of fenced checkpoint writes, for the per-kind report)."""
        kinds = plan(self.ctx.rng, self.ctx.kills, mix)
        stats = run_faults(self.ctx, target, kinds, self.ledger, self.sampler, self.watch, fenced)
        self.producer.stop()
        self.result.drain_s = drain(self.ctx, target, self.ledger, set(self.producer.produced()), stats, also)
        stats.close_window()  # what the last fault caused shows up to the end of the drain
        return stats

    def run(self, target: Target, mix: FaultMix, start: Callable[[], object], stop: Callable[[], object],
            also: Callable[[], bool] | None = None, fenced: Callable[[], int] | None = None) -> PathResult:
        """``start()`` the path's consumers, :meth:`soak` them, ``stop()`` them in any case, then :meth:`finish`."""
        start()
        try:
            stats = self.soak(target, mix, also, fenced)
        finally:
            stop()
        return self.finish(stats)

    def finish(self, stats: FaultStats) -> PathResult:
        """Sample the checkpoints a last time and fill the result (after the consumers were stopped)."""
        self.sampler.sample()
        self.result.longest_stall_s = round(self.watch.stop(), 1)
        self.ledger.refresh()
        self.result.count_deliveries(self.producer.produced(), self.ledger.counts(),
                                     self.sampler.highest or None)
        self.result.take_faults(stats, self.sampler)
        if self.producer.refused:
            self.result.notes.append(f"{self.producer.refused} put calls throttled and retried by the producer")
        return self.result


@contextmanager
def soak_of(ctx: PathContext, name: str, shards: int = SHARDS, rate: float = 100.0, zk: Any = None,
            stalls_by_shard: bool = False) -> Iterator[Soak]:
    """A stream of ``shards`` shards, a started producer (``rate`` records/s) and progress watch; the wall time
    is filled on exit, and the producer and watch are stopped in any case. ``zk``: the kazoo client the checkpoints
    are sampled with (default: one of the soak's ZooKeeper); ``stalls_by_shard``: a stall is a shard's (see
    :class:`ProgressWatch`)."""
    began = time.monotonic()
    servers = ctx.servers
    stream = servers.create_stream(name, shards)
    prefix = f"/soak/{name}-{stream[-6:]}"
    app = f"soak-{name}"
    directory = ctx.workdir / name
    directory.mkdir(parents=True, exist_ok=True)
    producer = Producer(servers.endpoint_url, stream, rate=rate)
    ledger = DeliveryLedger(directory)
    watch = ProgressWatch(ledger, producer.count, by_shard=producer.shard_counts if stalls_by_shard else None)
    sampler = CheckpointSampler(zk if zk is not None else servers.zk_client(),
                                f"{prefix}/{app}/{stream}/checkpoints")
    soak = Soak(ctx, name, stream, prefix, app, producer, ledger, watch, sampler, PathResult(name))
    producer.start()
    watch.start()
    try:
        yield soak
    finally:
        producer.stop()
        watch.stop()
        soak.result.wall_s = round(time.monotonic() - began, 1)
