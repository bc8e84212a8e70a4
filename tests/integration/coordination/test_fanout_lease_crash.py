"""Two lease workers read a stream through enhanced fan-out (retrieval="fanout") on kinesis-local while a producer
puts; one of them is SIGKILLed twice and restarted each time. The survivor takes the killed worker's shards
over by subscribing to them from their checkpoints, nothing is lost and no stored checkpoint moves backwards. At each
takeover the test holds a subscription of the app's consumer to one of the taken shards (as a dead worker's
subscription Kinesis has not ended yet would): the survivor's subscribe is refused with ResourceInUse, retried, and
never replaced by polling. Two kills: before the second, the survivor handed shards back to the restarted worker
in a rebalance, so a takeover is also shown after a hand-back (a third kill would repeat the second)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import SpoutConfig
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.retrieval.consumers import list_consumers
from kinesis_spout.kinesis.retrieval.fanout import Subscription
from kinesis_spout.positions import LATEST
from kinesis_spout.testing import stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records
from kinesis_spout.testing.lease_worker import WorkerProcesses, lease_owners, spread_evenly
from kinesis_spout.testing.process import wait_until

APP = "fanout-lease-workers"
SHARDS = 4
KILLS = 2
IN_USE = "another subscription of this consumer still reads the shard"

pytestmark = [pytest.mark.crash, pytest.mark.slow]


def test_sigkilled_fan_out_worker_is_taken_over_from_its_checkpoints(kinesis_local: KinesisEndpoint,
                                                                      zookeeper: Any, tmp_path: Path) -> None:
    stream = kinesis_local.create_stream(shards=SHARDS)
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/{APP}/{stream}"
    app = SpoutConfig(stream_name=stream, app_name=APP, zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix,
                      endpoint_url=kinesis_local.endpoint_url, region="us-east-1")
    sent: list[tuple[str, str]] = []
    stop = threading.Event()

    def produce() -> None:
        client, n = kinesis_local.client(), 0
        while not stop.is_set():
            sent.extend(put_records(client, stream, [f"r{n + i}".encode() for i in range(20)],
                                    partition_keys=[f"k{(n + i) % 64}" for i in range(20)]))
            n += 20
            stop.wait(0.1)  # the producer's pace, not synchronisation

    def hold(shard: str) -> Subscription:
        """A subscription of the workers' consumer to ``shard``, open until closed (refused while the killed
        worker's own subscription is still held: tried again until kinesis-local lets it go)."""
        arn = next(c.arn for c in list_consumers(client, stream))
        held: list[Subscription] = []

        def opened() -> bool:  # kinesis-local accepts the call, then ends the stream with ResourceInUse
            sub = Subscription(client, arn, shard, LATEST, renew_s=120.0, on_pending=lambda: None)
            sub.open()
            first: list[object] = []
            assert wait_until(lambda: first.append(sub.take()) or first[-1] is not None, 10), "no first event"
            if isinstance(first[-1], KinesisError):
                sub.close()
                assert first[-1].code == "ResourceInUseException", first[-1]
                return False
            held.append(sub)
            return True

        assert wait_until(opened, 20), f"kinesis-local kept the killed worker's subscription to {shard}"
        return held[0]

    def delivered_by(worker: str) -> set[str]:
        return {m for m, w, _ in workers.deliveries() if w == worker}

    workers = WorkerProcesses(stream=stream, endpoint_url=kinesis_local.endpoint_url, zookeeper=zookeeper.hosts,
                              prefix=zookeeper.prefix, app=APP, directory=tmp_path, session_timeout_s=3.0,
                              retrieval="fanout", log_level="DEBUG")  # a run of refusals starts at DEBUG
    client = kinesis_local.client()
    producer = threading.Thread(target=produce, daemon=True)
    history: list[dict[str, int]] = []

    def check_checkpoints() -> None:
        cps = {s: int(c.sequence_number) for s, c in stored_checkpoints(app).items() if c.sequence_number}
        if history:
            for shard, seq in history[-1].items():
                assert cps.get(shard, 0) >= seq, f"the checkpoint of {shard} moved backwards"
        history.append(cps)

    producer.start()
    takeovers: list[set[str]] = []
    try:
        workers.start("w1")
        workers.start("w2")
        for _ in range(KILLS):
            assert wait_until(lambda: spread_evenly(zk, base, {"w1", "w2"}, SHARDS), 40), lease_owners(zk, base)
            theirs = {s for s, o in lease_owners(zk, base).items() if o == "w2"}
            before = len(delivered_by("w2"))
            assert wait_until(lambda: len(delivered_by("w2")) > before, 20), workers.errors("w2")
            workers.signal("w2", signal.SIGKILL)
            workers.procs["w2"].wait(10)
            held = hold(min(theirs))
            check_checkpoints()
            killed_at = len(sent)
            refused = (tmp_path / "w1.err").read_text(errors="replace").count(IN_USE)
            try:
                assert wait_until(lambda: set(lease_owners(zk, base).values()) == {"w1"}, 30), \
                    lease_owners(zk, base)
                assert wait_until(lambda: (tmp_path / "w1.err").read_text(errors="replace").count(IN_USE) > refused,
                                  20), "the survivor's subscribe to the held shard was never refused"
            finally:
                held.close()
            # the survivor reads the taken shards: records put after the kill, delivered by w1
            later = sent[killed_at:killed_at + 200]
            wanted = {f"{s}:{q}" for s, q in later if s in theirs}
            assert wait_until(lambda: delivered_by("w1") >= wanted, 30), \
                f"w1 did not read {len(wanted - delivered_by('w1'))} records of the shards taken over {theirs}"
            takeovers.append(theirs)
            check_checkpoints()
            workers.start("w2")
        assert wait_until(lambda: spread_evenly(zk, base, {"w1", "w2"}, SHARDS), 40), lease_owners(zk, base)
        stop.set()
        producer.join(30)
        everything = {f"{s}:{q}" for s, q in sent}
        assert wait_until(lambda: {m for m, _, _ in workers.deliveries()} >= everything, 40), \
            f"{len(everything - {m for m, _, _ in workers.deliveries()})} records never delivered"
    finally:
        stop.set()
        workers.stop_all()
    assert all(p.returncode == 0 for p in workers.procs.values()), {n: workers.errors(n) for n in workers.procs}
    check_checkpoints()
    last: dict[str, int] = {}
    for shard, seq in sent:
        last[shard] = max(last.get(shard, 0), int(seq))
    assert history[-1] == last, "the final checkpoints are not the last records put"
    subscribed = workers.subscriptions()
    assert {s for (w, s) in subscribed} == {f"shardId-{i:012d}" for i in range(SHARDS)}
    per_shard: dict[str, int] = {}
    for (_, shard), n in subscribed.items():  # a worker may hold a lease briefly and hand it back unsubscribed
        per_shard[shard] = per_shard.get(shard, 0) + n
    assert all(n >= 1 for n in per_shard.values()), f"a shard was read without a subscription: {subscribed}"
    in_use = (tmp_path / "w1.err").read_text(errors="replace").count(IN_USE)
    assert in_use >= KILLS
    print(f"\n[fan-out leases] {KILLS} SIGKILLs, shards taken over {takeovers}; {len(sent)} records, "
          f"{len(workers.deliveries())} deliveries; w1 retried {in_use} refused subscriptions (ResourceInUse)")
