"""An in-memory checkpoint store, for tests and embedded use. Share one instance to simulate a restart."""

from __future__ import annotations

import threading

from kinesis_spout.checkpoint.base import Checkpoint, OwnershipTaken
from kinesis_spout.errors import CheckpointConflict, CheckpointError


class MemoryCheckpointStore:
    """Keeps checkpoints in a dict; same never-backwards rule as the ZooKeeper store. Thread-safe.

    Like a real store it refuses writes (``save``, ``save_batch_id``) after ``close()`` with a non-retriable
    ``CheckpointError``, until ``open()`` is called again; so a caller that writes after closing its store is
    caught in tests. The data stays across ``close()``/``open()``: a later spout sharing this store (a simulated
    restart) opens it and reads what the earlier one wrote. Reads work at any time. A store never opened accepts
    writes (convenient for tests that use it directly). An ownership (``take_ownership``) also stays across
    ``close()``, unlike the ZooKeeper store's, which goes with its session: it lasts until ``release_ownership``
    or ``revoke_ownership``.
    """

    def __init__(self) -> None:
        self._data: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.writes = 0
        self._batch_id = 0
        self._owners: dict[str, str] = {}

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

    def load_batch_id(self) -> int:
        with self._lock:
            return self._batch_id

    def save_batch_id(self, batch_id: int) -> None:
        with self._lock:
            self._check_writable(f"batch id {batch_id}")
            if batch_id <= self._batch_id:
                raise CheckpointConflict(f"batch id is {self._batch_id}; {batch_id} is taken")
            self._batch_id = batch_id

    def take_ownership(self, name: str, holder: str) -> None:
        """Make ``holder`` the owner of ``name``; ``OwnershipTaken`` (naming the owner) while another holds it."""
        with self._lock:
            current = self._owners.get(name)
            if current is not None and current != holder:
                raise OwnershipTaken(f"{name} of this memory checkpoint store is owned by {current}", holder=current,
                                     where=f"memory checkpoint store {name}", vanishes_within_s=None)
            self._owners[name] = holder

    def holds_ownership(self, name: str, holder: str) -> bool:
        with self._lock:
            return self._owners.get(name) == holder

    def release_ownership(self, name: str, holder: str) -> None:
        """Give ``name`` up if ``holder`` owns it (idempotent)."""
        with self._lock:
            if self._owners.get(name) == holder:
                del self._owners[name]

    def revoke_ownership(self, name: str) -> None:
        """End whoever owns ``name``, as an expired ZooKeeper session would (tests of a lost ownership)."""
        with self._lock:
            self._owners.pop(name, None)

    def close(self) -> None:
        """Refuse writes until the next ``open()``; the data stays for a later spout sharing this store.
        Idempotent."""
        with self._lock:
            self._closed = True
