"""Checkpoints in ZooKeeper, written compare-and-set on the znode version, on a bounded session.

Layout: ``{zookeeper_prefix}/{app_name}/{stream_name}/checkpoints/{shard_id}`` holds the checkpoint as UTF-8
JSON (see :meth:`Checkpoint.to_json`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from kinesis_spout import retry
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import SpoutConfig, ZooKeeperSettings
from kinesis_spout.errors import CheckpointConflict, CheckpointError, LeaseLost, RetryError
from kinesis_spout.zookeeper.errors import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kinesis_spout.zookeeper.security import ZooKeeperSecurity
from kinesis_spout.zookeeper.session import Listener, ZooKeeperSession

__all__ = ["CAS_ATTEMPTS", "CAS_RETRY", "TryAgain", "ZooKeeperCheckpointStore", "ZooKeeperSecurity", "compare_and_set",
           "retry_compare_and_set"]

T = TypeVar("T")

#: How many times a compare-and-set re-reads and tries again when another writer got in between.
CAS_ATTEMPTS = 20
#: The compare-and-set loops' retry: at once (re-reading is all the waiting there is), ``CAS_ATTEMPTS`` tries.
CAS_RETRY = retry.RetryPolicy(initial_s=0.0, multiplier=1.0, max_s=0.0, max_attempts=CAS_ATTEMPTS)


class TryAgain(Exception):
    """Raised by one try of a compare-and-set loop when another writer got in between: re-read and try again."""


def _at_once(_: float) -> None:
    """The sleep of the compare-and-set loops: none (their delay is 0)."""


def retry_compare_and_set(attempt: Callable[[], T], gave_up: str) -> T:
    """Call ``attempt()`` until it returns, trying again at once while it raises :class:`TryAgain`, at most
    ``CAS_ATTEMPTS`` times (:data:`CAS_RETRY`); then a retriable ``CheckpointError`` whose message is ``gave_up``.
    Any other error is raised as it is. Runs on the caller's thread. Who calls: :func:`compare_and_set`, the fenced
    checkpoint write, the Spark batch store's heartbeat and the pipeline's ownership."""
    try:
        return retry.call(attempt, CAS_RETRY, what=gave_up, retry_on=(TryAgain,), sleep=_at_once)
    except RetryError:
        raise CheckpointError(gave_up, retriable=True) from None


def compare_and_set(session: ZooKeeperSession, node: str, payload: bytes, refuse: Callable[[bytes], str | None],
                    what: str) -> None:
    """Write ``payload`` to ``node`` unless ``refuse(stored bytes)`` returns a reason (``CheckpointConflict``);
    re-read and retry when another writer got in between (:func:`retry_compare_and_set`). Who calls: the checkpoint
    store (unfenced saves), the Spark batch store (batch ids)."""
    def attempt() -> None:
        try:
            data, stat = session.get(node)
        except NoNodeError:
            try:
                session.create(node, payload, makepath=True)
                return
            except NodeExistsError:
                raise TryAgain from None
        reason = refuse(data)
        if reason is not None:
            raise CheckpointConflict(reason)
        try:
            session.set(node, payload, version=stat.version)
        except (BadVersionError, NoNodeError):
            raise TryAgain from None

    retry_compare_and_set(attempt, f"{what} at {node}: gave up after {CAS_ATTEMPTS} concurrent updates")


class ZooKeeperCheckpointStore:
    """One app's checkpoints of one stream in ZooKeeper. Constructor does no I/O; ``close()`` is idempotent.

    The store works on a :class:`ZooKeeperSession`: one it makes from ``hosts`` and the settings (then ``open()``
    starts it and ``close()`` ends it), or one given as ``session`` (shared with other stores: ``open()`` starts it
    if needed, ``close()`` leaves it to its owner; ``hosts`` and the settings are then the session's, those given
    here are not used). The connection's view (``connected``, ``wait_connected``,
    ``take_session_lost``, ``session_losses``, ``add_listener``, ``state``) is the session's: the checkpoint
    writer waits on it instead of failing writes, and re-reads the checkpoints after a lost session.

    Fencing (leases): ``fence``/``unfence`` make a shard's writes a transaction that also checks the lease's
    version. ``_fences`` is touched under ``_lock`` (the lease manager's thread and the checkpoint writer's).
    """

    def __init__(self, hosts: str, path: str, *, session_timeout_s: float = 10.0,
                 connect_timeout_s: float = 15.0, command_retries: int = 5,
                 security: ZooKeeperSecurity | None = None, operation_timeout_s: float | None = None,
                 session: ZooKeeperSession | None = None) -> None:
        self.path = path.rstrip("/")
        self.owns_session = session is None
        self.session = session if session is not None else ZooKeeperSession(
            hosts, session_timeout_s=session_timeout_s, connect_timeout_s=connect_timeout_s,
            command_retries=command_retries, security=security, operation_timeout_s=operation_timeout_s,
            name=f"checkpoint store for {self.path}")
        self._lock = threading.Lock()
        self._fences: dict[str, tuple[str, int | None]] = {}  # shard id -> (lease node, epoch: None = revoked)
        self._fence_path_made = False  # whether a fence made ``path`` (the lease thread's)

    @classmethod
    def from_config(cls, config: SpoutConfig) -> "ZooKeeperCheckpointStore":
        """The store of ``config``'s checkpoints (``checkpoint_path``) in its ZooKeeper (see :meth:`from_settings`)."""
        return cls.from_settings(config.zk, config.checkpoint_path)

    @classmethod
    def from_settings(cls, zk: ZooKeeperSettings, path: str) -> "ZooKeeperCheckpointStore":
        """A store of the checkpoints under ``path`` in the ZooKeeper of ``zk`` (hosts, session timeout, security;
        connecting waits at most the write deadline, 15 s at most)."""
        return cls(zk.hosts, path, session_timeout_s=zk.session_timeout_s, connect_timeout_s=min(15.0, zk.deadline_s),
                   security=ZooKeeperSecurity.from_settings(zk))

    @classmethod
    def on_session(cls, session: ZooKeeperSession, path: str) -> "ZooKeeperCheckpointStore":
        """A store on a session its caller owns (closing the store leaves the session open)."""
        return cls(session.hosts, path, session=session)

    # -- the session's settings and connection, as the store's -------------------------------------------------
    hosts = property(lambda self: self.session.hosts)
    security = property(lambda self: self.session.security)
    session_timeout_s = property(lambda self: self.session.session_timeout_s)
    connect_timeout_s = property(lambda self: self.session.connect_timeout_s)
    command_retries = property(lambda self: self.session.command_retries)
    operation_timeout_s = property(lambda self: self.session.operation_timeout_s)
    state = property(lambda self: self.session.state)
    session_losses = property(lambda self: self.session.session_losses)
    connected = property(lambda self: self.session.connected)
    negotiated_session_timeout_s = property(lambda self: self.session.negotiated_session_timeout_s)

    @property
    def zookeeper_home(self) -> "ZooKeeperCheckpointStore":
        """The store itself (a :class:`~kinesis_spout.checkpoint.base.ZooKeeperHome`): its checkpoints are in
        ZooKeeper, so leases, Spark's batch ends and ownership share its session."""
        return self

    @property
    def base_path(self) -> str:
        """``{prefix}/{app}/{stream}``: the node the checkpoints, leases and Spark's batch log sit under."""
        return self.path.rsplit("/", 1)[0]

    def wait_connected(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` until the connection is up; True when it is."""
        return self.session.wait_connected(timeout_s)

    def take_session_lost(self) -> bool:
        """True once after each lost session (the checkpoint writer re-reads the checkpoints)."""
        return self.session.take_session_lost()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(state)`` on each connection change, on kazoo's thread (see the session)."""
        self.session.add_listener(listener)

    def open(self) -> None:
        """Start the session (TLS and digest auth when configured); a retriable ``CheckpointError`` on timeout."""
        self.session.start()

    def close(self) -> None:
        """End the session when the store made it; a given session stays open. Idempotent."""
        if self.owns_session:
            self.session.close()

    # -- checkpoints --------------------------------------------------------------------------------------------
    def _node(self, shard_id: str) -> str:
        return f"{self.path}/{shard_id}"

    def load(self, shard_id: str) -> Checkpoint | None:
        node = self._node(shard_id)
        try:
            data, _ = self.session.get(node)
        except NoNodeError:
            return None
        return Checkpoint.from_json(shard_id, data, f"ZooKeeper {self.hosts} {node}")

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        """Compare-and-set: re-read, refuse to move backwards (unless ``force``), write with the version read."""
        node = self._node(checkpoint.shard_id)

        def refuse(data: bytes) -> str | None:
            if force:  # an operator's reset: also over an unreadable value
                return None
            stored = Checkpoint.from_json(checkpoint.shard_id, data, f"ZooKeeper {self.hosts} {node}")
            if not checkpoint.is_behind(stored):
                return None
            return (f"checkpoint of {checkpoint.shard_id} at {node} is {stored.sequence_number} (by "
                    f"{stored.owner or 'unknown'}); refusing to move it back to {checkpoint.sequence_number}")

        with self._lock:
            fence = None if force else self._fences.get(checkpoint.shard_id)
        if fence is None:
            compare_and_set(self.session, node, checkpoint.to_json(), refuse, f"checkpoint of {checkpoint.shard_id}")
            return
        lease_node, epoch = fence
        if epoch is None:
            raise LeaseLost(f"checkpoint of {checkpoint.shard_id} not written: this worker lost the shard's lease",
                            shard_id=checkpoint.shard_id)
        self._fenced_compare_and_set(node, checkpoint.to_json(), refuse, f"checkpoint of {checkpoint.shard_id}",
                                     (checkpoint.shard_id, lease_node, epoch))

    def fence(self, shard_id: str, lease_node: str, epoch: int) -> None:
        """From now on, write ``shard_id``'s checkpoint only while ``lease_node`` is at version ``epoch`` (one
        ZooKeeper transaction checks it and writes): a worker that lost the lease cannot write. Called by the lease
        manager when it takes a lease. The checkpoints' node is made (if missing) by the store's first fence only,
        so a worker taking many leases at once does not ask ZooKeeper again for each; a fenced write that finds it
        deleted since (a reset) makes it again."""
        if not self._fence_path_made:
            self.session.ensure_path(self.path)
            self._fence_path_made = True
        with self._lock:
            self._fences[shard_id] = (lease_node, epoch)

    def unfence(self, shard_id: str, *, revoke: bool = False) -> None:
        """Stop fencing ``shard_id``'s writes: its lease was released (``revoke`` False: its last checkpoint was
        written first), or lost (``revoke`` True: every later write of the shard is refused with ``LeaseLost``
        until it is fenced again). Called by the lease manager."""
        with self._lock:
            if revoke and shard_id in self._fences:
                self._fences[shard_id] = (self._fences[shard_id][0], None)
            else:
                self._fences.pop(shard_id, None)

    def _fenced_compare_and_set(self, node: str, payload: bytes, refuse: Callable[[bytes], str | None], what: str,
                                fence: tuple[str, str, int]) -> None:
        """:func:`compare_and_set` whose writes are transactions that also check the lease's version (``fence``:
        shard id, lease node, epoch); the same retry."""
        def attempt() -> None:
            try:
                data, stat = self.session.get(node)
            except NoNodeError:
                if not self._fenced_write(node, payload, None, fence):
                    raise TryAgain from None
                return
            reason = refuse(data)
            if reason is not None:
                raise CheckpointConflict(reason)
            if not self._fenced_write(node, payload, stat.version, fence):
                raise TryAgain

        retry_compare_and_set(attempt, f"{what} at {node}: gave up after {CAS_ATTEMPTS} concurrent updates")

    def _fenced_write(self, node: str, payload: bytes, version: int | None, fence: tuple[str, str, int]) -> bool:
        """One transaction: the lease node is still at the epoch, and ``node`` is created (``version`` None) or set
        at ``version``. True when written; False when ``node`` changed meanwhile (re-read and retry); raises
        ``LeaseLost`` when the lease moved on."""
        shard_id, lease_node, epoch = fence

        def build(txn: Any) -> None:
            txn.check(lease_node, epoch)
            if version is None:
                txn.create(node, payload)
            else:
                txn.set_data(node, payload, version)

        check, write = self.session.commit(f"writing {node} fenced by {lease_node} at epoch {epoch}", build)
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise LeaseLost(f"checkpoint of {shard_id} not written: this worker no longer holds its lease "
                            f"({lease_node} moved past epoch {epoch}: another worker took the shard)",
                            shard_id=shard_id)
        if isinstance(write, NoNodeError) and version is None:  # the checkpoints' node itself is gone (a reset)
            self.session.ensure_path(self.path)
            return False
        if isinstance(write, Exception) and not isinstance(write, RolledBackError):
            return False  # the checkpoint changed (or appeared) since it was read
        return True

    def list(self) -> dict[str, Checkpoint]:
        try:
            children = self.session.get_children(self.path)
        except NoNodeError:
            return {}
        out = {}
        for shard_id in sorted(children):
            checkpoint = self.load(shard_id)
            if checkpoint is not None:
                out[shard_id] = checkpoint
        return out

    def delete(self, shard_id: str) -> None:
        try:
            self.session.delete(self._node(shard_id))
        except NoNodeError:
            pass
