"""Paths ``pipeline-network``, ``exactly-once-network`` and ``readstream-driver-network``: the Spark driver of paths
``pipeline``, ``exactly-once`` and ``readstream-driver`` (a local Spark session running a SpoutPipeline, or the
readStream query with ``readMode=driver`` on ``local[2,4]``: driver, JVM and Python workers in one process group)
on a node of its own, its checkpoints (and the pipeline's leases) on a three-server ZooKeeper ensemble, reaching
Kinesis (and, exactly once, the Redis of its batch log and counts) through the node's relay, under the network
faults of :mod:`~.network`.

Variants of ``pipeline``, ``exactly-once`` and ``readstream-driver`` rather than options of them, so that those
paths' results (one ZooKeeper server, process faults only) stay comparable run to run, and each path replays its
own seed alone.

Faults, drawn with the seeded RNG: every kind of :data:`~.network.NETWORK_KINDS` on the driver's node (a cut from
ZooKeeper shorter and longer than the session, the leader cut from its followers, the node reaching only a follower
without quorum, a cut from Kinesis only, a slow link), with SIGKILLs of the driver and of its Python workers (and,
for the readStream query, of the driver's JVM alone, as path ``readstream-driver`` does). The pipeline's one driver
holds every shard's lease: a cut past the session loses them, and the driver, still reaching Kinesis and Redis, must
not checkpoint (fenced) nor commit (exactly once: its txids are fenced by the batch log) what it no longer owns.
The readStream query holds no lease: its driver reads every shard and copies each committed batch's end to the
shards' ZooKeeper checkpoints (Spark's checkpoint location holds the truth; a write ZooKeeper does not take is tried
again after the next batch), so a cut from ZooKeeper costs it checkpoint writes and a cut from Kinesis its reads.
Checks as on the paths it varies: nothing lost, checkpoints never backwards and, exactly once, the stored counts
exact key by key.
"""

from __future__ import annotations

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.paths import exactly_once
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
from benchmarks.soak.paths.pipeline import pipeline_driver
from benchmarks.soak.paths.readstream import LOCAL_MASTER, query_driver, soak_query
from benchmarks.soak.paths.spark_driver import DRIVER, JVM, PYTHON_WORKER, SparkDriverTarget
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult

#: 52 network faults of 72, 6 driver SIGKILLs at least (a driver restart is the slowest cycle)
MIX = FaultMix(weights={ZK_SHORT: 2, ZK_LONG: 2, LEADER: 1, MINORITY: 1, KINESIS: 1, SLOW: 1, PYTHON_WORKER: 2},
               at_least={**NETWORK_SHARES, DRIVER: 0.08})
#: readstream-driver-network: the same, with 5 Python worker SIGKILLs and 2 driver JVM SIGKILLs (a kill of path
#: readstream-driver) at least
READSTREAM_MIX = FaultMix(weights={**MIX.weights, JVM: 1},
                          at_least={**MIX.at_least, PYTHON_WORKER: 0.06, JVM: 0.02})


class NetworkDriverTarget(NetworkFaults, SparkDriverTarget):
    """The driver of :class:`SparkDriverTarget` on node ``d0``; the network faults go to :class:`NodeNet`."""

    def __init__(self, driver: Consumer, net: NodeNet) -> None:
        super().__init__(driver)
        self.net = net
        net.labels = [driver.name]


def _notes(result: PathResult, net: NodeNet) -> PathResult:
    result.notes.append(f"{sum(n for kind, n in result.faults.items() if kind in NETWORK_KINDS)} network faults; "
                        f"session timeout {SESSION_S:g} s")
    result.findings += net.findings
    return result


def run_pipeline(ctx: PathContext) -> PathResult:
    """Run the pipeline-network path; see the module's docstring."""
    with network_of(ctx, ["d0"]) as net:
        if isinstance(net, str):
            return PathResult("pipeline-network", built=False, notes=[net])
        with soak_of(ctx, "pipeline-network", zk=net.zk) as soak:
            target = NetworkDriverTarget(pipeline_driver(ctx, soak, net=net), net)
            result = soak.run(target, MIX, target.driver.start, target.driver.stop)
            result.notes += [f"driver started {target.driver.starts} times", *target.notes]
        return _notes(result, net)


def run_exactly_once(ctx: PathContext) -> PathResult:
    """Run the exactly-once-network path; see the module's docstring."""
    with network_of(ctx, ["d0"], redis=True) as net:
        if isinstance(net, str):
            return PathResult("exactly-once-network", built=False, notes=[net])
        return _notes(exactly_once.run_exactly_once(ctx, "exactly-once-network",
                                          lambda driver: NetworkDriverTarget(driver, net), MIX, net), net)


def run_readstream_driver(ctx: PathContext) -> PathResult:
    """Run the readstream-driver-network path; see the module's docstring."""
    with network_of(ctx, ["d0"]) as net:
        if isinstance(net, str):
            return PathResult("readstream-driver-network", built=False, notes=[net])
        with soak_of(ctx, "readstream-driver-network", zk=net.zk) as soak:
            driver = query_driver(ctx, soak, LOCAL_MASTER, "driver", net)
            result = soak_query(soak, NetworkDriverTarget(driver, net), READSTREAM_MIX)
        return _notes(result, net)
