"""The ZooKeeper checkpoint writes of a stream reader's driver: many shards in one transaction.

A query's driver copies the shards' positions to their ZooKeeper checkpoints after its batches
(:meth:`kinesis_spout.spark.source.planning.QueryPlanning.save`). A checkpoint's own save is a compare-and-set: a
read and a conditional write per shard. :class:`CheckpointWriter` remembers the version of each checkpoint node as
this driver last wrote it; the next writes of every shard it remembers go in one ZooKeeper transaction that writes
each node only at that version. So nothing written meanwhile by anyone else (another query of the app, a spout) is
overwritten: if any node moved, the transaction is not applied and those shards are saved one by one with the
store's compare-and-set (which refuses to move a checkpoint back) and remembered afresh.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from kinesis_spout.checkpoint.base import Checkpoint, ZooKeeperHome, zookeeper_home
from kinesis_spout.errors import CheckpointConflict, CheckpointError

__all__ = ["CheckpointWriter"]

log = logging.getLogger(__name__)


class CheckpointWriter:
    """Writes checkpoints through a store, several in one transaction once their versions are known (see the module
    docstring). Owned by one driver's planning thread: no lock."""

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}  # shard id -> the version of its node holding what this writer wrote

    def write(self, store: Any, checkpoints: Sequence[Checkpoint], done: Callable[[str], None]) -> None:
        """Write ``checkpoints``; ``done(shard_id)`` for each one written, or left because ZooKeeper holds one
        ahead of it (logged). ``CheckpointError`` when ZooKeeper cannot be reached (those not done yet are left for
        the caller's next try). Several go in one transaction only when ``store`` is in ZooKeeper (declares a
        ``zookeeper_home``); else each one is the store's ``save``."""
        home = zookeeper_home(store)
        known = [] if home is None else [c for c in checkpoints if c.shard_id in self._versions]
        if home is not None and known and self._write_known(home, known):
            for checkpoint in known:
                done(checkpoint.shard_id)
            written = {c.shard_id for c in known}
            rest = [c for c in checkpoints if c.shard_id not in written]
        else:
            rest = list(checkpoints)
        for checkpoint in rest:
            self._versions.pop(checkpoint.shard_id, None)
            try:
                store.save(checkpoint)
            except CheckpointConflict as exc:
                log.info("ZooKeeper is ahead of this query: %s", exc)
                done(checkpoint.shard_id)
                continue
            if home is not None:
                self._learn(home, checkpoint)
            done(checkpoint.shard_id)

    def forget(self) -> None:
        """Forget every version (the store is closed or replaced). Idempotent."""
        self._versions.clear()

    def _learn(self, store: ZooKeeperHome, checkpoint: Checkpoint) -> None:
        """Read back the node just written: its version is remembered when it holds exactly what was written."""
        try:
            data, stat = store.session.get(f"{store.path}/{checkpoint.shard_id}")
        except Exception:  # noqa: BLE001 - not remembered: the next write is a compare-and-set again
            return
        if bytes(data) == checkpoint.to_json():
            self._versions[checkpoint.shard_id] = int(stat.version)

    def _write_known(self, store: ZooKeeperHome, checkpoints: Sequence[Checkpoint]) -> bool:
        """One transaction writing each checkpoint at its remembered version; True when it was applied. When it was
        not (a node moved), or its outcome is unknown (ZooKeeper trouble), the versions are forgotten."""
        nodes = [(f"{store.path}/{c.shard_id}", c.to_json(), self._versions[c.shard_id]) for c in checkpoints]

        def build(txn: Any) -> None:
            for node, payload, version in nodes:
                txn.set_data(node, payload, version)

        try:
            results = store.session.commit(f"writing {len(nodes)} checkpoints under {store.path}", build)
        except CheckpointError:
            for checkpoint in checkpoints:
                self._versions.pop(checkpoint.shard_id, None)
            raise
        if any(isinstance(r, Exception) for r in results):
            for checkpoint in checkpoints:
                self._versions.pop(checkpoint.shard_id, None)
            return False
        for checkpoint, stat in zip(checkpoints, results):
            self._versions[checkpoint.shard_id] = int(stat.version)
        return True
