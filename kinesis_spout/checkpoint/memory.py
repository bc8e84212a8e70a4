"""An in-memory checkpoint store, for tests and embedded use. Share one instance to simulate a restart."""

from __future__ import annotations

import threading

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.errors import CheckpointConflict, CheckpointError


class MemoryCheckpointStore:
    """Keeps checkpoints in a dict; same never-backwards rule as the ZooKeeper store. Thread-safe.

    Like a real store it refuses writes (``save``) after ``close()`` with a non-retriable ``CheckpointError``,
    until ``open()`` is called again; so a caller that writes after closing its store is caught in tests. The data
    stays across ``close()``/``open()``: a later spout sharing this store (a simulated restart) opens it and reads
    what the earlier one wrote. Reads work at any time. A store never opened accepts writes (convenient for tests
    that use it directly). A pipeline's batch ids and ownership on this store are kept on Spark's side
    (:func:`kinesis_spout.spark.bookkeeping.batch_store.batch_store_for`,
    :func:`kinesis_spout.spark.bookkeeping.ownership.ownership_for`).
    """

    def __init__(self) -> None:
        self._data: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.writes = 0

    def open(self) -> None:
        """Nothing to connect to; (re)allows writes after a ``close()``."""
        with self._lock:
            self._closed = False

    @property
    def closed(self) -> bool:
        """True between ``close()`` and the next ``open()``."""
        return self._closed

    def _check_writable(self, what: str) -> None:
        """Lock held: refuse a write after ``close()``, as a real store would."""
        if self._closed:
            raise CheckpointError(f"memory checkpoint store is closed: cannot write {what}; call open() first "
                                  f"(was it written after the store was closed?)", retriable=False)

    def load(self, shard_id: str) -> Checkpoint | None:
        with self._lock:
            return self._data.get(shard_id)

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        with self._lock:
            self._check_writable(f"the checkpoint of {checkpoint.shard_id} ({checkpoint.sequence_number})")
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

    def close(self) -> None:
        """Refuse writes until the next ``open()``; the data stays for a later spout sharing this store.
        Idempotent."""
        with self._lock:
            self._closed = True
