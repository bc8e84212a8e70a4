"""The Kinesis and ZooKeeper clients of the source: the worker process's cache, and a driver reader's own.

Two owners, never mixed up. A stream reader is pickled to the executors, so no client may live on it there:
executors' reads take their clients from :data:`WORKER_CLIENTS` (:mod:`kinesis_spout.spark.shared.clients`, the
cache the sink's tasks share too), one per Python worker process, shared by its tasks. The driver's planning takes
them from the reader's :class:`DriverClients`, made on first use, dropped when the reader is pickled and released by
``stop()``.
"""

from __future__ import annotations

from typing import Any

from kinesis_spout.config import SpoutConfig
from kinesis_spout.kinesis.client import kinesis_client
from kinesis_spout.spark.shared.clients import WORKER_CLIENTS, ClientCache

__all__ = ["WORKER_CLIENTS", "ClientCache", "DriverClients"]


class DriverClients:
    """The clients of one stream reader on the driver, made on first use.

    Who calls: the reader's planning, on Spark's planning thread only (no lock). ``close()`` releases them and is
    idempotent; a reader unpickled on an executor gets a fresh, empty one and must not use it there.
    """

    def __init__(self, config: SpoutConfig) -> None:
        self.config = config
        self._client: Any = None
        self._store: Any = None

    def kinesis(self) -> Any:
        """The driver's Kinesis client."""
        if self._client is None:
            self._client = kinesis_client(self.config.kinesis)
        return self._client

    def checkpoints(self) -> Any:
        """The driver's open ZooKeeper checkpoint store."""
        if self._store is None:
            from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

            store = ZooKeeperCheckpointStore.from_config(self.config)
            store.open()
            self._store = store
        return self._store

    def close(self) -> None:
        """Close the ZooKeeper store and drop the Kinesis client. Idempotent."""
        store, self._store = self._store, None
        self._client = None
        if store is not None:
            store.close()
