"""SIGKILL a fan-out consumer (retrieval="fanout") at random moments while a producer puts, restart it, and lose
nothing (kinesis-local + real ZooKeeper): each restart subscribes again from the stored checkpoints, retrying while
kinesis-local still holds the killed process's subscriptions. Five kills: every restart after the first subscribes
while the subscriptions of more than one killed process may still be held, and the checkpoints must never move
back across them; the producer puts 900 records over about 22 s, more than the kills need (at most 120 each)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

CONSUMER = Path(__file__).parents[1] / "procs" / "crash_consumer.py"
RECORDS = 900
KILLS = 5

pytestmark = [pytest.mark.crash, pytest.mark.slow]


def stored_checkpoints(client, base: str) -> dict[str, int]:
    if not client.exists(base):
        return {}
    return {shard: int(json.loads(client.get(f"{base}/{shard}")[0])["sequence_number"])
            for shard in client.get_children(base)}


def lines(log: Path) -> list[tuple[str, int]]:
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:  # a SIGKILL may cut the last line short
            out.append((parts[0], int(parts[1])))
    return out


def test_sigkill_under_a_live_producer_loses_nothing_with_fan_out(kinesis_local: KinesisEndpoint, zookeeper,
                                                                   tmp_path: Path) -> None:
    rng = random.Random(11)
    stream = kinesis_local.create_stream(shards=2)
    placed: list[tuple[str, str]] = []

    def produce() -> None:
        for start in range(0, RECORDS, 10):
            placed.extend(kinesis_local.put(stream, [f"record-{i}".encode() for i in range(start, start + 10)]))
            time.sleep(0.25)  # not synchronisation: the producer's pace (about 40 records a second, for 22 s)

    producer = threading.Thread(target=produce, daemon=True)
    log = tmp_path / "processed.log"
    log.touch()
    base = f"{zookeeper.prefix}/crash/{stream}/checkpoints"
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", kinesis_local.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--log", str(log), "--total",
            str(RECORDS), "--retrieval", "fanout"]
    root = str(Path(__file__).parents[3])  # this checkout's kinesis_spout, whatever the venv installed
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    history: list[dict[str, int]] = []
    producer.start()
    for _ in range(KILLS):
        before = len(lines(log))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            target = before + rng.randrange(30, 120)
            assert wait_until(lambda: len(lines(log)) >= target or proc.poll() is not None, 60), "no progress"
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else "consumer exited"
            time.sleep(rng.uniform(0.0, 0.5))  # not synchronisation: a random kill moment
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        cps = stored_checkpoints(zookeeper.client(), base)
        if history:
            for shard, seq in history[-1].items():
                assert cps.get(shard, 0) >= seq, f"checkpoint of {shard} moved backwards"
        history.append(cps)
    producer.join(60)
    assert not producer.is_alive()
    last_by_shard: dict[str, int] = {}
    for shard, seq in placed:
        last_by_shard[shard] = max(last_by_shard.get(shard, 0), int(seq))
    until = tmp_path / "until.json"
    until.write_text(json.dumps(last_by_shard))
    final = subprocess.run(argv + ["--until", str(until)], env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr[-2000:]
    processed = lines(log)
    counts = Counter(mid for mid, _ in processed)
    missing = {f"{shard}:{seq}" for shard, seq in placed} - set(counts)
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:3]}"
    assert stored_checkpoints(zookeeper.client(), base) == last_by_shard
    duplicates = sum(n - 1 for n in counts.values())
    retries = sum(1 for _, attempt in processed if attempt > 1)
    print(f"\n[fan-out crash] {KILLS} SIGKILLs under a live producer: {len(placed)} records, {len(processed)} "
          f"deliveries, {retries} deliberate retries, {duplicates - retries} replays after crashes")
    # replays are bounded by what was in flight (200 per shard) plus one checkpoint interval of acks per kill
    assert duplicates - retries <= KILLS * (2 * 200 + 1000)
