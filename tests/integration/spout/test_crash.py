"""Kill the consumer with SIGKILL at random moments, restart it, and lose nothing (kinesalite + real ZooKeeper)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kinesis_spout.testing.process import wait_until

CONSUMER = Path(__file__).parents[1] / "procs" / "crash_consumer.py"
RECORDS = 3000
KILLS = 5

pytestmark = pytest.mark.crash


def stored_checkpoints(client, base: str) -> dict[str, int]:
    if not client.exists(base):
        return {}
    out = {}
    for shard in client.get_children(base):
        doc = json.loads(client.get(f"{base}/{shard}")[0])
        out[shard] = int(doc["sequence_number"])
    return out


def lines(log: Path) -> list[tuple[str, int]]:
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:  # a SIGKILL may cut the last line short
            out.append((parts[0], int(parts[1])))
    return out


@pytest.mark.parametrize("restart_zookeeper", [False, True], ids=["consumer-killed", "zookeeper-restarted-too"])
def test_sigkill_and_restart_lose_nothing(kinesalite, zookeeper, tmp_path: Path, restart_zookeeper: bool) -> None:
    rng = random.Random(7 if restart_zookeeper else 3)
    stream = kinesalite.create_stream(shards=4)
    placed = kinesalite.put(stream, [f"record-{i}".encode() for i in range(RECORDS)])
    expected = {f"{shard}:{seq}" for shard, seq in placed}
    last_by_shard: dict[str, int] = {}
    for shard, seq in placed:
        last_by_shard[shard] = max(last_by_shard.get(shard, 0), int(seq))
    log = tmp_path / "processed.log"
    log.touch()
    base = f"{zookeeper.prefix}/crash/{stream}/checkpoints"
    argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", kinesalite.endpoint_url,
            "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--log", str(log), "--total",
            str(RECORDS)]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    history: list[dict[str, int]] = []
    for kill in range(KILLS):
        before = len(lines(log))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            target = before + rng.randrange(50, RECORDS // (KILLS + 1))
            assert wait_until(lambda: len(lines(log)) >= target or proc.poll() is not None, 60), "no progress"
            if restart_zookeeper and kill % 2 == 1:
                zookeeper.server.stop()
                progressed = len(lines(log))
                wait_until(lambda: len(lines(log)) >= progressed + 20, 5)  # keeps reading without ZooKeeper
                zookeeper.server.start()
            time.sleep(rng.uniform(0.0, 0.5))  # not synchronisation: a random kill moment, also between writes
            proc.kill()
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        cps = stored_checkpoints(zookeeper.client(), base)  # a fresh session: the server may have restarted
        if history:
            for shard, seq in history[-1].items():
                assert cps.get(shard, 0) >= seq, f"checkpoint of {shard} moved backwards"
        history.append(cps)
    until = tmp_path / "until.json"
    until.write_text(json.dumps(last_by_shard))
    final = subprocess.run(argv + ["--until", str(until)], env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr[-2000:]
    processed = lines(log)
    counts = Counter(mid for mid, _ in processed)
    missing = expected - set(counts)
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:3]}"
    assert stored_checkpoints(zookeeper.client(), base) == last_by_shard
    duplicates = sum(n - 1 for n in counts.values())
    retries = sum(1 for _, attempt in processed if attempt > 1)
    print(f"\n[crash] {KILLS} SIGKILLs{' with ZooKeeper restarts' if restart_zookeeper else ''}: "
          f"{len(expected)} records, {len(processed)} deliveries, {retries} deliberate retries, "
          f"{duplicates - retries} replays after crashes; checkpoints after each kill: "
          f"{[sum(1 for _ in h) for h in history]} shards stored")
    # replays are bounded by what was in flight (200 per shard) plus one checkpoint interval of acks per kill
    assert duplicates - retries <= KILLS * (4 * 200 + 2000)
