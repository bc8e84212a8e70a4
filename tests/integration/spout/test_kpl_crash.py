"""SIGKILL a consumer in the middle of KPL aggregates (kinesalite + real ZooKeeper): nothing is lost, and no user
record at or before the stored checkpoint (which may stand inside an aggregate) is delivered again."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kinesis_spout.kinesis.aggregation import hash_key
from kinesis_spout.records import parse_message_id
from kinesis_spout.testing.process import wait_until

CONSUMER = Path(__file__).parents[1] / "procs" / "crash_consumer.py"
AGGREGATES, PER_AGGREGATE, KILLS = 10, 200, 4  # the consumer takes 50 at a time: often mid-aggregate

pytestmark = pytest.mark.crash


def stored(client: object, base: str) -> dict[str, tuple[int, int]]:
    """Each shard's stored checkpoint as a key: (sequence, sub-sequence; a whole record counts as past every sub)."""
    if not client.exists(base):  # type: ignore[attr-defined]
        return {}
    out = {}
    for shard in client.get_children(base):  # type: ignore[attr-defined]
        doc = json.loads(client.get(f"{base}/{shard}")[0])  # type: ignore[attr-defined]
        if doc["sequence_number"] is not None:
            sub = doc.get("sub_sequence_number")
            out[shard] = (int(doc["sequence_number"]), sub if sub is not None else 1 << 62)
    return out


def deliveries(log: Path) -> list[str]:
    return [parts[0] for parts in (line.split() for line in log.read_text().splitlines()) if len(parts) == 2]


def test_sigkill_inside_aggregates_loses_nothing_and_replays_nothing_before_the_checkpoint(
        kinesalite, zookeeper, tmp_path: Path) -> None:
    rng = random.Random(11)
    stream = kinesalite.create_stream(shards=2)
    blobs, keys = [], []
    for a in range(AGGREGATES):
        aggregator = RecordAggregator()
        # Spread the aggregates over both shards, each user record routed (its explicit hash key) to its
        # aggregate's shard, as a producer that aggregates by shard (the KPL) puts them.
        route = str(hash_key(f"aggregate-{a}", None))
        for u in range(PER_AGGREGATE):
            aggregator.add_user_record(f"user-{u}", f"agg {a} user {u}".encode(), explicit_hash_key=route)
        pk, _, blob = aggregator.clear_and_get().get_contents()
        blobs.append(bytes(blob))
        keys.append(f"aggregate-{a}")
    placed = kinesalite.put(stream, blobs, partition_keys=keys)
    expected = {f"{shard}:{seq}" + (f":{sub}" if sub else "") for shard, seq in placed for sub in range(PER_AGGREGATE)}
    total = AGGREGATES * PER_AGGREGATE
    last = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    log = tmp_path / "processed.log"
    log.touch()
    base = f"{zookeeper.prefix}/kpl-crash/{stream}/checkpoints"
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", kinesalite.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--log", str(log), "--total", str(total),
            "--app", "kpl-crash", "--pause", "0.05"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    inside = 0
    for _ in range(KILLS):
        before = len(deliveries(log))
        checkpoints = stored(zookeeper.client(), base)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            target = before + rng.randrange(30, total // (KILLS + 1))
            assert wait_until(lambda: len(deliveries(log)) >= target or proc.poll() is not None, 60), "no progress"
            time.sleep(rng.uniform(0.0, 0.3))  # not synchronisation: a random kill moment
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        for mid in deliveries(log)[before:]:  # this run delivered nothing at or before the checkpoint it started at
            shard, key = parse_message_id(mid)
            if shard in checkpoints:
                assert tuple(key) > checkpoints[shard], f"{mid} delivered again, at or before {checkpoints[shard]}"
        inside += sum(1 for _, sub in stored(zookeeper.client(), base).values() if sub < 1 << 62)
    until = tmp_path / "until.json"
    until.write_text(json.dumps(last))
    final = subprocess.run(argv + ["--until", str(until)], env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr[-2000:]
    missing = expected - set(deliveries(log))
    assert not missing, f"{len(missing)} user records never processed, e.g. {sorted(missing)[:3]}"
    print(f"\n[kpl crash] {KILLS} SIGKILLs, {total} user records in {AGGREGATES} aggregates, "
          f"{len(deliveries(log))} deliveries; checkpoints found inside an aggregate after a kill: {inside}")
