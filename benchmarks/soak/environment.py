"""The servers of a soak: ZooKeeper, kinesalite behind a fault proxy, and Redis, on free loopback ports.

One :class:`SoakServers` serves every path of a run; each path makes its own stream, ZooKeeper prefix and Redis
namespace. ZooKeeper is restarted by the faults (:meth:`SoakServers.restart_zookeeper`), on the same port and
data, so clients reconnect to the same address.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from kinesis_spout.testing.emulators import KinesaliteServer
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.redis import RedisServer
from kinesis_spout.testing.zookeeper import ZooKeeperServer

CHECKOUT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The environment of a consumer process: dummy AWS credentials, this checkout first on the import path (the
    children and Spark's Python workers import ``kinesis_spout`` and ``benchmarks.soak`` from here)."""
    path = os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": path, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


class SoakServers:
    """The servers of one soak run. The constructor does no I/O; ``start()`` starts them all, ``close()`` stops
    them (idempotent). Who calls: the runner (life cycle), the paths and the faults (everything else)."""

    def __init__(self, *, redis: bool = True) -> None:
        self.zookeeper = ZooKeeperServer()
        self.kinesalite = KinesaliteServer()
        self.redis: RedisServer | None = RedisServer() if redis else None
        self.proxy: FaultProxy | None = None
        self._clients: list[Any] = []

    def start(self) -> "SoakServers":
        self.zookeeper.start()
        self.kinesalite.start()
        if self.redis is not None:
            self.redis.start()
        self.proxy = FaultProxy(self.kinesalite.endpoint_url).start()
        return self

    @property
    def endpoint_url(self) -> str:
        """The proxy's URL: every client of a path (producer and consumers) goes through it."""
        assert self.proxy is not None, "SoakServers.start() first"
        return self.proxy.endpoint_url

    def kinesis(self) -> KinesisEndpoint:
        """kinesalite itself (not through the proxy), to create streams."""
        return KinesisEndpoint("kinesalite", self.kinesalite.endpoint_url)

    def create_stream(self, path: str, shards: int) -> str:
        return self.kinesis().create_stream(f"soak-{path}-{uuid.uuid4().hex[:6]}", shards=shards)

    def zk_client(self) -> Any:
        """A started kazoo client that reconnects after a restart, with bounded command retries (closed by
        ``close()``)."""
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        client = KazooClient(hosts=self.zookeeper.hosts, timeout=10.0,
                             connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                             command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0))
        client.start(timeout=15)
        self._clients.append(client)
        return client

    def restart_zookeeper(self, down_s: float, crash: bool) -> None:
        """Stop ZooKeeper (SIGKILL when ``crash``, else SIGTERM), keep it down ``down_s`` seconds, start it again on
        the same port and data, and wait until it serves."""
        if crash:
            self.zookeeper.kill()
        else:
            self.zookeeper.stop()
        time.sleep(down_s)  # the outage itself, not synchronisation
        self.zookeeper.start()

    def close(self) -> None:
        for client in self._clients:
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001 - best effort at the end; the server may be gone
                pass
        self._clients.clear()
        if self.proxy is not None:
            self.proxy.close()
        for server in (self.redis, self.kinesalite, self.zookeeper):
            if server is not None:
                server.close()

    def __enter__(self) -> "SoakServers":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
