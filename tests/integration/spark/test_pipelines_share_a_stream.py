"""Two SpoutPipeline processes started with the same configuration (the default coordination, ZooKeeper
checkpoints) share one stream: every record is processed once, each shard by the pipeline that holds its lease,
and no batch id is used by both."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records
from kinesis_spout.testing.lease_worker import lease_owners
from kinesis_spout.testing.process import wait_until

WORKER = Path(__file__).parent.parent / "procs" / "pipeline_worker.py"
APP = "shared-pipeline"

pytestmark = pytest.mark.spark


def processed(log: Path) -> list[tuple[str, int, str]]:
    """``(message_id, batch_id, worker_id)`` of each record the pipeline process logged."""
    return [(m, int(b), w) for m, b, w in (line.split() for line in log.read_text().splitlines()
                                           if len(line.split()) == 3)]


def test_two_pipeline_processes_with_one_config_share_the_shards_and_the_batch_ids(
        kinesalite: KinesisEndpoint, zookeeper: Any, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=4)
    client = kinesalite.client()
    placed = put_records(client, stream, [f"first-{i}".encode() for i in range(40)])
    stop = tmp_path / "stop"
    logs = {name: tmp_path / f"{name}.log" for name in ("p1", "p2")}
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    procs = {}
    for name, log in logs.items():
        log.touch()
        procs[name] = subprocess.Popen(
            [sys.executable, str(WORKER), "--stream", stream, "--endpoint-url", kinesalite.endpoint_url,
             "--zookeeper", zookeeper.hosts, "--prefix", zookeeper.prefix, "--app", APP, "--log", str(log),
             "--stop", str(stop)], env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{name}.err", "wb"))
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/{APP}/{stream}"
    try:
        # both hold leases (two workers of four shards each hold two), then records keep coming for a while
        assert wait_until(lambda: sorted(Counter(lease_owners(zk, base).values()).values()) == [2, 2]
                          and None not in lease_owners(zk, base).values(), 300), lease_owners(zk, base)
        owners = lease_owners(zk, base)
        later: list[tuple[str, str]] = []
        for n in range(10):
            later += put_records(client, stream, [f"later-{n}-{i}".encode() for i in range(8)])
            time.sleep(0.2)
        everything = {f"{s}:{q}" for s, q in placed + later}
        assert wait_until(lambda: {m for log in logs.values() for m, _, _ in processed(log)} >= everything, 180), \
            "not every record was processed"
    finally:
        stop.touch()
        for proc in procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    assert all(proc.returncode == 0 for proc in procs.values()), \
        {n: (tmp_path / f"{n}.err").read_text()[-2000:] for n in procs}
    lines = {name: processed(log) for name, log in logs.items()}
    times = Counter(m for rows in lines.values() for m, _, _ in rows)
    assert not [m for m, n in times.items() if n > 1], "a record was processed twice"
    batches = {name: {b for _, b, _ in rows} for name, rows in lines.items()}
    assert batches["p1"] and batches["p2"] and not batches["p1"] & batches["p2"], "a batch id was used by both"
    assert len(set(owners.values())) == 2, f"one pipeline held every lease: {owners}"
    after_split = {f"{s}:{q}" for s, q in later}
    misplaced = [(m, w) for rows in lines.values() for m, _, w in rows
                 if m in after_split and owners[m.rsplit(":", 1)[0]] != w]
    assert not misplaced, f"records read by a pipeline that did not hold their shard's lease: {misplaced[:3]}"
