"""Paths ``readstream-driver`` and ``readstream-executors``: a ``kinesis_spout`` readStream query with a Spark
checkpoint location (:mod:`benchmarks.soak.children.readstream_consumer`).

``readstream-driver`` runs ``readMode=driver`` on ``local[2,4]``; ``readstream-executors`` runs
``readMode=executors`` on a standalone cluster (:mod:`benchmarks.soak.spark_cluster`). Faults: those of
:mod:`~.spark_driver` (driver kills at least one in four). Checks: nothing lost, checkpoints never backwards.
"""

from __future__ import annotations

import sys

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.paths.common import SESSION_S, Soak, soak_of
from benchmarks.soak.paths.network import NodeNet, reached_from
from benchmarks.soak.paths.spark_driver import CLUSTER_MIX, MIX, SparkDriverTarget
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult
from benchmarks.soak.spark_cluster import SparkCluster

#: the master of ``readstream-driver`` (and ``readstream-driver-network``): two cores, a task tried four times
LOCAL_MASTER = "local[2,4]"


def query_argv(soak: Soak, master: str, read_mode: str, endpoint_url: str, zookeeper: str) -> list[str]:
    """The query driver's command line, its Spark checkpoint in the path's directory."""
    directory = soak.ledger.directory
    return [sys.executable, "-m", "benchmarks.soak.children.readstream_consumer", "--master", master,
            "--read-mode", read_mode, "--stream", soak.stream, "--endpoint-url", endpoint_url,
            "--zookeeper", zookeeper, "--prefix", soak.prefix, "--app", soak.app,
            "--log", str(directory / "delivered.log"), "--checkpoint-location", str(directory / "spark-checkpoint"),
            "--session-timeout", str(SESSION_S)]


def query_driver(ctx: PathContext, soak: Soak, master: str, read_mode: str, net: NodeNet | None = None) -> Consumer:
    """The query's driver process (not started); with ``net``, on its slot 0's node, reaching the servers through
    that node's relay (path ``readstream-driver-network``)."""
    argv = query_argv(soak, master, read_mode, *reached_from(ctx, net))
    if net is not None:
        argv = net.command(0, argv)
    return Consumer(f"{soak.name}-driver", argv, soak.ledger.directory / "driver.out", child_env(), CHECKOUT)


def soak_query(soak: Soak, target: SparkDriverTarget, mix: FaultMix) -> PathResult:
    result = soak.run(target, mix, target.driver.start, target.driver.stop)
    result.notes += [f"driver started {target.driver.starts} times", *target.notes]
    if not soak.sampler.highest:
        result.notes.append(f"no checkpoint found in ZooKeeper under {soak.sampler.base}: monotonicity not checked")
    return result


def run_driver(ctx: PathContext) -> PathResult:
    """Run the readstream-driver path; see the module's docstring."""
    with soak_of(ctx, "readstream-driver") as soak:
        return soak_query(soak, SparkDriverTarget(query_driver(ctx, soak, LOCAL_MASTER, "driver")), MIX)


def run_executors(ctx: PathContext) -> PathResult:
    """Run the readstream-executors path; see the module's docstring."""
    with SparkCluster(ctx.workdir / "spark-cluster") as cluster, soak_of(ctx, "readstream-executors") as soak:
        target = SparkDriverTarget(query_driver(ctx, soak, cluster.url, "executors"), cluster.worker_pids)
        result = soak_query(soak, target, CLUSTER_MIX)
        result.notes.append(f"standalone cluster {cluster.url}, workers on 127.0.0.1 and 127.0.0.2")
        return result
