"""Path ``readstream-executors-network``: the readStream query of ``readstream-executors`` (``readMode=executors``
on a standalone cluster) with its driver on node ``d0`` and its two Spark workers on nodes ``s1`` and ``s2``, the
master on the host's bridge address (every node reaches it), checkpoints on the three-server ensemble, Kinesis
through the host's relay on the bridge. The new fault:

- ``worker-driver-partition``: a worker's node cut from the driver's node (it still reaches the master, Kinesis
  and ZooKeeper) for 12 to 20 s, past the driver's ``spark.network.timeout`` (8 s): the driver gives that worker's
  executor up for lost by the network, not by a kill (no heartbeat), and asks the master to kill it; the master
  launches another on the same worker, which cannot register with the driver until the cut heals (each one exits
  and is launched again), and the tasks run on the other worker meanwhile. The executor cut off may still read
  Kinesis and write its shards' checkpoints until it is killed.

With SIGKILLs of the driver, of executor JVMs and of Python workers (:mod:`~.spark_driver`). A variant rather than
an option of ``readstream-executors``, so that path's results stay comparable. Checks as on that path: nothing
lost, checkpoints never backwards.
"""

from __future__ import annotations

import random
import time

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.paths.common import SESSION_S, soak_of
from benchmarks.soak.paths.network import NodeNet, network_of
from benchmarks.soak.paths.readstream import query_argv, soak_query
from benchmarks.soak.paths.spark_driver import DRIVER, EXECUTOR, PYTHON_WORKER, SparkDriverTarget
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult
from benchmarks.soak.spark_cluster import SparkCluster
from kinesis_spout.testing.partitions import heal, partition

NAME = "readstream-executors-network"
WORKER_CUT = "worker-driver-partition"
NETWORK_KINDS = (WORKER_CUT,)
#: the driver gives up on an executor's heartbeats after this long
NETWORK_TIMEOUT_S = 8
#: 52 worker cuts of 72 faults, 8 driver SIGKILLs at least
MIX = FaultMix(weights={WORKER_CUT: 2, EXECUTOR: 1, PYTHON_WORKER: 1}, at_least={WORKER_CUT: 0.72, DRIVER: 0.1})


class WorkerCutTarget(SparkDriverTarget):
    """The driver on node ``d0`` and the workers on ``s1``, ``s2``; a worker cut goes through the partitions."""

    def __init__(self, driver: Consumer, cluster: SparkCluster, net: NodeNet) -> None:
        super().__init__(driver, cluster.worker_pids)
        self.net = net

    def fault(self, kind: str, rng: random.Random) -> str:
        if kind != WORKER_CUT:
            return super().fault(kind, rng)
        driver, worker = self.net.nodes[0], rng.choice(self.net.nodes[1:])
        held = rng.uniform(NETWORK_TIMEOUT_S + 4.0, NETWORK_TIMEOUT_S + 12.0)
        partition(worker, driver)
        try:
            time.sleep(held)  # the partition itself
        finally:
            heal(worker, driver)
        return f"worker node {worker.name} cut from the driver's node for {held:.1f} s " \
               f"(spark.network.timeout {NETWORK_TIMEOUT_S} s)"


def run(ctx: PathContext) -> PathResult:
    """Run the readstream-executors-network path; see the module's docstring."""
    with network_of(ctx, ["d0", "s1", "s2"], relays=False) as net:
        if isinstance(net, str):
            return PathResult(NAME, built=False, notes=[net])
        driver_node, workers = net.nodes[0], net.nodes[1:]
        cluster = SparkCluster(ctx.workdir / "spark-cluster-network", master_host=net.network.host_address,
                               workers=[(node.address, node) for node in workers])
        with cluster, soak_of(ctx, NAME, zk=net.zk) as soak:
            argv = query_argv(soak, cluster.url, "executors", net.bridge_url, net.ensemble.hosts)
            argv += ["--conf", f"spark.network.timeout={NETWORK_TIMEOUT_S}s",
                     "--conf", "spark.executor.heartbeatInterval=1s", "--conf", "spark.network.timeoutInterval=2s",
                     "--conf", f"spark.driver.host={driver_node.address}"]
            env = {**child_env(), "SPARK_LOCAL_IP": driver_node.address}
            driver = Consumer(f"{NAME}-driver", driver_node.command(argv), soak.ledger.directory / "driver.out", env,
                              CHECKOUT)
            result = soak_query(soak, WorkerCutTarget(driver, cluster, net), MIX)
        result.notes.append(f"{result.faults.get(WORKER_CUT, 0)} network faults (worker cuts); session timeout "
                            f"{SESSION_S:g} s; master {cluster.url}, workers on {[n.address for n in workers]}")
        result.findings += net.findings
        return result
