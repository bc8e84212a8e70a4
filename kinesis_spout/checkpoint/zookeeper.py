"""Checkpoints in ZooKeeper (kazoo), written compare-and-set on the znode version.

Layout: ``{zookeeper_prefix}/{app_name}/{stream_name}/checkpoints/{shard_id}`` holds the checkpoint as UTF-8
JSON (see :meth:`Checkpoint.to_json`).
"""

from __future__ import annotations

import logging
from typing import Any

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import CheckpointConflict, CheckpointError

log = logging.getLogger("kinesis_spout.checkpoint")

_CAS_ATTEMPTS = 20


class ZooKeeperCheckpointStore:
    """One app's checkpoints of one stream in ZooKeeper. Constructor does no I/O; ``close()`` is idempotent.

    kazoo's retries are bounded (its defaults retry forever): a call that cannot reach ZooKeeper within the
    retry budget raises a retriable ``CheckpointError``.
    """

    def __init__(self, hosts: str, path: str, *, session_timeout_s: float = 10.0,
                 connect_timeout_s: float = 15.0, command_retries: int = 5) -> None:
        self.hosts = hosts
        self.path = path.rstrip("/")
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.command_retries = command_retries
        self._client: Any = None

    @classmethod
    def from_config(cls, config: SpoutConfig) -> "ZooKeeperCheckpointStore":
        return cls(config.zookeeper, config.checkpoint_path, session_timeout_s=config.zookeeper_session_timeout_s)

    def _node(self, shard_id: str) -> str:
        return f"{self.path}/{shard_id}"

    def open(self) -> None:
        if self._client is not None:
            return
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.retry import KazooRetry

        client = KazooClient(
            hosts=self.hosts, timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2.0),
            command_retry=KazooRetry(max_tries=self.command_retries, delay=0.1, max_delay=2.0,
                                     ignore_expire=False),
            logger=logging.getLogger("kinesis_spout.kazoo"))
        try:
            client.start(timeout=self.connect_timeout_s)
        except KazooTimeoutError as exc:
            client.stop()
            client.close()
            raise CheckpointError(f"cannot connect to ZooKeeper at {self.hosts} within {self.connect_timeout_s:g} s: "
                                  f"is it running and reachable? (set SpoutConfig.zookeeper)",
                                  retriable=True) from exc
        self._client = client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kazoo.exceptions import KazooException, NoNodeError, NodeExistsError, BadVersionError
        from kazoo.retry import RetryFailedError

        if self._client is None:
            raise CheckpointError(f"checkpoint store for {self.path} is not open")
        try:
            return self._client.retry(fn, *args, **kwargs)
        except (NoNodeError, NodeExistsError, BadVersionError):
            raise
        except (KazooException, RetryFailedError) as exc:
            raise CheckpointError(f"ZooKeeper at {self.hosts}: {what} failed: {type(exc).__name__} {exc}",
                                  retriable=True) from exc

    def load(self, shard_id: str) -> Checkpoint | None:
        from kazoo.exceptions import NoNodeError

        node = self._node(shard_id)
        try:
            data, _ = self._call(f"reading {node}", self._client.get, node)
        except NoNodeError:
            return None
        return Checkpoint.from_json(shard_id, data, f"ZooKeeper {self.hosts} {node}")

    def save(self, checkpoint: Checkpoint) -> None:
        """Compare-and-set: re-read, refuse to move backwards, write with the version read."""
        from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError

        node = self._node(checkpoint.shard_id)
        payload = checkpoint.to_json()
        for _ in range(_CAS_ATTEMPTS):
            try:
                data, stat = self._call(f"reading {node}", self._client.get, node)
            except NoNodeError:
                try:
                    self._call(f"creating {node}", self._client.create, node, payload, makepath=True)
                    return
                except NodeExistsError:
                    continue
            stored = Checkpoint.from_json(checkpoint.shard_id, data, f"ZooKeeper {self.hosts} {node}")
            if checkpoint.is_behind(stored):
                raise CheckpointConflict(
                    f"checkpoint of {checkpoint.shard_id} at {node} is {stored.sequence_number} (by "
                    f"{stored.owner or 'unknown'}); refusing to move it back to {checkpoint.sequence_number}")
            try:
                self._call(f"writing {node}", self._client.set, node, payload, version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue
        raise CheckpointError(f"checkpoint of {checkpoint.shard_id} at {node}: gave up after {_CAS_ATTEMPTS} "
                              f"concurrent updates", retriable=True)

    def list(self) -> dict[str, Checkpoint]:
        from kazoo.exceptions import NoNodeError

        try:
            children = self._call(f"listing {self.path}", self._client.get_children, self.path)
        except NoNodeError:
            return {}
        out = {}
        for shard_id in sorted(children):
            checkpoint = self.load(shard_id)
            if checkpoint is not None:
                out[shard_id] = checkpoint
        return out

    def delete(self, shard_id: str) -> None:
        from kazoo.exceptions import NoNodeError

        try:
            self._call(f"deleting {self._node(shard_id)}", self._client.delete, self._node(shard_id))
        except NoNodeError:
            pass

    @property
    def batch_id_node(self) -> str:
        """``{prefix}/{app}/{stream}/batch_id``: a pipeline's last batch id, next to its checkpoints."""
        return self.path.rsplit("/", 1)[0] + "/batch_id"

    def load_batch_id(self) -> int:
        from kazoo.exceptions import NoNodeError

        node = self.batch_id_node
        try:
            data, _ = self._call(f"reading {node}", self._client.get, node)
        except NoNodeError:
            return 0
        return _parse_batch_id(data, node)

    def save_batch_id(self, batch_id: int) -> None:
        """Compare-and-set like :meth:`save`: a lower batch id than the stored one raises ``CheckpointConflict``."""
        from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError

        node = self.batch_id_node
        payload = str(batch_id).encode()
        for _ in range(_CAS_ATTEMPTS):
            try:
                data, stat = self._call(f"reading {node}", self._client.get, node)
            except NoNodeError:
                try:
                    self._call(f"creating {node}", self._client.create, node, payload, makepath=True)
                    return
                except NodeExistsError:
                    continue
            stored = _parse_batch_id(data, node)
            if batch_id < stored:
                raise CheckpointConflict(f"batch id at {node} is {stored}; refusing to move it back to {batch_id}")
            try:
                self._call(f"writing {node}", self._client.set, node, payload, version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue
        raise CheckpointError(f"batch id at {node}: gave up after {_CAS_ATTEMPTS} concurrent updates",
                              retriable=True)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.stop()
            finally:
                client.close()


def _parse_batch_id(data: bytes, node: str) -> int:
    text = data.decode("utf-8", "replace").strip()
    if not text.isdigit():
        raise CheckpointError(f"unreadable batch id at ZooKeeper node {node}: {text[:40]!r} is not a whole number; "
                              f"fix or delete the node")
    return int(text)
