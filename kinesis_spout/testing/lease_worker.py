"""A worker process for lease tests and benchmarks: a KinesisSpout with coordination="leases" (or the one given by
``--coordination``; ``default`` leaves the config's default) that logs each delivery.

    python -m kinesis_spout.testing.lease_worker --stream S --endpoint-url URL --zookeeper HOSTS --prefix P \
        --app A --worker W --log FILE [--session-timeout 4] [--coordination leases|static|auto|default] \
        [--retrieval polling|fanout]

It writes one line per delivered record, ``message_id worker epoch monotonic_s``, before acking it (the epoch is the
lease's at delivery; the time, ``time.monotonic()`` of the machine, which every process on it shares, lets a soak
measure how long two workers delivered one shard at once), and one line ``LEASE_LOST shard`` for each checkpoint
write refused because the lease moved on. On a graceful close it writes ``METRICS worker shard subscriptions`` for
each shard it reads at that moment (its SubscribeToShard calls that succeeded: 0 unless ``--retrieval fanout``).
Warnings of the library (a retried read, say) go to stderr. SIGTERM closes it gracefully (checkpoints written,
leases given back); tests also SIGKILL and SIGSTOP it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig
from kinesis_spout.errors import LeaseLost

__all__ = ["WorkerProcesses", "lease_owners", "live_workers", "spread_evenly"]


class WorkerProcesses:
    """Lease worker processes (this module's ``main``) of one app and stream, each logging to ``{dir}/{name}.log``.

    Who calls: tests and benchmarks (``log_level``: the level of the library's lines in ``{dir}/{name}.err``).
    ``start(name)`` launches one; ``signal(name, sig)`` sends it a signal;
    ``stop_all()`` ends them (SIGCONT, SIGTERM, then SIGKILL after 30 s); ``deliveries()`` reads every log.
    """

    def __init__(self, *, stream: str, endpoint_url: str, zookeeper: str, prefix: str, app: str, directory: Path,
                 session_timeout_s: float = 4.0, coordination: str = "leases", retrieval: str = "polling",
                 log_level: str = "WARNING") -> None:
        self.argv = [sys.executable, "-m", "kinesis_spout.testing.lease_worker", "--stream", stream,
                     "--endpoint-url", endpoint_url, "--zookeeper", zookeeper, "--prefix", prefix, "--app", app,
                     "--session-timeout", str(session_timeout_s), "--coordination", coordination,
                     "--retrieval", retrieval, "--log-level", log_level]
        self.env = {**os.environ, "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "test"),
                    "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "test")}
        self.directory = directory
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, command_prefix: Sequence[str] = ()) -> None:
        """Launch worker ``name``; ``command_prefix`` (e.g. ``node.command([])``) runs it inside a node."""
        log = self.directory / f"{name}.log"
        log.touch()
        with open(self.directory / f"{name}.err", "wb") as err:
            argv = [*command_prefix, *self.argv, "--worker", name, "--log", str(log)]
            self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=err)

    def signal(self, name: str, sig: int) -> None:
        self.procs[name].send_signal(sig)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def errors(self, name: str) -> str:
        return (self.directory / f"{name}.err").read_text(errors="replace")[-2000:]

    def deliveries(self) -> list[tuple[str, str, int]]:
        """Every logged delivery as ``(message_id, worker, epoch)`` (the delivery time is left out)."""
        out = []
        for name in self.procs:
            for line in (self.directory / f"{name}.log").read_text().splitlines():
                parts = line.split()
                if len(parts) in (3, 4) and parts[2].lstrip("-").isdigit():
                    out.append((parts[0], parts[1], int(parts[2])))
        return out

    def subscriptions(self) -> dict[tuple[str, str], int]:
        """From the ``METRICS`` lines of gracefully closed workers: ``(worker, shard)`` -> SubscribeToShard calls that
        succeeded while that worker read that shard (its last run's figures)."""
        out = {}
        for name in self.procs:
            for line in (self.directory / f"{name}.log").read_text().splitlines():
                parts = line.split()
                if len(parts) == 4 and parts[0] == "METRICS":
                    out[(parts[1], parts[2])] = int(parts[3])
        return out

    def lease_lost(self) -> int:
        """How many checkpoint writes the workers saw refused by the lease fence."""
        return sum(line.startswith("LEASE_LOST") for name in self.procs
                   for line in (self.directory / f"{name}.log").read_text().splitlines())


def lease_owners(zk: Any, base: str) -> dict[str, str | None]:
    """Each shard's lease owner under ``base`` (``{prefix}/{app}/{stream}``), read with a kazoo client ``zk``."""
    path = f"{base}/leases"
    if not zk.exists(path):
        return {}
    return {s: json.loads(zk.get(f"{path}/{s}")[0])["owner"] for s in zk.get_children(path)}


def live_workers(zk: Any, base: str) -> set[str]:
    path = f"{base}/workers"
    return set(zk.get_children(path)) if zk.exists(path) else set()


def spread_evenly(zk: Any, base: str, workers: set[str], shards: int) -> bool:
    """Every one of ``shards`` leases owned by one of ``workers``, all of them live, with counts within one."""
    held = lease_owners(zk, base)
    counts = [sum(1 for o in held.values() if o == w) for w in workers]
    return (len(held) == shards and all(o in workers for o in held.values())
            and live_workers(zk, base) >= workers and max(counts) - min(counts) <= 1)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", required=True)
    p.add_argument("--endpoint-url", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--app", default="lease-workers")
    p.add_argument("--session-timeout", type=float, default=4.0)
    p.add_argument("--coordination", default="leases", help="'default': the config's default")
    p.add_argument("--retrieval", default="polling", help="polling, or fanout (enhanced fan-out)")
    p.add_argument("--log-level", default="WARNING", help="the level of the library's lines on stderr")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kinesis_spout").setLevel(args.log_level.upper())

    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    chosen = {} if args.coordination == "default" else {"coordination": args.coordination}
    config = SpoutConfig(stream_name=args.stream, app_name=args.app, zookeeper=args.zookeeper,
                         zookeeper_prefix=args.prefix, endpoint_url=args.endpoint_url, region="us-east-1",
                         **chosen, worker_id=args.worker, zookeeper_session_timeout_s=args.session_timeout,
                         initial_position=InitialPosition.TRIM_HORIZON, checkpoint_interval_s=0.2,
                         empty_record_backoff_s=0.2, shard_sync_interval_s=2.0, max_records_per_call=200,
                         retrieval=args.retrieval)
    with open(args.log, "a", buffering=1) as log:
        def on_conflict(conflict: Exception) -> None:
            if isinstance(conflict, LeaseLost):
                log.write(f"LEASE_LOST {conflict.shard_id}\n")

        with KinesisSpout(config, on_checkpoint_conflict=on_conflict) as spout:
            while not stop:
                batch = spout.next_batch(max_records=100, timeout_s=0.2)
                epochs = spout.lease_epochs()
                now = time.monotonic()
                for tup in batch:
                    log.write(f"{tup.message_id} {args.worker} {epochs.get(tup.record.shard_id, -1)} {now:.3f}\n")
                spout.ack_many(t.message_id for t in batch)
            for m in spout.metrics():
                log.write(f"METRICS {args.worker} {m.shard_id} {m.subscriptions}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
