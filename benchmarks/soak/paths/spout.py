"""Path ``spout``: one static KinesisSpout consumer process (:mod:`benchmarks.soak.children.spout_consumer`).

Faults: SIGKILL of the consumer (started again at once), a pause past its ZooKeeper session (SIGSTOP, then
SIGCONT), ZooKeeper restarts and throttling bursts. Checks: nothing lost, checkpoints never backwards.
"""

from __future__ import annotations

import random
import sys

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import THROTTLE, ZOOKEEPER_RESTART, FaultMix
from benchmarks.soak.paths.common import PAUSE_S, SESSION_S, Soak, soak_of
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult

SIGKILL = "sigkill-consumer"
SESSION_EXPIRY = "session-expiry"
MIX = FaultMix(weights={SIGKILL: 5, SESSION_EXPIRY: 1.5, ZOOKEEPER_RESTART: 1.5, THROTTLE: 2},
               at_least={SIGKILL: 0.7})  # 51 SIGKILLs of 72 faults


class SpoutTarget:
    """The one consumer process. Who calls: the fault cycle, on the path's thread."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def revive(self) -> list[str]:
        return self.consumer.exits[-1:] if self.consumer.revive() else []

    def fault(self, kind: str, rng: random.Random) -> str:
        if kind == SIGKILL:
            self.consumer.kill()
            self.consumer.start()
            return "consumer SIGKILLed and started again"
        if kind == SESSION_EXPIRY:
            self.consumer.pause(PAUSE_S)
            return f"consumer paused {PAUSE_S:g} s (session {SESSION_S:g} s)"
        raise ValueError(f"the spout path has no fault {kind!r}")


def consumer_argv(soak: Soak, endpoint_url: str, zookeeper: str) -> list[str]:
    """The consumer's command line, reaching Kinesis at ``endpoint_url`` and ZooKeeper at ``zookeeper``."""
    return [sys.executable, "-m", "benchmarks.soak.children.spout_consumer", "--stream", soak.stream,
            "--endpoint-url", endpoint_url, "--zookeeper", zookeeper, "--prefix", soak.prefix, "--app", soak.app,
            "--log", str(soak.ledger.directory / "delivered.log"), "--session-timeout", str(SESSION_S)]


def run(ctx: PathContext) -> PathResult:
    """Run the spout path; see the module's docstring."""
    with soak_of(ctx, "spout") as soak:
        argv = consumer_argv(soak, ctx.servers.endpoint_url, ctx.servers.zookeeper.hosts)
        consumer = Consumer("spout-consumer", argv, ctx.workdir / "spout" / "consumer.out", child_env(), CHECKOUT)
        result = soak.run(SpoutTarget(consumer), MIX, consumer.start, consumer.stop)
        result.notes.append(f"consumer started {consumer.starts} times")
        return result
