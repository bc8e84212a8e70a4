"""Exactly-once word counts through SIGKILLs (kinesalite, ZooKeeper, Redis, memcached, a real Spark driver).

One consumer process (procs/state_consumer.py) counts the words of a 4-shard stream with a readStream query and
with SpoutPipeline in exactly-once mode, into TransactionalMaps, OpaqueMaps and NonTransactionalMaps on Redis
and memcached. It is SIGKILLed while it writes state (right after one map of a batch was written, before the
others), right after a batch's state writes ended (before the batch commits), and at a random moment, then run
to the end. Every exactly-once map must hold the exact counts; the NonTransactionalMaps over-count (the
pipeline's batches with a failed record are processed twice under one txid).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from kinesis_spout.state import NonTransactionalMap, OpaqueMap, TransactionalMap
from kinesis_spout.state.memcached import MemcachedBackingMap
from kinesis_spout.state.redis import RedisBackingMap
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.spark import quick_start_env

CONSUMER = Path(__file__).parents[1] / "procs" / "state_consumer.py"
RECORDS = 800
VOCABULARY = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel", "iris", "juniper"]

pytestmark = [pytest.mark.crash, pytest.mark.spark]  # a Spark driver in a subprocess


def steps(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines() if line.strip()]


def test_sigkilled_word_counts_are_exact_in_redis_and_memcached(kinesalite, zookeeper, redis, memcached,
                                                                 tmp_path: Path) -> None:
    rng = random.Random(12)
    stream = kinesalite.create_stream(shards=4)
    sentences = [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 6))) + f" n{i % 10}"
                 for i in range(RECORDS)]
    kinesalite.put(stream, [s.encode() for s in sentences])
    expected = Counter(w for s in sentences for w in s.split())
    expected["#records"] = RECORDS
    ns = f"crash-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "steps.log"
    log.touch()
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", kinesalite.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--redis", redis.url,
            "--memcached", memcached.server, "--ns", ns, "--checkpoint-location", str(tmp_path / "spark-checkpoint"),
            "--log", str(log), "--records", str(RECORDS)]
    # four driver starts (three killed runs and the last): each JVM starts with the quick options
    env = quick_start_env({**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})

    def during_write(step: list[str]) -> bool:  # one map of a batch written, the others not yet
        return step[2] == "wrote" and step[3] != "op-mc"

    def after_write(step: list[str]) -> bool:   # every map written, the batch not committed yet
        return step[2] == "end"

    kills = [("during a state write", during_write), ("after the state writes", after_write),
             ("at a random moment", None)]
    killed_at = []
    for why, moment in kills:
        seen = len(steps(log))
        ended = rng.randint(1, 3)  # let a few batches end in this run first, so kills land in later txids too

        def reached(moment=moment, seen=seen, ended=ended) -> bool:
            new = steps(log)[seen:]
            ends = [i for i, s in enumerate(new) if s[2] == "end"]
            return len(ends) >= ended and (moment is None or any(moment(s) for s in new[ends[ended - 1] + 1:]))

        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert wait_until(lambda: reached() or proc.poll() is not None, 120), f"no progress to kill '{why}'"
            if moment is None:
                time.sleep(rng.uniform(0.0, 1.0))  # not synchronisation: a random kill moment
            assert proc.poll() is None, f"the consumer ended before it was killed: {proc.stderr.read()[-2000:]!r}"
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        killed_at.append((why, " ".join(steps(log)[-1])))
    started = time.monotonic()
    final = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    print(f"\n[state crash] final run {time.monotonic() - started:.1f} s")
    assert final.returncode == 0, final.stderr[-3000:]

    words = sorted(expected)

    def counts(engine: str, name: str, cls, backend: str) -> dict[str, int]:
        namespace = f"{ns}-{engine}-{name}"
        factory = RedisBackingMap.factory(redis.url, namespace=namespace) if backend == "redis" else \
            MemcachedBackingMap.factory(memcached.server, namespace=namespace)
        state = cls.factory(factory).make_state()
        try:
            return {w: n for w, n in zip(words, state.multi_get([(w,) for w in words])) if n}
        finally:
            state.close()

    exact = [("stream", "tx-redis", TransactionalMap, "redis"), ("stream", "op-redis", OpaqueMap, "redis"),
             ("stream", "tx-mc", TransactionalMap, "mc"), ("stream", "op-mc", OpaqueMap, "mc"),
             ("pipeline", "op-redis", OpaqueMap, "redis"), ("pipeline", "op-mc", OpaqueMap, "mc")]
    for engine, name, cls, backend in exact:
        assert counts(engine, name, cls, backend) == dict(expected), f"{engine} {name} is not exact"
    over = {engine: sum(counts(engine, "nt-redis", NonTransactionalMap, "redis").values()) - sum(expected.values())
            for engine in ("stream", "pipeline")}
    replayed = Counter(s[0] for s in steps(log) if s[2] == "begin")
    print(f"\n[state crash] killed: {killed_at}; batches begun per engine (with replays): {dict(replayed)}; "
          f"NonTransactionalMap over-count (words + records): {over}")
    assert over["pipeline"] > 0, "the pipeline's replayed batches should have over-counted the NonTransactionalMap"
    assert all(n >= 0 for n in over.values())
