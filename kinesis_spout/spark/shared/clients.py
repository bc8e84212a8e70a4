"""The Kinesis and ZooKeeper clients of a Spark Python process, one of each kind per connection, for all its tasks.

Readers and writers are pickled to the executors, so no client may live on them: the source's reads
(:mod:`kinesis_spout.spark.source`) and the sink's write tasks (:mod:`kinesis_spout.spark.sink`) take their clients
from :data:`WORKER_CLIENTS`, the cache of the Python worker process they run in (Spark reuses its workers from task to
task, so a client is made once per worker, not once per task). The driver's own Python process has its own cache:
the sink's checks at ``save()``/``start()`` use it, so a driver writing again and again makes one client.
"""

from __future__ import annotations

import threading
from typing import Any

from kinesis_spout.config import KinesisSettings, SpoutConfig
from kinesis_spout.kinesis.client import kinesis_client
from kinesis_spout.kinesis.credentials import AwsCredentials

__all__ = ["WORKER_CLIENTS", "ClientCache"]


class ClientCache:
    """One Kinesis client per region, endpoint and identity, and one open ZooKeeper checkpoint store per ensemble
    and checkpoint path, for every task of this Python worker process (boto3 clients and kazoo are thread-safe;
    making a client costs ~0.1 s, a ZooKeeper session more).

    Who calls: the source's reads and the sink's write tasks on the executors, and the sink's checks on the driver
    (a Python process of its own, with its own cache). Tasks call it from their own threads: both maps are guarded
    by one lock. Nothing is closed: the clients live as long as the process, as Spark's Python workers are reused
    from task to task.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinesis: dict[tuple[str | None, str | None, AwsCredentials | None, float], Any] = {}
        self._stores: dict[tuple[str, str], Any] = {}

    def kinesis(self, kinesis: KinesisSettings, read_timeout_s: float = 30.0) -> Any:
        """The process's Kinesis client for the region, endpoint and credentials of ``kinesis`` (made on first use),
        whose calls give up waiting for a reply after ``read_timeout_s``."""
        key = (kinesis.region, kinesis.endpoint_url, kinesis.credentials, read_timeout_s)
        with self._lock:
            client = self._kinesis.get(key)
            if client is None:
                client = self._kinesis[key] = kinesis_client(kinesis, read_timeout_s=read_timeout_s)
            return client

    def checkpoints(self, cfg: SpoutConfig) -> Any:
        """The process's open ZooKeeper checkpoint store for ``cfg``'s ensemble and checkpoint path."""
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        key = (cfg.zk.hosts, cfg.checkpoint_path)
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = ZooKeeperCheckpointStore.from_config(cfg)
                store.open()
                self._stores[key] = store
            return store


#: The cache of this Python process: what executors' reads and writes use (never a reader's own clients).
WORKER_CLIENTS = ClientCache()
