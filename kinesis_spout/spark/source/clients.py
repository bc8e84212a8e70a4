"""The Kinesis and ZooKeeper clients of the source: the worker process's cache, and a driver reader's own.

Two owners, never mixed up. A stream reader is pickled to the executors, so no client may live on it there:
executors' reads take their clients from :data:`WORKER_CLIENTS`, one per Python worker process, shared by its
tasks. The driver's planning takes them from the reader's :class:`DriverClients`, made on first use, dropped when
the reader is pickled and released by ``stop()``.
"""

from __future__ import annotations

import threading
from typing import Any

from kinesis_spout.config import SpoutConfig
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.credentials import AwsCredentials

__all__ = ["WORKER_CLIENTS", "ClientCache", "DriverClients"]


class ClientCache:
    """One Kinesis client per region, endpoint and identity, and one open ZooKeeper checkpoint store per ensemble
    and checkpoint path, for every task of this Python worker process (boto3 clients and kazoo are thread-safe;
    making a client costs ~0.1 s, a ZooKeeper session more).

    Tasks call it from their own threads: both maps are guarded by one lock. Nothing is closed: the clients live
    as long as the worker process, as Spark's Python workers are reused from task to task.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinesis: dict[tuple[str | None, str | None, AwsCredentials | None], Any] = {}
        self._stores: dict[tuple[str, str], Any] = {}

    def kinesis(self, cfg: SpoutConfig) -> Any:
        """The process's Kinesis client for ``cfg``'s region, endpoint and credentials (made on first use)."""
        key = (cfg.region, cfg.endpoint_url, cfg.credentials)
        with self._lock:
            client = self._kinesis.get(key)
            if client is None:
                client = self._kinesis[key] = make_client(cfg.region, cfg.endpoint_url, credentials=cfg.credentials)
            return client

    def checkpoints(self, cfg: SpoutConfig) -> Any:
        """The process's open ZooKeeper checkpoint store for ``cfg``'s ensemble and checkpoint path."""
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        key = (cfg.zookeeper, cfg.checkpoint_path)
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = ZooKeeperCheckpointStore.from_config(cfg)
                store.open()
                self._stores[key] = store
            return store


#: The cache of this Python worker process: what executors' reads use (never a reader's own clients).
WORKER_CLIENTS = ClientCache()


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
            cfg = self.config
            self._client = make_client(cfg.region, cfg.endpoint_url, credentials=cfg.credentials)
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
