"""What the Spark scale run puts into its stream and how it watches a query: records on chosen shards, a query's
batches and its progress, and the CPU of the cluster's processes.

Who calls: :mod:`benchmarks.scale.spark_phases`. Nothing here starts a server; the producer owns a thread between
``start()`` and ``stop()``.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.proc_cpu import TreeSnapshot, own_cpu_between, snapshot, tree_cpu_between
from benchmarks.spark_costs import is_executor_python
from kinesis_spout.testing.kinesis import kinesis_client, put_entries

#: Spark's durations of a micro-batch kept from its progress (milliseconds)
DURATIONS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets",
             "triggerExecution")


def shard_keys(endpoint_url: str, stream: str) -> list[tuple[str, str]]:
    """(shard id, its starting hash key) of every shard, in shard id order."""
    client = kinesis_client(endpoint_url)
    shards = client.list_shards(StreamName=stream, MaxResults=10000)["Shards"]
    return sorted((s["ShardId"], s["HashKeyRange"]["StartingHashKey"]) for s in shards)


class Placed:
    """The message ids (``shard:sequence``) of every record put into the stream, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: set[str] = set()

    def put(self, client: Any, stream: str, entries: list[dict[str, Any]]) -> None:
        """PutRecords ``entries`` (500 at most), retrying the throttled ones; their ids added."""
        results = put_entries(client, stream, entries, attempts=30)
        with self.lock:
            self.ids.update(f"{shard}:{sequence}" for shard, sequence in filter(None, results))
        refused = results.count(None)
        if refused:
            raise RuntimeError(f"{refused} records still throttled after 30 attempts")

    def snapshot(self) -> set[str]:
        with self.lock:
            return set(self.ids)


def fill(endpoint_url: str, stream: str, keys: list[str], per_shard: int, placed: Placed,
         record_bytes: int = 100) -> int:
    """Put ``per_shard`` records of ``record_bytes`` on each shard (by its starting hash key); returns how many."""
    client = kinesis_client(endpoint_url)
    entries = [{"Data": b"b" * record_bytes, "PartitionKey": "p", "ExplicitHashKey": key}
               for _ in range(per_shard) for key in keys]
    for begin in range(0, len(entries), 500):
        placed.put(client, stream, entries[begin:begin + 500])
    return len(entries)


class BusyProducer:
    """Puts ``rate`` records/s of 100 B, round robin over the shards whose starting hash keys are ``keys`` (the
    busy shards; the others stay idle), ten PutRecords calls a second, from a thread."""

    def __init__(self, endpoint_url: str, stream: str, keys: list[str], rate: int, placed: Placed) -> None:
        self.endpoint_url, self.stream, self.keys, self.rate, self.placed = endpoint_url, stream, keys, rate, placed
        self.put_count = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scale-spark-producer", daemon=True)

    def start(self) -> "BusyProducer":
        self._thread.start()
        return self

    def _run(self) -> None:
        client = kinesis_client(self.endpoint_url)
        per_tick, n = max(1, self.rate // 10), 0
        next_tick = time.monotonic()
        try:
            while not self._stop.is_set():
                entries = [{"Data": b"c" * 100, "PartitionKey": "p",
                            "ExplicitHashKey": self.keys[(n + i) % len(self.keys)]} for i in range(per_tick)]
                self.placed.put(client, self.stream, entries)
                n += per_tick
                self.put_count += per_tick
                next_tick += 0.1
                self._stop.wait(max(0.0, next_tick - time.monotonic()))  # pacing
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> int:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)
        if self.error is not None:
            raise RuntimeError(f"the producer failed: {self.error!r}") from self.error
        return self.put_count


@dataclass
class Batches:
    """A query's batches as its ``foreachBatch`` saw them (the last attempt of a batch id replaces the others):
    records by shard, or the message ids (``ids=True``); ``attempts`` counts every call, replays included."""

    ids: bool = False
    by_batch: dict[int, dict[str, int]] = field(default_factory=dict)
    rows: dict[int, list[str]] = field(default_factory=dict)
    attempts: int = 0
    rows_with_replays: int = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        self.attempts += 1
        if self.ids:
            found = [r.message_id for r in df.select("message_id").collect()]
            self.rows[batch_id] = found
            self.rows_with_replays += len(found)
            counts: dict[str, int] = {}
            for mid in found:
                shard = mid.split(":")[0]
                counts[shard] = counts.get(shard, 0) + 1
            self.by_batch[batch_id] = counts
        else:
            self.by_batch[batch_id] = {r.shard_id: int(r["count"]) for r in df.groupBy("shard_id").count().collect()}
            self.rows_with_replays += sum(self.by_batch[batch_id].values())

    @property
    def records(self) -> int:
        return sum(sum(c.values()) for c in self.by_batch.values())


def progress(query: Any, into: dict[int, dict[str, Any]]) -> None:
    """Keep each batch's progress that had rows: start (UTC), rows, and Spark's durations in ms."""
    for p in query.recentProgress:
        rows = int(p.numInputRows)
        if rows > 0:
            start = dt.datetime.fromisoformat(str(p.timestamp).replace("Z", "+00:00"))
            into[int(p.batchId)] = {"rows": rows, "start": start,
                                    **{k: float(p.durationMs.get(k, 0.0)) for k in DURATIONS}}


@dataclass(frozen=True)
class WorkerTrees:
    """The process trees of the Spark workers (worker JVM, its executor JVM, the executor's Python workers)."""

    trees: tuple[TreeSnapshot, ...]

    @classmethod
    def take(cls, pids: list[int]) -> "WorkerTrees":
        return cls(tuple(snapshot(pid, with_threads=False) for pid in pids))


def executor_cpu(before: WorkerTrees, after: WorkerTrees) -> dict[str, float]:
    """CPU seconds between two readings: the executors' Python workers, and the executor JVMs (PURE)."""
    python = jvm = 0.0
    for old, new in zip(before.trees, after.trees):
        python += tree_cpu_between(old, new, is_executor_python).seconds
        for pid, proc in new.processes.items():
            if "CoarseGrainedExecutorBackend" in proc.command and pid in old.processes:
                jvm += proc.own_s - old.processes[pid].own_s
    return {"executor_python_s": round(python, 3), "executor_jvm_s": round(jvm, 3)}


def worker_jvm_cpu(before: WorkerTrees, after: WorkerTrees) -> float:
    """The worker daemons' own CPU (not their executors'), summed (PURE)."""
    total = 0.0
    for old, new in zip(before.trees, after.trees):
        total += own_cpu_between(old, new) or 0.0
    return total
