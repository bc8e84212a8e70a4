"""An in-memory checkpoint store, for tests and embedded use. Share one instance to simulate a restart."""

from __future__ import annotations

import threading

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.errors import CheckpointConflict


class MemoryCheckpointStore:
    """Keeps checkpoints in a dict; same never-backwards rule as the ZooKeeper store. Thread-safe."""

    def __init__(self) -> None:
        self._data: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()
        self.writes = 0
        self._batch_id = 0

    def open(self) -> None:
        """Nothing to connect to."""

    def load(self, shard_id: str) -> Checkpoint | None:
        with self._lock:
            return self._data.get(shard_id)

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        with self._lock:
            stored = self._data.get(checkpoint.shard_id)
            if stored is not None and not force and checkpoint.is_behind(stored):
                raise CheckpointConflict(f"checkpoint of {checkpoint.shard_id} not moved back from "
                                         f"{stored.sequence_number} to {checkpoint.sequence_number}")
            self._data[checkpoint.shard_id] = checkpoint
            self.writes += 1

    def list(self) -> dict[str, Checkpoint]:
        with self._lock:
            return dict(self._data)

    def delete(self, shard_id: str) -> None:
        with self._lock:
            self._data.pop(shard_id, None)

    def load_batch_id(self) -> int:
        with self._lock:
            return self._batch_id

    def save_batch_id(self, batch_id: int) -> None:
        with self._lock:
            if batch_id < self._batch_id:
                raise CheckpointConflict(f"batch id not moved back from {self._batch_id} to {batch_id}")
            self._batch_id = batch_id

    def close(self) -> None:
        """Nothing to release; the data stays for a later spout sharing this store."""
