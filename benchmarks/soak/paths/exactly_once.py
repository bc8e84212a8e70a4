"""Path ``exactly-once``: a SpoutPipeline in exactly-once mode (batch log on Redis) counting each record's key
into an OpaqueMap on Redis, in a Spark driver process (:mod:`benchmarks.soak.children.pipeline_consumer` with
``--redis``), with the faults of :mod:`~.spark_driver`. Checks: nothing lost, checkpoints never backwards, and
the stored counts EXACTLY equal to the counts produced, key by key."""

from __future__ import annotations

import uuid
from collections import Counter

from benchmarks.soak.children.pipeline_consumer import state_factory
from benchmarks.soak.cycle import PathContext
from benchmarks.soak.paths.common import soak_of
from benchmarks.soak.paths.pipeline import pipeline_driver
from benchmarks.soak.paths.spark_driver import MIX, SparkDriverTarget
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
    assert ctx.servers.redis is not None, "the exactly-once path needs the Redis server"
    redis_url = ctx.servers.redis.url
    namespace = f"soak-{uuid.uuid4().hex[:8]}"
    with soak_of(ctx, "exactly-once") as soak:
        target = SparkDriverTarget(pipeline_driver(ctx, soak, "--redis", redis_url, "--namespace", namespace))
        target.driver.start()

        def exact() -> bool:
            return stored_counts(redis_url, namespace) == soak.producer.key_counts()

        try:
            stats = soak.soak(target, MIX, also=exact)
        finally:
            target.driver.stop()
        result = soak.finish(stats)
        expected, stored = soak.producer.key_counts(), stored_counts(redis_url, namespace)
        result.judge_counts(expected, stored)
        result.notes += [f"{sum(expected.values())} records counted into {len(expected)} keys; stored "
                         f"{sum(stored.values())}", f"driver started {target.driver.starts} times", *target.notes]
        return result
