"""What the tests of the app-finding commands share: a checkpoint saved under an app and stream on the test's
ZooKeeper, so that the app exists there."""

from __future__ import annotations

from typing import Any

from kinesis_spout import Checkpoint, SpoutConfig, ZooKeeperCheckpointStore


def saved(zookeeper: Any, app: str, stream: str) -> None:
    """Save one checkpoint of ``app`` on ``stream`` under the test's ZooKeeper prefix."""
    store = ZooKeeperCheckpointStore.from_config(SpoutConfig(stream_name=stream, app_name=app,
                                                             zookeeper=zookeeper.hosts,
                                                             zookeeper_prefix=zookeeper.prefix))
    store.open()
    try:
        store.save(Checkpoint("shardId-000000000000", "42"))
    finally:
        store.close()
