"""The Kinesis clients of the sink's tasks: one per region, endpoint and identity per Python worker process.

The same rule as the source's worker cache (:mod:`kinesis_spout.spark.source.clients`): a writer is pickled to the
executors, so no client lives on it; tasks take the process's client (boto3 clients are thread-safe, making one
costs ~0.1 s). Kept apart from the source's cache because the data source (in the source package) makes the sink's
writers, and the sink must not import the source back.
"""

from __future__ import annotations

import threading
from typing import Any

from kinesis_spout.config import SpoutConfig
from kinesis_spout.kinesis.client import make_client

__all__ = ["sink_client"]

_lock = threading.Lock()
_clients: dict[tuple[Any, ...], Any] = {}  # under _lock; never closed: Spark's Python workers are reused


def sink_client(cfg: SpoutConfig) -> Any:
    """This process's Kinesis client for ``cfg``'s region, endpoint and credentials (made on first use). Any
    thread."""
    key = (cfg.region, cfg.endpoint_url, cfg.credentials)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = make_client(cfg.region, cfg.endpoint_url, credentials=cfg.credentials)
        return client
