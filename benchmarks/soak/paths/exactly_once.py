"""Path ``exactly-once``: a SpoutPipeline in exactly-once mode (batch log on Redis) counting each record's key
into an OpaqueMap on Redis, in a Spark driver process (:mod:`benchmarks.soak.children.pipeline_consumer` with
``--redis``), with the faults of :mod:`~.spark_driver`. Checks: nothing lost, checkpoints never backwards, and
the stored counts EXACTLY equal to the counts produced, key by key."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Callable

from benchmarks.soak.children.pipeline_consumer import state_factory
from benchmarks.soak.cycle import PathContext
from benchmarks.soak.faults import FaultMix
from benchmarks.soak.paths.common import soak_of
from benchmarks.soak.paths.network import NodeNet
from benchmarks.soak.paths.pipeline import pipeline_driver
from benchmarks.soak.paths.spark_driver import MIX, SparkDriverTarget
from benchmarks.soak.processes import Consumer
from benchmarks.soak.producer import KEYS
from benchmarks.soak.report import PathResult


def stored_counts(redis_url: str, namespace: str) -> Counter[str]:
    """The counts the pipeline stored, by key (keys never counted are left out)."""
    state = state_factory(redis_url, namespace).make_state()
    keys = [f"k{i}" for i in range(KEYS)]
    try:
        return Counter({k: n for k, n in zip(keys, state.multi_get([(k,) for k in keys])) if n})
    finally:
        state.close()


def run(ctx: PathContext) -> PathResult:
    """Run the exactly-once path; see the module's docstring."""
    return run_exactly_once(ctx, "exactly-once", SparkDriverTarget, MIX)


def run_exactly_once(ctx: PathContext, name: str, target_of: Callable[[Consumer], SparkDriverTarget], mix: FaultMix,
                     net: NodeNet | None = None) -> PathResult:
    """Run path ``name``: the exactly-once pipeline under ``mix``'s faults done by ``target_of(driver)``; with
    ``net``, the driver on its slot 0's node (its checkpoints on ``net``'s ensemble, Redis through its relay)."""
    assert ctx.servers.redis is not None, "the exactly-once path needs the Redis server"
    redis_url = ctx.servers.redis.url
    namespace = f"soak-{uuid.uuid4().hex[:8]}"
    with soak_of(ctx, name, zk=net.zk if net is not None else None) as soak:
        driver_redis = net.redis_url(0) if net is not None else redis_url
        target = target_of(pipeline_driver(ctx, soak, "--redis", driver_redis, "--namespace", namespace, net=net))

        def exact() -> bool:
            return stored_counts(redis_url, namespace) == soak.producer.key_counts()

        result = soak.run(target, mix, target.driver.start, target.driver.stop, also=exact)
        expected, stored = soak.producer.key_counts(), stored_counts(redis_url, namespace)
        result.judge_counts(expected, stored)
        result.notes += [f"{sum(expected.values())} records counted into {len(expected)} keys; stored "
                         f"{sum(stored.values())}", f"driver started {target.driver.starts} times", *target.notes]
        return result
