"""The ledger of delivered ids: append-only fsynced files written by the consumers, tailed by the harness.

A consumer writes one line per delivered record, its message id (``shardId-...:sequence``) first, and fsyncs
before it acks (:func:`append_ids`). The harness reads only the bytes added since its last read and only whole
lines (a SIGKILL may cut the last one short), counting each id (:class:`DeliveryLedger`). :class:`ProgressWatch`
samples the ledger on a thread of its own to find the longest stall: the longest time with records produced but
not delivered during which no new record was delivered.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, TextIO

MESSAGE_ID = re.compile(r"^shardId-\d+:\d+$")


def append_ids(log: TextIO, ids: Iterable[str], *suffix: str) -> None:
    """Append one line per id (``id suffix...``), flush and fsync. Called by a consumer before it acks."""
    tail = (" " + " ".join(suffix)) if suffix else ""
    text = "".join(f"{mid}{tail}\n" for mid in ids)
    if text:
        log.write(text)
        log.flush()
        os.fsync(log.fileno())


class DeliveryLedger:
    """Every delivery logged in the files matching ``pattern`` in ``directory``, counted by message id.

    Who calls: the path (``refresh`` then ``counts``) and :class:`ProgressWatch` (``refresh``), both under
    ``lock``, which guards the offsets and the counts. Lines whose first field is not a message id (a lease
    worker's ``LEASE_LOST`` lines) are skipped.
    """

    def __init__(self, directory: Path, pattern: str = "*.log") -> None:
        self.directory = directory
        self.pattern = pattern
        self.lock = threading.Lock()
        self._offsets: dict[Path, int] = {}
        self._counts: Counter[str] = Counter()
        self._shards: Counter[str] = Counter()  # shard -> distinct ids delivered
        self.lines: list[list[str]] = []  # every parsed line, for path-specific checks (lease epochs)

    def refresh(self) -> int:
        """Read what was appended since the last call; returns the number of distinct ids delivered so far."""
        with self.lock:
            for path in sorted(self.directory.glob(self.pattern)):
                start = self._offsets.get(path, 0)
                with open(path, "rb") as f:
                    f.seek(start)
                    data = f.read()
                end = data.rfind(b"\n") + 1
                self._offsets[path] = start + end
                for raw in data[:end].decode(errors="replace").splitlines():
                    parts = raw.split()
                    if parts and MESSAGE_ID.match(parts[0]):
                        if parts[0] not in self._counts:
                            self._shards[parts[0].rsplit(":", 1)[0]] += 1
                        self._counts[parts[0]] += 1
                        self.lines.append(parts)
            return len(self._counts)

    def shard_counts(self) -> dict[str, int]:
        """Distinct ids delivered per shard (call ``refresh`` first)."""
        with self.lock:
            return dict(self._shards)

    def counts(self) -> Counter[str]:
        """A copy of the deliveries per message id (call ``refresh`` first)."""
        with self.lock:
            return Counter(self._counts)


class ProgressWatch:
    """Samples the ledger every ``interval_s`` on a daemon thread and keeps the longest stall.

    ``produced`` returns how many records the producer placed so far. A stall runs while fewer distinct ids were
    delivered than produced and none was added; it ends with the next new delivery. With ``by_shard`` (shard ->
    records placed) a stall is a shard's: fewer of its records delivered than placed and none added, so one
    worker's stalled shards show while others deliver. ``longest_s`` is read by the
    path after ``stop()`` (the thread owns it until then). ``window_longest_s`` is the longest stall since the last
    :meth:`open_window` (the fault cycle reads it per fault, while the thread runs: a float, read whole).
    """

    def __init__(self, ledger: DeliveryLedger, produced: Callable[[], int], interval_s: float = 0.25,
                 by_shard: Callable[[], dict[str, int]] | None = None) -> None:
        self.ledger = ledger
        self.produced = produced
        self.by_shard = by_shard
        self.interval_s = interval_s
        self.longest_s = 0.0
        self.window_longest_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-progress", daemon=True)

    def start(self) -> "ProgressWatch":
        self._thread.start()
        return self

    def open_window(self) -> None:
        """Start a new window for ``window_longest_s`` (a stall under way counts from its start)."""
        self.window_longest_s = 0.0

    def stop(self) -> float:
        """End the sampling; returns the longest stall in seconds."""
        self._stop.set()
        self._thread.join(10)
        return self.longest_s

    def _stalled(self, stall_s: float) -> None:
        self.longest_s = max(self.longest_s, stall_s)
        self.window_longest_s = max(self.window_longest_s, stall_s)

    def _run_by_shard(self, by_shard: Callable[[], dict[str, int]]) -> None:
        seen: dict[str, int] = {}
        since: dict[str, float] = {}
        while not self._stop.wait(self.interval_s):
            self.ledger.refresh()
            delivered, now = self.ledger.shard_counts(), time.monotonic()
            for shard, placed in by_shard().items():
                got = delivered.get(shard, 0)
                if shard not in seen or got > seen[shard] or got >= placed:
                    seen[shard], since[shard] = got, now
                else:
                    self._stalled(now - since[shard])

    def _run(self) -> None:
        if self.by_shard is not None:
            self._run_by_shard(self.by_shard)
            return
        seen = 0
        since = time.monotonic()
        while not self._stop.wait(self.interval_s):
            delivered = self.ledger.refresh()
            now = time.monotonic()
            if delivered > seen or delivered >= self.produced():
                seen, since = delivered, now
            else:
                self._stalled(now - since)
