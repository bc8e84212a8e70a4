"""Path ``spout-network``: the static KinesisSpout consumer of path ``spout`` on a node of its own, its checkpoints
on a three-server ZooKeeper ensemble, under the network faults of :mod:`~.network` that a static spout meets.

A variant of path ``spout`` rather than an option of it, so that ``spout``'s results (one ZooKeeper server, process
faults only) stay comparable run to run, and each path replays its own seed alone (``--paths spout-network``).

Faults, drawn with the seeded RNG: the consumer's node cut from ZooKeeper for less (``zk-partition-short``) and
more (``zk-partition-long``) than its session, the ensemble's leader cut from its followers
(``zk-leader-partition``), the node reaching only a follower cut from the quorum (``zk-minority``), the node cut
from Kinesis only (``kinesis-partition``), its link slowed (``slow-link``), and the consumer SIGKILLed and started
again (``sigkill-consumer``). A static spout owns every shard and has no lease, so a cut from ZooKeeper costs it
its checkpoint writes (retried once the session is back, or written again by a new session) and nothing else.
Checks as on path ``spout``: nothing lost, checkpoints never backwards; per kind: duplicates and the longest stall.
"""

from __future__ import annotations

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.paths.common import SESSION_S, soak_of
from benchmarks.soak.paths.network import (
    KINESIS,
    LEADER,
    MINORITY,
    NETWORK_KINDS,
    NETWORK_SHARES,
    SLOW,
    ZK_LONG,
    ZK_SHORT,
    NetworkFaults,
    NodeNet,
    network_of,
)
from benchmarks.soak.paths.spout import SIGKILL, SpoutTarget, consumer_argv
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult

NAME = "spout-network"
MIX = FaultMix(weights={ZK_SHORT: 2, ZK_LONG: 2, LEADER: 2, MINORITY: 1, KINESIS: 1.5, SLOW: 1, SIGKILL: 1.5},
               at_least={**NETWORK_SHARES, SIGKILL: 0.1})


class SpoutNetworkTarget(NetworkFaults, SpoutTarget):
    """The consumer of :class:`SpoutTarget` on node ``c0``; the network faults go to :class:`NodeNet`."""

    def __init__(self, consumer: Consumer, net: NodeNet) -> None:
        super().__init__(consumer)
        self.net = net
        net.labels = [consumer.name]


def run(ctx: PathContext) -> PathResult:
    """Run the spout-network path; see the module's docstring."""
    with network_of(ctx, ["c0"]) as net:
        if isinstance(net, str):
            return PathResult(NAME, built=False, notes=[net])
        with soak_of(ctx, NAME, zk=net.zk) as soak:
            argv = net.command(0, consumer_argv(soak, net.endpoint_url(0), net.zookeeper(0)))
            consumer = Consumer("spout-consumer", argv, soak.ledger.directory / "consumer.out", child_env(),
                                CHECKOUT)
            result = soak.run(SpoutNetworkTarget(consumer, net), MIX, consumer.start, consumer.stop)
        network_faults = sum(n for kind, n in result.faults.items() if kind in NETWORK_KINDS)
        result.notes.append(f"{network_faults} network faults; consumer started {consumer.starts} times; "
                            f"session timeout {SESSION_S:g} s")
        result.findings += net.findings
        return result
