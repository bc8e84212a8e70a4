"""Helpers of the lease tests: the configuration and threads of lease workers, and what ZooKeeper holds for a
shard's lease and checkpoint (app "leases")."""

from __future__ import annotations

import json
import threading
from typing import Any

from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import ConsumerThread


def config(endpoint: KinesisEndpoint, zookeeper: Any, stream: str, worker: str, **extra: Any) -> SpoutConfig:
    """A lease worker ``worker`` of app "leases" on ``stream`` from TRIM_HORIZON, its ZooKeeper the test's
    (``zookeeper``: hosts and prefix), with a 4 s session; ``extra`` overrides any setting."""
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="leases", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix, coordination="leases", worker_id=worker,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        zookeeper_session_timeout_s=4.0)
    options.update(extra)
    return SpoutConfig(**options)


def worker(cfg: SpoutConfig, log: list[tuple[str, str]], lock: threading.Lock) -> ConsumerThread:
    """A spout in leases mode, read and acked on its own thread, logging who delivered what."""
    return ConsumerThread(KinesisSpout(cfg), cfg.worker_id, log, lock)


def lease_node(zookeeper: Any, stream: str, shard: str) -> str:
    """The ZooKeeper node of ``shard``'s lease (app "leases")."""
    return f"{zookeeper.prefix}/leases/{stream}/leases/{shard}"  # {prefix}/{app}/{stream}/leases/{shard}


def move_lease(zookeeper: Any, stream: str, shard: str, owner: str, *, register: bool = False) -> None:
    """Name ``owner`` in ``shard``'s lease behind the workers' backs (a new epoch), as another worker of the app
    does: the leases' generation moves on in the same transaction. ``register``: ``owner`` joins the live workers
    in it too (an ephemeral node of the test's client)."""
    base = f"{zookeeper.prefix}/leases/{stream}"
    moved = zookeeper.client().transaction()
    if register:
        moved.create(f"{base}/workers/{owner}", b"{}", ephemeral=True)
    moved.set_data(lease_node(zookeeper, stream, shard), json.dumps({"owner": owner}).encode())
    moved.set_data(f"{base}/leases", b"")
    assert not [r for r in moved.commit() if isinstance(r, Exception)]


def buffered(spout: KinesisSpout) -> int:
    """How many records ``spout`` holds read but not yet emitted, over all its shards."""
    return sum(m.buffered for m in spout.metrics())


def handing_back(caplog: Any, shard: str) -> bool:
    """Whether the spout has begun handing ``shard`` over (it says so when it starts waiting for the shard's records
    in flight); needs INFO records of ``kinesis_spout`` captured."""
    return f"handing {shard} over to another worker" in caplog.text


def lease(zookeeper: Any, stream: str, shard: str) -> tuple[str | None, int]:
    """The owner named by ``shard``'s lease and the version of its node."""
    data, stat = zookeeper.reader().get(lease_node(zookeeper, stream, shard))
    return json.loads(data)["owner"], stat.version


def stored(zookeeper: Any, stream: str, shard: str) -> str | None:
    """The sequence number of ``shard``'s stored checkpoint (app "leases"), None when there is none."""
    node = f"{zookeeper.prefix}/leases/{stream}/checkpoints/{shard}"
    client = zookeeper.reader()
    return json.loads(client.get(node)[0])["sequence_number"] if client.exists(node) else None
