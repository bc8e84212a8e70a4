"""The memory batch store: batch ids, batch ends and heartbeats of executor reads kept in this process.

For tests and for pipelines on a memory checkpoint store
(:func:`~kinesis_spout.spark.bookkeeping.batch_store.batch_store_for` picks it); the same calls as
:class:`~kinesis_spout.spark.bookkeeping.batch_store.ZooKeeperBatchStore`.
"""

from __future__ import annotations

import threading
import time
from typing import Mapping, Sequence

from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.errors import CheckpointConflict, CheckpointError

__all__ = ["MemoryBatchStore"]


class MemoryBatchStore:
    """The same in memory. Thread-safe (one lock). Heartbeats use this process's wall clock. With ``checkpoints``
    (the memory checkpoint store it goes with), writes are refused while that store is closed, as a real store's
    are (a non-retriable ``CheckpointError``)."""

    def __init__(self, checkpoints: MemoryCheckpointStore | None = None, base: str = "memory") -> None:
        self.checkpoints = checkpoints
        self.base = base
        self._lock = threading.Lock()
        self._batch_id = 0
        self._ends: dict[str, dict[int, dict[str, bytes]]] = {}  # query -> batch -> shard -> end
        self._beats: dict[str, tuple[float, int]] = {}  # query -> (heartbeat, version)

    def _check_writable(self, what: str) -> None:
        if self.checkpoints is not None and self.checkpoints.closed:
            raise CheckpointError(f"memory checkpoint store is closed: cannot write {what}; call open() first "
                                  f"(was it written after the store was closed?)", retriable=False)

    def load_batch_id(self) -> int:
        with self._lock:
            return self._batch_id

    def save_batch_id(self, batch_id: int) -> None:
        with self._lock:
            self._check_writable(f"batch id {batch_id}")
            if batch_id <= self._batch_id:
                raise CheckpointConflict(f"batch id is {self._batch_id}; {batch_id} is taken")
            self._batch_id = batch_id

    def batches_node(self, query: str) -> str:
        return f"{self.base}/batches/{query}"

    def batch_end(self, query: str, batch: int, shard_id: str) -> bytes | None:
        with self._lock:
            return self._ends.get(query, {}).get(batch, {}).get(shard_id)

    def record_batch_end(self, query: str, batch: int, shard_id: str, payload: bytes) -> bytes:
        with self._lock:
            return self._ends.setdefault(query, {}).setdefault(batch, {}).setdefault(shard_id, payload)

    def batch_ends(self, query: str, batch: int, shards: Sequence[str] | None = None) -> dict[str, bytes]:
        with self._lock:
            ends = self._ends.get(query, {}).get(batch, {})
            return {s: e for s, e in ends.items() if shards is None or s in shards}

    def open_batch(self, query: str, batch: int) -> None:
        with self._lock:
            self._ends.setdefault(query, {}).setdefault(batch, {})

    def delete_ends(self, query: str, ends: Mapping[int, Sequence[str]]) -> bool:
        with self._lock:
            batches = self._ends.get(query, {})
            for batch in ends:
                batches.pop(batch, None)
            return True

    def delete_batches(self, query: str, below: int) -> int:
        with self._lock:
            batches = self._ends.get(query, {})
            doomed = [b for b in batches if b < below]
            for batch in doomed:
                del batches[batch]
            return len(doomed)

    def touch_query(self, query: str, payload: bytes) -> float:
        with self._lock:
            now = time.time()
            version = self._beats[query][1] + 1 if query in self._beats else 0
            self._beats[query] = (now, version)
            return now

    def query_heartbeats(self) -> dict[str, tuple[float, int]]:
        with self._lock:
            return dict(self._beats)

    def delete_query(self, query: str, version: int, per_transaction: int = 500) -> bool:
        with self._lock:
            beat = self._beats.get(query)
            if beat is not None and beat[1] != version:
                return False
            self._beats.pop(query, None)
            self._ends.pop(query, None)
            return True
