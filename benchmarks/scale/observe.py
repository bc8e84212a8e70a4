"""What the scale run watches: every lease's owner as ZooKeeper changes it (moves counted), the live workers, the
records put to every shard, and the processes' CPU and memory.

Who calls: :mod:`benchmarks.scale.leases`. :class:`LeaseWatch` and :class:`ShardProducer` do no I/O in their
constructors; ``start()`` begins, ``stop()`` ends (idempotent).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from benchmarks.proc_cpu import read_process
from kinesis_spout.testing.kinesis import kinesis_client, put_entries


class LeaseWatch:
    """Watches ``{base}/leases/*`` (a data watch on each lease) and ``{base}/workers`` with a kazoo client.

    A **move** is a lease that a worker takes while another worker was its last owner (given back in between or
    not); a first take of a never-owned lease is not one. ``events`` lists ``(monotonic time, kind, detail)`` for
    workers joining and leaving (``join``/``leave``), the first take of every lease (``first-take``) and every take by
a worker other than the last owner (``take``)."""

    def __init__(self, client: Any, base: str) -> None:
        self.client = client
        self.base = base
        self.lock = threading.Lock()
        self.owners: dict[str, str | None] = {}
        self.last_holder: dict[str, str] = {}
        self.moves = 0
        self.takes = 0
        self.workers: set[str] = set()
        self.events: list[tuple[float, str, str]] = []
        self._watched: set[str] = set()
        self._held: Counter[str] = Counter()  # leases each worker holds now
        self.peak_held = 0  # the most leases one worker held at once

    def start(self) -> "LeaseWatch":
        from kazoo.recipe.watchers import ChildrenWatch

        for path in (f"{self.base}/leases", f"{self.base}/workers"):
            self.client.ensure_path(path)  # what the first worker would make; a watch needs the node
        ChildrenWatch(self.client, f"{self.base}/leases", self._on_leases)
        ChildrenWatch(self.client, f"{self.base}/workers", self._on_workers)
        return self

    def _on_leases(self, children: list[str]) -> None:
        from kazoo.recipe.watchers import DataWatch

        for shard in children:
            if shard not in self._watched:
                self._watched.add(shard)
                DataWatch(self.client, f"{self.base}/leases/{shard}", self._lease_callback(shard))

    def _lease_callback(self, shard: str) -> Callable[[bytes | None, Any], None]:
        """A data watch's callback for ``shard`` (two parameters: kazoo passes a third, the event, to a function
        that takes three)."""
        def changed(data: bytes | None, _stat: Any) -> None:
            self._on_lease(shard, data)
        return changed

    def _on_lease(self, shard: str, data: bytes | None) -> None:
        owner: str | None = None
        if data is not None:
            try:
                owner = json.loads(data.decode())["owner"]
            except (ValueError, KeyError, UnicodeDecodeError):
                return
        with self.lock:
            was = self.owners.pop(shard, None) if data is None else self.owners.get(shard)
            if was is not None:
                self._held[was] -= 1
            if data is None:
                return
            self.owners[shard] = owner
            if owner is None:
                return
            self._held[owner] += 1
            self.peak_held = max(self.peak_held, self._held[owner])
            previous = self.last_holder.get(shard)
            if previous is None:
                self.events.append((time.monotonic(), "first-take", shard))
            elif previous != owner:
                self.moves += 1
            if previous != owner:
                self.takes += 1
                self.events.append((time.monotonic(), "take", shard))
            self.last_holder[shard] = owner

    def _on_workers(self, children: list[str]) -> None:
        now = time.monotonic()
        with self.lock:
            now_set = set(children)
            self.events += [(now, "join", w) for w in sorted(now_set - self.workers)]
            self.events += [(now, "leave", w) for w in sorted(self.workers - now_set)]
            self.workers = now_set

    def state(self) -> tuple[dict[str, str | None], set[str], int]:
        """A copy of the owners, the live workers and the moves so far."""
        with self.lock:
            return dict(self.owners), set(self.workers), self.moves

    def owned_by(self, workers: set[str], shards: int) -> bool:
        """Every one of ``shards`` leases owned by one of ``workers``, all of them live."""
        owners, live, _ = self.state()
        return len(owners) == shards and live >= workers and all(o in workers for o in owners.values())

    def balanced(self, workers: set[str], shards: int) -> bool:
        """:meth:`owned_by`, and no worker holding more than its fair share + 1 (``shards // workers + 1``)."""
        if not self.owned_by(workers, shards):
            return False
        counts = Counter(self.state()[0].values())
        return max(counts.values()) <= shards // len(workers) + 1

    def even(self, workers: set[str], shards: int) -> bool:
        """:meth:`owned_by`, with every worker's count within one of the others'."""
        if not self.owned_by(workers, shards):
            return False
        counts = Counter(self.state()[0].values())
        held = [counts.get(w, 0) for w in workers]
        return max(held) - min(held) <= 1

    def first(self, kind: str, since: float, detail: str | None = None) -> float | None:
        """Seconds from ``since`` to the first event of ``kind`` (and ``detail``) after it; None when none."""
        with self.lock:
            times = [t for t, k, d in self.events if k == kind and t >= since and (detail is None or d == detail)]
        return round(min(times) - since, 2) if times else None

    def take_quantiles(self, since: float, shards: set[str]) -> dict[str, float | None]:
        """When ``shards`` were taken after ``since``: seconds until the first, half, 90 % and all of them had
        been taken (each shard's first take counts; None for a share never reached)."""
        with self.lock:
            first: dict[str, float] = {}
            for t, kind, shard in self.events:
                if kind == "take" and t >= since and shard in shards and shard not in first:
                    first[shard] = t - since
        times = sorted(first.values())

        def at(share: float) -> float | None:
            needed = max(1, math.ceil(share * len(shards)))
            return round(times[needed - 1], 2) if len(times) >= needed else None

        return {"first": at(0.0), "half": at(0.5), "p90": at(0.9), "all": at(1.0)}

    def last(self, kind: str, since: float, details: set[str] | None = None) -> float | None:
        """Seconds from ``since`` to the last event of ``kind`` (about one of ``details``) after it."""
        with self.lock:
            times = [t for t, k, d in self.events if k == kind and t >= since and (details is None or d in details)]
        return round(max(times) - since, 2) if times else None


class ShardProducer:
    """Puts one record to every shard (its starting hash key as the explicit hash key) every ``every_s`` seconds,
    on a thread of its own; ``placed`` holds the message id (``shard:sequence``) of every record placed.
    ``pause()``/``resume()`` hold the rounds (the idle measurements)."""

    def __init__(self, endpoint_url: str, stream: str, every_s: float) -> None:
        self.endpoint_url = endpoint_url
        self.stream = stream
        self.every_s = every_s
        self.lock = threading.Lock()
        self.placed: set[str] = set()
        self.rounds = 0
        self._run_flag = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scale-producer", daemon=True)

    def start(self) -> "ShardProducer":
        self._run_flag.set()
        self._thread.start()
        return self

    def pause(self) -> None:
        self._run_flag.clear()

    def resume(self) -> None:
        self._run_flag.set()

    def stop(self) -> None:
        self._stop.set()
        self._run_flag.set()
        if self._thread.is_alive():
            self._thread.join(120)

    def produced(self) -> set[str]:
        with self.lock:
            return set(self.placed)

    def _run(self) -> None:
        client: Any = kinesis_client(self.endpoint_url)
        shards = [s for s in client.list_shards(StreamName=self.stream, MaxResults=10000)["Shards"]]
        keys = [s["HashKeyRange"]["StartingHashKey"] for s in shards]
        while not self._stop.is_set():
            self._run_flag.wait()
            if self._stop.is_set():
                break
            started = time.monotonic()
            for begin in range(0, len(keys), 500):
                chunk = keys[begin:begin + 500]
                entries = [{"Data": f"round {self.rounds} {key}".encode(), "PartitionKey": "p",
                            "ExplicitHashKey": key} for key in chunk]
                self._put(client, entries)
            self.rounds += 1
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))

    def _put(self, client: Any, entries: list[dict[str, Any]]) -> None:
        """Put ``entries``; the ids of those placed join ``placed`` (one still refused after 30 calls is dropped)."""
        results = put_entries(client, self.stream, entries, attempts=30)
        with self.lock:
            self.placed.update(f"{shard}:{sequence}" for shard, sequence in filter(None, results))


def rss_mib(pid: int) -> float | None:
    """The resident memory of process ``pid`` in MiB (``VmRSS``), None when it has ended."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """The process's own CPU seconds so far (all threads), None when it has ended."""
    proc = read_process(pid)
    return proc.own_s if proc is not None else None


def request_counts(path: Path) -> dict[str, int]:
    """The emulator's requests by operation so far, from the file ``count_requests.js`` rewrites every 0.5 s."""
    try:
        return {k: int(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}
