"""Path ``pipeline``: a SpoutPipeline (at least once, the default coordination: leases, as ZooKeeper is configured)
in a Spark driver process (:mod:`benchmarks.soak.children.pipeline_consumer`), with the faults of
:mod:`~.spark_driver`. Checks: nothing lost, checkpoints never backwards."""

from __future__ import annotations

import sys

from benchmarks.soak.cycle import PathContext
from benchmarks.soak.environment import CHECKOUT, child_env
from benchmarks.soak.paths.common import SESSION_S, Soak, soak_of
from benchmarks.soak.paths.network import NodeNet, reached_from
from benchmarks.soak.paths.spark_driver import MIX, SparkDriverTarget
from benchmarks.soak.processes import Consumer
from benchmarks.soak.report import PathResult


def pipeline_driver(ctx: PathContext, soak: Soak, *extra: str, net: NodeNet | None = None) -> Consumer:
    """The pipeline's driver process (not started); with ``net``, on its slot 0's node, reaching the servers
    through that node's relay."""
    endpoint_url, zookeeper = reached_from(ctx, net)
    argv = [sys.executable, "-m", "benchmarks.soak.children.pipeline_consumer", "--stream", soak.stream,
            "--endpoint-url", endpoint_url, "--zookeeper", zookeeper,
            "--prefix", soak.prefix, "--app", soak.app, "--log", str(soak.ledger.directory / "delivered.log"),
            "--session-timeout", str(SESSION_S), *extra]
    if net is not None:
        argv = net.command(0, argv)
    return Consumer(f"{soak.name}-driver", argv, soak.ledger.directory / "driver.out", child_env(), CHECKOUT)


def run(ctx: PathContext) -> PathResult:
    """Run the pipeline path; see the module's docstring."""
    with soak_of(ctx, "pipeline") as soak:
        target = SparkDriverTarget(pipeline_driver(ctx, soak))
        result = soak.run(target, MIX, target.driver.start, target.driver.stop)
        result.notes += [f"driver started {target.driver.starts} times", *target.notes]
        return result
