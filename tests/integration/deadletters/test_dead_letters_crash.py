"""SIGKILL a consumer while it dead-letters (kinesalite + real ZooKeeper; dead letters into another stream through a
fault-injecting proxy, or into a JSON Lines file): every dead letter arrives, every other record is processed."""

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

from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.process import wait_until

CONSUMER = Path(__file__).parents[1] / "procs" / "dead_letter_consumer.py"
RECORDS, KILLS = 600, 4

pytestmark = pytest.mark.crash


def stored_checkpoints(client: object, base: str) -> dict[str, int]:
    if not client.exists(base):  # type: ignore[attr-defined]
        return {}
    return {shard: int(json.loads(client.get(f"{base}/{shard}")[0])["sequence_number"])  # type: ignore[attr-defined]
            for shard in client.get_children(base)}  # type: ignore[attr-defined]


def processed(log: Path) -> list[str]:
    return [parts[0] for parts in (line.split() for line in log.read_text().splitlines()) if len(parts) == 2]


def dead_letter_ids(client: object, stream: str) -> list[str]:
    out = []
    for shard in client.list_shards(StreamName=stream)["Shards"]:  # type: ignore[attr-defined]
        iterator = client.get_shard_iterator(  # type: ignore[attr-defined]
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            reply = client.get_records(ShardIterator=iterator, Limit=1000)  # type: ignore[attr-defined]
            docs = [json.loads(r["Data"]) for r in reply["Records"]]
            out += [f"{d['shard_id']}:{d['sequence_number']}" for d in docs]
            if not reply["Records"]:
                break
            iterator = reply.get("NextShardIterator")
    return out


def file_letter_ids(path: Path) -> list[str]:
    """The ids in a JSON Lines dead-letter file; a line a kill cut short is skipped (its record was not done)."""
    out = []
    for line in path.read_bytes().splitlines() if path.exists() else []:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        out.append(f"{doc['shard_id']}:{doc['sequence_number']}")
    return out


@pytest.mark.parametrize("destination", ["kinesis", "jsonl"])
def test_sigkill_while_dead_lettering_loses_nothing(kinesalite, zookeeper, tmp_path: Path, destination: str) -> None:
    """Kinesis: runs alternate between a throttled dead-letter stream (every put refused: the checkpoints must wait at
    the first dead letter of each shard) and a healthy one. JSON Lines: every run writes (and fsyncs) its dead
    letters. Each run is killed at a random moment; a last run without faults goes on until every checkpoint
    reached the end."""
    rng = random.Random(5)
    stream = kinesalite.create_stream(shards=2)
    dlq = kinesalite.create_stream(shards=1)
    datas = [b"poison %d" % i if i % 10 == 3 else json.dumps({"n": i, "fail": i % 10 == 8}).encode()
             for i in range(RECORDS)]
    placed = kinesalite.put(stream, datas)
    dead = {f"{s}:{q}" for (s, q), d in zip(placed, datas) if d.startswith(b"poison") or b'"fail": true' in d}
    good = {f"{s}:{q}" for s, q in placed} - dead
    last: dict[str, int] = {}
    for shard, seq in placed:
        last[shard] = max(last.get(shard, 0), int(seq))
    log = tmp_path / "processed.log"
    log.touch()
    base = f"{zookeeper.prefix}/dead-letter-crash/{stream}/checkpoints"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    history: list[dict[str, int]] = []
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        argv = [sys.executable, str(CONSUMER), "--stream", stream, "--endpoint-url", kinesalite.endpoint_url,
                "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--log", str(log)]
        argv += ["--dlq", dlq, "--dlq-endpoint-url", proxy.endpoint_url] if destination == "kinesis" else \
            ["--dlq-file", str(tmp_path / "dead.jsonl")]
        for kill in range(KILLS):
            throttled = destination == "kinesis" and kill % 2 == 0
            if throttled:
                proxy.inject("PutRecords", "ProvisionedThroughputExceededException", times=1_000_000)
            before = len(processed(log))
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                target = before + rng.randrange(60, 200)
                watcher = zookeeper.client()
                assert wait_until(lambda: len(processed(log)) >= target or proc.poll() is not None
                                  or stored_checkpoints(watcher, base) == last, 60), "no progress"
                if throttled:  # past dead letters whose puts were all refused, with time to store a checkpoint
                    assert wait_until(lambda: proxy.injected["PutRecords:ProvisionedThroughputExceededException"]
                                      >= 3, 20)
                time.sleep(rng.uniform(0.0, 0.4))  # not synchronisation: a random kill moment
                proc.kill()
                proc.wait(10)
            finally:
                if proc.poll() is None:
                    proc.kill()
            assert proc.returncode == -9, (proc.stderr.read().decode() if proc.stderr else "")[-2000:]
            proxy.clear()
            cps = stored_checkpoints(zookeeper.client(), base)
            if history:
                for shard, seq in history[-1].items():
                    assert cps.get(shard, 0) >= seq, f"checkpoint of {shard} moved backwards"
            history.append(cps)
        until = tmp_path / "until.json"
        until.write_text(json.dumps(last))
        final = subprocess.run(argv + ["--until", str(until)], env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr[-2000:]
    assert stored_checkpoints(zookeeper.client(), base) == last
    missing = good - set(processed(log))
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:3]}"
    letters = Counter(dead_letter_ids(kinesalite.client(), dlq) if destination == "kinesis" else
                      file_letter_ids(tmp_path / "dead.jsonl"))
    lost = dead - set(letters)
    assert not lost, f"{len(lost)} of {len(dead)} dead letters never reached the dead-letter stream, " \
                     f"e.g. {sorted(lost)[:3]}"
    assert set(letters) == dead
    print(f"\n[dead-letter crash, {destination}] {KILLS} SIGKILLs: {len(dead)} dead letters, {sum(letters.values())} "
          f"written "
          f"({sum(n - 1 for n in letters.values())} again after a crash: written, not yet checkpointed)")
