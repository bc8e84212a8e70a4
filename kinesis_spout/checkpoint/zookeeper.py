"""Checkpoints in ZooKeeper (kazoo), written compare-and-set on the znode version.

Layout: ``{zookeeper_prefix}/{app_name}/{stream_name}/checkpoints/{shard_id}`` holds the checkpoint as UTF-8
JSON (see :meth:`Checkpoint.to_json`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kinesis_spout.checkpoint.base import Checkpoint, OwnershipTaken
from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import CheckpointConflict, CheckpointError, LeaseLost

log = logging.getLogger("kinesis_spout.checkpoint")

_CAS_ATTEMPTS = 20


class _RedactSecrets(logging.Filter):
    """Blanks registered secrets out of kazoo's log records (at DEBUG it logs the auth request verbatim)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            redacted = message
            for secret in sorted(self.secrets, key=len, reverse=True):  # "user:password" whole before "password"
                redacted = redacted.replace(secret, "***")
            if redacted != message:
                record.msg, record.args = redacted, None
        return True


_kazoo_log = logging.getLogger("kinesis_spout.kazoo")
_redact = _RedactSecrets()
_kazoo_log.addFilter(_redact)


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How the store authenticates to ZooKeeper and who may change what it creates.

    ``auth`` is ``"user:password"`` for ZooKeeper's digest scheme: nodes the store creates then carry an ACL that
    gives that identity every right and, when ``world_readable``, everyone else read access (so tools can list
    checkpoints); nobody else can change them. Without ``auth`` nodes are open (ZooKeeper's default). ``tls``
    connects over TLS, verifying the server against ``ca_file`` (or the system's CAs) and presenting
    ``cert_file``/``key_file`` when the server wants a client certificate. ``auth`` never appears in a repr, a
    log line or an error.
    """

    auth: str | None = field(default=None, repr=False)
    world_readable: bool = True
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_config(cls, config: SpoutConfig) -> "ZooKeeperSecurity":
        return cls(config.zookeeper_auth, config.zookeeper_world_readable, config.zookeeper_tls,
                   config.zookeeper_tls_ca_file, config.zookeeper_tls_cert_file, config.zookeeper_tls_key_file)

    @property
    def user(self) -> str | None:
        return self.auth.partition(":")[0] if self.auth else None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``KazooClient``: auth data, default ACL, TLS files."""
        from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

        kwargs: dict[str, Any] = {}
        if self.auth:
            user, _, password = self.auth.partition(":")
            kwargs["auth_data"] = [("digest", self.auth)]
            acl = [make_digest_acl(user, password, all=True)]
            if self.world_readable:
                acl.append(make_acl("world", "anyone", read=True))
            kwargs["default_acl"] = acl
        else:
            kwargs["default_acl"] = OPEN_ACL_UNSAFE
        if self.tls:
            kwargs.update(use_ssl=True, verify_certs=True, ca=self.ca_file, certfile=self.cert_file,
                          keyfile=self.key_file)
        return kwargs


class ZooKeeperCheckpointStore:
    """One app's checkpoints of one stream in ZooKeeper. Constructor does no I/O; ``close()`` is idempotent.

    Every call is bounded in time (kazoo's own blocking calls are not): a command that gets no answer within
    ``operation_timeout_s`` (default: ``connect_timeout_s``), also while the connection is down, raises a
    retriable ``CheckpointError`` saying what it waited for. The store watches the connection: ``connected`` is clear
    while the connection is SUSPENDED or LOST (the checkpoint writer waits on it instead of failing writes), and
    a lost session (kazoo then opens a new one) is counted in ``session_losses`` and reported once by
    :meth:`take_session_lost`, so the writer re-reads the checkpoints.
    """

    def __init__(self, hosts: str, path: str, *, session_timeout_s: float = 10.0,
                 connect_timeout_s: float = 15.0, command_retries: int = 5,
                 security: ZooKeeperSecurity | None = None, operation_timeout_s: float | None = None) -> None:
        self.hosts = hosts
        self.path = path.rstrip("/")
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.command_retries = command_retries
        self.operation_timeout_s = operation_timeout_s if operation_timeout_s is not None else connect_timeout_s
        self.security = security or ZooKeeperSecurity()
        self._client: Any = None
        self._connected = threading.Event()
        self._lost_lock = threading.Lock()  # guards _session_lost (set on kazoo's thread) and _fences
        self._session_lost = False
        self._fences: dict[str, tuple[str, int | None]] = {}  # shard id -> (lease node, epoch: None = revoked)
        self._owned: dict[str, tuple[str, int]] = {}  # under _lost_lock: name -> (holder, session id of its node)
        self._suspended_since: float | None = None  # under _lost_lock: when the connection went down (monotonic)
        self._session: int | None = None  # under _lost_lock: the session's id, kept while SUSPENDED, None once LOST
        self._listeners: list[Any] = []
        self.state = "CLOSED"
        self.session_losses = 0

    @classmethod
    def from_config(cls, config: SpoutConfig) -> "ZooKeeperCheckpointStore":
        return cls(config.zookeeper, config.checkpoint_path, session_timeout_s=config.zookeeper_session_timeout_s,
                   connect_timeout_s=min(15.0, config.zookeeper_deadline_s),
                   security=ZooKeeperSecurity.from_config(config))

    def _node(self, shard_id: str) -> str:
        return f"{self.path}/{shard_id}"

    def open(self) -> None:
        """Connect (TLS and digest auth when configured); raises a retriable ``CheckpointError`` on timeout."""
        if self._client is not None:
            return
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.retry import KazooRetry

        if self.security.auth:
            _redact.secrets.add(self.security.auth)
            _redact.secrets.add(self.security.auth.partition(":")[2])
        client = KazooClient(
            hosts=self.hosts, timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2.0),
            command_retry=KazooRetry(max_tries=self.command_retries, delay=0.1, max_delay=2.0,
                                     ignore_expire=False),
            logger=_kazoo_log, **self.security.client_kwargs())
        client.add_listener(lambda state: self._on_state(state, client))
        try:
            client.start(timeout=self.connect_timeout_s)
        except KazooTimeoutError as exc:
            client.stop()
            client.close()
            hint = " over TLS (check the CA and client certificate files)" if self.security.tls else ""
            raise CheckpointError(f"cannot connect to ZooKeeper at {self.hosts}{hint} within "
                                  f"{self.connect_timeout_s:g} s: is it running and reachable? "
                                  f"(the zookeeper setting: SpoutConfig.zookeeper, the option \"zookeeper\" or "
                                  f"--zookeeper)", retriable=True) from exc
        self._client = client
        negotiated = self.negotiated_session_timeout_s
        log.info("connected to ZooKeeper at %s%s%s, session timeout %s s", self.hosts,
                 " over TLS" if self.security.tls else "",
                 f" as {self.security.user!r}" if self.security.auth else "",
                 f"{negotiated:g}" if negotiated is not None else "?")

    def add_listener(self, listener: Any) -> None:
        """Call ``listener(state)`` ("CONNECTED", "SUSPENDED" or "LOST") on each connection change, on kazoo's
        thread (it must not block). Used by the lease logic to pause a worker that may have lost its leases."""
        self._listeners.append(listener)

    def _on_state(self, state: str, client: Any) -> None:
        """kazoo's connection listener for ``client`` (runs on kazoo's thread; must not block). It also keeps the
        session's id: read from ``client.client_id`` when CONNECTED, kept while SUSPENDED (a reconnect may resume
        the session), forgotten when LOST."""
        if self.state == "CLOSED" and state != "CONNECTED":
            return  # our own close(), or a start that has not connected yet
        self.state = str(state)
        for listener in self._listeners:
            try:
                listener(str(state))
            except Exception:  # noqa: BLE001 - a listener's bug must not break the connection handling
                log.exception("ZooKeeper state listener failed")
        if state == "CONNECTED":
            client_id = client.client_id
            with self._lost_lock:
                self._suspended_since = None
                self._session = client_id[0] if client_id else None
            self._connected.set()
            return
        self._connected.clear()
        with self._lost_lock:
            if self._suspended_since is None:
                self._suspended_since = time.monotonic()
        if state == "LOST":
            with self._lost_lock:
                self._session = None
                self._session_lost = True
                self.session_losses += 1
            log.warning("ZooKeeper session at %s was lost; reconnecting with a new session", self.hosts)
        else:
            log.warning("ZooKeeper connection to %s suspended; checkpoint writes wait for it", self.hosts)

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def wait_connected(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s`` until the connection is up; True when it is."""
        return self._connected.wait(timeout_s)

    def take_session_lost(self) -> bool:
        """True once after each lost session (the caller re-reads what it relies on)."""
        with self._lost_lock:
            lost, self._session_lost = self._session_lost, False
        return lost

    @property
    def negotiated_session_timeout_s(self) -> float | None:
        """The session timeout ZooKeeper granted (it bounds the requested one by its min/max), once connected."""
        millis = getattr(self._client, "_session_timeout", None) if self._client is not None else None
        return millis / 1000.0 if isinstance(millis, (int, float)) and millis > 0 else None

    @property
    def _kazoo(self) -> Any:
        """The open kazoo client; a clear error before ``open()`` or after ``close()``."""
        client = self._client
        if client is None:
            raise CheckpointError(f"checkpoint store for {self.path} at ZooKeeper {self.hosts} is not open: call "
                                  f"open() first (a closed store stays closed until opened again)")
        return client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one kazoo command (``fn``, a method of the client such as ``client.get``) within a bounded time.

        kazoo's blocking calls wait for an answer with no time limit, and a request made while the connection is
        down waits for the reconnect, however long that takes. So the command's asynchronous form is used, each
        try waits at most until ``operation_timeout_s`` after the first, and a lost connection is waited for only
        within that time. Connection losses and time-outs are tried again up to ``command_retries`` times, then
        raised as a retriable ``CheckpointError`` that says what was waited for. ``NoNodeError``,
        ``NodeExistsError`` and ``BadVersionError`` are the caller's to handle and are raised as they are.
        """
        asynchronous = getattr(fn.__self__, f"{fn.__name__}_async")
        return self._bounded(what, lambda: asynchronous(*args, **kwargs))

    def _bounded(self, what: str, start: Any) -> Any:
        """Run ``start()`` (which sends one asynchronous kazoo request and returns its result object) within
        ``operation_timeout_s``, as :meth:`_call` describes; ``start`` is called again for each try."""
        from kazoo.exceptions import (
            BadVersionError,
            ConnectionLoss,
            KazooException,
            NoAuthError,
            NodeExistsError,
            NoNodeError,
            OperationTimeoutError,
            SessionExpiredError,
        )
        from kazoo.handlers.threading import KazooTimeoutError

        deadline = time.monotonic() + self.operation_timeout_s
        delay = 0.1
        problem = "no answer"
        for attempt in range(self.command_retries + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not self._connected.wait(min(left, 1.0)):
                log.info("ZooKeeper at %s: %s waits for the connection (%s)", self.hosts, what, self.state)
                if not self._connected.wait(max(0.0, deadline - time.monotonic())):
                    problem = f"not connected ({self.state})"
                    break
            try:
                return start().get(timeout=max(0.001, deadline - time.monotonic()))
            except (NoNodeError, NodeExistsError, BadVersionError):
                raise
            except NoAuthError as exc:
                who = f"identity {self.security.user!r}" if self.security.auth else "an unauthenticated client"
                raise CheckpointError(f"ZooKeeper at {self.hosts} refused {what}: {who} is not allowed by the "
                                      f"node's ACL; set zookeeper_auth to the identity that owns these "
                                      f"checkpoints") from exc
            except (ConnectionLoss, OperationTimeoutError, SessionExpiredError, KazooTimeoutError) as exc:
                problem = f"{type(exc).__name__} {exc}".strip()
                if attempt < self.command_retries:
                    time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                    delay = min(delay * 2, 2.0)
            except KazooException as exc:
                name = type(exc).__name__
                if name in _PERMANENT:
                    raise CheckpointError(f"ZooKeeper at {self.hosts} refused {what}: {name} {exc}".rstrip()
                                          + f"; trying again cannot help: {_PERMANENT[name]}") from exc
                raise CheckpointError(f"ZooKeeper at {self.hosts}: {what} failed: {name} {exc}",
                                      retriable=True) from exc
        raise CheckpointError(f"ZooKeeper at {self.hosts}: {what} failed within {self.operation_timeout_s:g} s "
                              f"({problem}); is it running and reachable?", retriable=True)

    def load(self, shard_id: str) -> Checkpoint | None:
        from kazoo.exceptions import NoNodeError

        node = self._node(shard_id)
        try:
            data, _ = self._call(f"reading {node}", self._kazoo.get, node)
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

        with self._lost_lock:
            fence = None if force else self._fences.get(checkpoint.shard_id)
        epoch = fence[1] if fence is not None else None
        if fence is not None and epoch is None:
            raise LeaseLost(f"checkpoint of {checkpoint.shard_id} not written: this worker lost the shard's lease",
                            shard_id=checkpoint.shard_id)
        self._compare_and_set(node, checkpoint.to_json(), refuse, f"checkpoint of {checkpoint.shard_id}",
                              fence=(checkpoint.shard_id, fence[0], epoch) if fence is not None and epoch is not None
                              else None)

    def fence(self, shard_id: str, lease_node: str, epoch: int) -> None:
        """From now on, write ``shard_id``'s checkpoint only while ``lease_node`` is at version ``epoch`` (one
        ZooKeeper transaction checks it and writes): a worker that lost the lease cannot write. Called by the lease
        manager when it takes a lease."""
        self._call(f"creating {self.path}", self._kazoo.ensure_path, self.path)
        with self._lost_lock:
            self._fences[shard_id] = (lease_node, epoch)

    def unfence(self, shard_id: str, *, revoke: bool = False) -> None:
        """Stop fencing ``shard_id``'s writes: its lease was released (``revoke`` False: its last checkpoint was
        written first), or lost (``revoke`` True: every later write of the shard is refused with ``LeaseLost``
        until it is fenced again). Called by the lease manager."""
        with self._lost_lock:
            if revoke and shard_id in self._fences:
                self._fences[shard_id] = (self._fences[shard_id][0], None)
            else:
                self._fences.pop(shard_id, None)

    def _compare_and_set(self, node: str, payload: bytes, refuse: Any, what: str,
                         fence: tuple[str, str, int] | None = None) -> None:
        """Write ``payload`` to ``node`` unless ``refuse(stored bytes)`` returns a reason (``CheckpointConflict``);
        re-read and retry when another writer got in between, up to ``_CAS_ATTEMPTS`` times. With ``fence``
        (shard id, lease node, epoch) the write is a transaction that also checks the lease's version."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        for _ in range(_CAS_ATTEMPTS):
            try:
                data, stat = self._call(f"reading {node}", self._kazoo.get, node)
            except NoNodeError:
                if fence is not None:
                    if self._fenced_write(node, payload, None, fence):
                        return
                    continue
                try:
                    self._call(f"creating {node}", self._kazoo.create, node, payload, makepath=True)
                    return
                except NodeExistsError:
                    continue
            reason = refuse(data)
            if reason is not None:
                raise CheckpointConflict(reason)
            if fence is not None:
                if self._fenced_write(node, payload, stat.version, fence):
                    return
                continue
            try:
                self._call(f"writing {node}", self._kazoo.set, node, payload, version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue
        raise CheckpointError(f"{what} at {node}: gave up after {_CAS_ATTEMPTS} concurrent updates", retriable=True)

    def _fenced_write(self, node: str, payload: bytes, version: int | None, fence: tuple[str, str, int]) -> bool:
        """One transaction: the lease node is still at the epoch, and ``node`` is created (``version`` None) or set
        at ``version``. True when written; False when ``node`` changed meanwhile (re-read and retry); raises
        ``LeaseLost`` when the lease moved on."""
        from kazoo.exceptions import RolledBackError

        shard_id, lease_node, epoch = fence

        def start() -> Any:
            txn = self._kazoo.transaction()
            txn.check(lease_node, epoch)
            if version is None:
                txn.create(node, payload)
            else:
                txn.set_data(node, payload, version)
            return txn.commit_async()

        check, write = self._bounded(f"writing {node} fenced by {lease_node} at epoch {epoch}", start)
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise LeaseLost(f"checkpoint of {shard_id} not written: this worker no longer holds its lease "
                            f"({lease_node} moved past epoch {epoch}: another worker took the shard)",
                            shard_id=shard_id)
        if isinstance(write, Exception) and not isinstance(write, RolledBackError):
            return False  # the checkpoint changed (or appeared) since it was read
        return True

    def list(self) -> dict[str, Checkpoint]:
        from kazoo.exceptions import NoNodeError

        try:
            children = self._call(f"listing {self.path}", self._kazoo.get_children, self.path)
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
            self._call(f"deleting {self._node(shard_id)}", self._kazoo.delete, self._node(shard_id))
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
            data, _ = self._call(f"reading {node}", self._kazoo.get, node)
        except NoNodeError:
            return 0
        return _parse_batch_id(data, node)

    def save_batch_id(self, batch_id: int) -> None:
        """Take ``batch_id`` for one batch: compare-and-set like :meth:`save`, and an id at or below the stored one
        raises ``CheckpointConflict`` (it was taken: by another pipeline on the same app and stream, or by this
        one already), so two pipelines never use one id."""
        node = self.batch_id_node

        def refuse(data: bytes) -> str | None:
            stored = _parse_batch_id(data, node)
            return f"batch id at {node} is {stored}; {batch_id} is taken" if batch_id <= stored else None

        self._compare_and_set(node, str(batch_id).encode(), refuse, "batch id")

    # -- ownership (exactly-once pipelines) --------------------------------------------------------------------
    def ownership_node(self, name: str) -> str:
        """``{prefix}/{app}/{stream}/{name}``: an ephemeral node naming the owner, next to the checkpoints."""
        if not name or "/" in name:
            raise ValueError(f"an ownership name is one node name, got {name!r}")
        return self.path.rsplit("/", 1)[0] + f"/{name}"

    def take_ownership(self, name: str, holder: str) -> None:
        """Create the ephemeral node of ``name`` holding ``holder`` (and the session timeout, so that a waiter
        knows how long a dead holder keeps it). ZooKeeper deletes it when this store's session ends: ``close()``,
        the process's death (after the session timeout), or an expiry. ``OwnershipTaken`` names the owner while
        the node exists; a node this session created already (a create retried after a lost reply) is taken.

        The ownership is recorded against the session that owns the node (its ``ephemeralOwner``, as the create
        answered it): a create made again on a new session after the first one's answer was lost and its session
        expired belongs to the new session, and is held."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        node = self.ownership_node(name)
        timeout_s = self.negotiated_session_timeout_s or self.session_timeout_s
        payload = json.dumps({"holder": holder, "session_timeout_s": timeout_s}).encode()
        for _ in range(_CAS_ATTEMPTS):
            try:
                _, stat = self._call(f"creating {node}", self._kazoo.create, node, payload, ephemeral=True,
                                     makepath=True, include_data=True)
            except NodeExistsError:
                try:
                    data, stat = self._call(f"reading {node}", self._kazoo.get, node)
                except NoNodeError:
                    continue  # released between the two requests: try to take it again
                other, other_timeout = _parse_owner(data)
                if not (other == holder and stat.ephemeralOwner == self._session_id()):
                    raise OwnershipTaken(f"{node} is owned by {other}", holder=other, where=node,
                                         vanishes_within_s=other_timeout) from None
            with self._lost_lock:
                self._owned[name] = (holder, int(stat.ephemeralOwner))
            log.info("ZooKeeper %s: %s owns %s", self.hosts, holder, node)
            return
        raise CheckpointError(f"ownership {node}: gave up after {_CAS_ATTEMPTS} holders came and went while "
                              f"{holder} tried to take it", retriable=True)

    def holds_ownership(self, name: str, holder: str) -> bool:
        """True while ``holder`` took ``name`` through this store, the session that owns its node is still this
        store's session, and the connection has not been down for longer than the session timeout (no I/O).

        A session that expired while the connection is down shows only on reconnecting; so, by this store's own
        clock, an ownership whose connection has been SUSPENDED for longer than the session timeout is no longer
        held (ZooKeeper has expired the session by then, or will within one tick, and another holder may take it).
        That still leaves a window, between the expiry and that moment, in which a new owner may act: writes that
        must not outlive the ownership need a fence of their own too (the batch log's compare-and-set)."""
        with self._lost_lock:
            mine = self._owned.get(name)
            if self._client is None or mine is None or mine != (holder, self._current_session()):
                return False
            suspended = self._suspended_since
        timeout_s = self.negotiated_session_timeout_s or self.session_timeout_s
        return suspended is None or time.monotonic() - suspended <= timeout_s

    def release_ownership(self, name: str, holder: str) -> None:
        """Delete the node of ``name`` if ``holder`` owns it in this session (idempotent).

        The delete is sent once, and only while the session that owns the node is this store's live session: never
        retried, since kazoo would send a retry on a new session after an expiry, and a node re-created by the next
        owner starts again at version 0, so a retried delete would delete the next owner's node. A delete that gets
        no answer (connection lost, session expired) leaves the node to its session: it goes when the session
        ends (an expiry, or this store's ``close()``)."""
        from kazoo.exceptions import BadVersionError, ConnectionLoss, NoNodeError, SessionExpiredError
        from kazoo.handlers.threading import KazooTimeoutError

        with self._lost_lock:
            mine = self._owned.pop(name, None)
            if mine is None or mine[0] != holder:
                if mine is not None:
                    self._owned[name] = mine
                return
            client = self._client
            if client is None or mine[1] != self._current_session():
                return  # the session that owned it is gone, and the node with it
        node = self.ownership_node(name)
        try:
            data, stat = self._call(f"reading {node}", self._kazoo.get, node)  # a read may be retried
        except NoNodeError:
            return
        except CheckpointError as exc:
            log.warning("ownership %s not released (%s); it goes when this store closes its session", node, exc)
            return
        if _parse_owner(data)[0] != holder or stat.ephemeralOwner != mine[1]:
            return
        if self._session_id() != mine[1]:  # not connected now, or another session: no request that could be
            log.info("ownership %s not released: not connected on its session; it goes with the session", node)
            return
        try:
            client.delete_async(node, version=stat.version).get(timeout=self.operation_timeout_s)
        except (NoNodeError, BadVersionError):
            pass
        except (ConnectionLoss, SessionExpiredError, KazooTimeoutError) as exc:
            log.info("ownership %s: the delete got no answer (%s); the node goes with its session", node,
                     type(exc).__name__)

    def _session_id(self) -> int | None:
        """The session id while connected (kazoo's ``client_id``), else None."""
        client_id = getattr(self._client, "client_id", None)
        return client_id[0] if client_id else None

    def _current_session(self) -> int | None:
        """The id of the client's session, also while the connection is SUSPENDED (a reconnect may resume it);
        None after it was lost and before a new one is made (kept by :meth:`_on_state`). Call under _lost_lock."""
        return self._session

    # -- batch ends of executor reads (readMode=executors, see kinesis_spout.spark.batches) -------------------------
    def batches_node(self, query: str) -> str:
        """``{prefix}/{app}/{stream}/batches/{query}``: the ends executor tasks recorded for one query's batches."""
        return self.path.rsplit("/", 1)[0] + f"/batches/{query}"

    def batch_end(self, query: str, batch: int, shard_id: str) -> bytes | None:
        """The end recorded for ``(batch, shard)``, or None when no task recorded one yet."""
        from kazoo.exceptions import NoNodeError

        node = f"{self.batches_node(query)}/{batch}/{shard_id}"
        try:
            data, _ = self._call(f"reading {node}", self._kazoo.get, node)
        except NoNodeError:
            return None
        return bytes(data)

    def record_batch_end(self, query: str, batch: int, shard_id: str, payload: bytes) -> bytes:
        """Record ``payload`` as the end of ``(batch, shard)`` unless a task recorded one first (create, never
        overwrite); returns the end that stands: ``payload`` or the first writer's."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        node = f"{self.batches_node(query)}/{batch}/{shard_id}"
        try:
            self._call(f"creating {node}", self._kazoo.create, node, payload, makepath=True)
            return payload
        except NodeExistsError:
            pass
        try:
            data, _ = self._call(f"reading {node}", self._kazoo.get, node)
        except NoNodeError as exc:  # created and deleted at once: only a cleanup far ahead of this batch does that
            raise CheckpointError(f"batch end {node} vanished right after it was written; was the batch cleaned "
                                  f"up by a query that is further on?", retriable=False) from exc
        return bytes(data)

    def batch_ends(self, query: str, batch: int) -> dict[str, bytes]:
        """Every end recorded for ``batch`` (shard id -> payload): one listing and pipelined reads."""
        from kazoo.exceptions import NoNodeError

        node = f"{self.batches_node(query)}/{batch}"
        try:
            shards = self._call(f"listing {node}", self._kazoo.get_children, node)
        except NoNodeError:
            return {}
        pending = {s: self._kazoo.get_async(f"{node}/{s}") for s in shards}
        out: dict[str, bytes] = {}
        for shard_id, result in pending.items():
            try:
                data, _ = result.get(timeout=self.operation_timeout_s)
            except NoNodeError:
                continue
            except Exception:  # noqa: BLE001 - a read that failed in the pipeline is made again, bounded
                data = self.batch_end(query, batch, shard_id)
                if data is None:
                    continue
            out[shard_id] = bytes(data)
        return out

    def delete_batches(self, query: str, below: int) -> int:
        """Delete the recorded ends of ``query``'s batches numbered below ``below``; returns how many batches."""
        from kazoo.exceptions import NoNodeError

        base = self.batches_node(query)
        try:
            batches = self._call(f"listing {base}", self._kazoo.get_children, base)
        except NoNodeError:
            return 0
        deleted = 0
        for name in sorted((b for b in batches if b.isdigit() and int(b) < below), key=int):
            node = f"{base}/{name}"
            try:
                for shard_id in self._call(f"listing {node}", self._kazoo.get_children, node):
                    try:
                        self._call(f"deleting {node}/{shard_id}", self._kazoo.delete, f"{node}/{shard_id}")
                    except NoNodeError:
                        pass
                self._call(f"deleting {node}", self._kazoo.delete, node)
                deleted += 1
            except (NoNodeError, CheckpointError):
                continue  # deleted meanwhile, a straggling task recorded an end since, or ZooKeeper is slow: the
                # next cleanup tries again
        return deleted

    def touch_query(self, query: str, payload: bytes) -> float:
        """Write ``payload`` to ``query``'s batches node (creating it): its modification time is the query's
        heartbeat. Returns that time by ZooKeeper's clock (seconds since the epoch), so callers compare heartbeats
        without trusting their own clock."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        node = self.batches_node(query)
        for _ in range(_CAS_ATTEMPTS):
            try:
                stat = self._call(f"writing {node}", self._kazoo.set, node, payload)
                return float(stat.mtime) / 1000.0
            except NoNodeError:
                pass
            try:
                self._call(f"creating {node}", self._kazoo.create, node, payload, makepath=True)
            except NodeExistsError:
                continue
            stat = self._call(f"reading {node}", self._kazoo.exists, node)
            if stat is not None:
                return float(stat.mtime) / 1000.0
        raise CheckpointError(f"heartbeat of {node}: gave up after {_CAS_ATTEMPTS} attempts", retriable=True)

    def query_heartbeats(self) -> dict[str, tuple[float, int]]:
        """Every query with a batches node: query id -> (its last heartbeat by ZooKeeper's clock in seconds, the
        node's version), from one listing and pipelined reads of the nodes' stats."""
        from kazoo.exceptions import NoNodeError

        base = self.path.rsplit("/", 1)[0] + "/batches"
        try:
            queries = self._call(f"listing {base}", self._kazoo.get_children, base)
        except NoNodeError:
            return {}
        pending = {q: self._kazoo.exists_async(f"{base}/{q}") for q in queries}
        out: dict[str, tuple[float, int]] = {}
        for query, result in pending.items():
            try:
                stat = result.get(timeout=self.operation_timeout_s)
            except Exception:  # noqa: BLE001 - a read that failed in the pipeline is made again, bounded
                stat = self._call(f"reading {base}/{query}", self._kazoo.exists, f"{base}/{query}")
            if stat is not None:
                out[query] = (float(stat.mtime) / 1000.0, int(stat.version))
        return out

    def delete_query(self, query: str, version: int, per_transaction: int = 500) -> bool:
        """Delete ``query``'s whole batches tree, but only while its node is still at ``version`` (no heartbeat
        since the caller judged it): every ZooKeeper transaction of the deletion (``per_transaction`` deletes at
        most: one request, within the server's 1 MiB limit) checks that version, so a query that beats meanwhile
        loses nothing. Returns True when the tree is gone, False when it was left (it beat, or a task recorded an
        end meanwhile: the next clean-up judges it again)."""
        from kazoo.exceptions import NoNodeError

        root = self.batches_node(query)
        try:
            batches = self._call(f"listing {root}", self._kazoo.get_children, root)
        except NoNodeError:
            return True
        listings = {b: self._kazoo.get_children_async(f"{root}/{b}") for b in batches}
        doomed: list[str] = []
        for batch, result in listings.items():
            try:
                shards = result.get(timeout=self.operation_timeout_s)
            except NoNodeError:
                continue
            except Exception:  # noqa: BLE001 - a listing that failed in the pipeline is made again, bounded
                try:
                    shards = self._call(f"listing {root}/{batch}", self._kazoo.get_children, f"{root}/{batch}")
                except NoNodeError:
                    continue
            doomed += [f"{root}/{batch}/{s}" for s in shards] + [f"{root}/{batch}"]
        for start in range(0, len(doomed), per_transaction):
            if not self._delete_checked(root, version, tuple(doomed[start:start + per_transaction])):
                return False
        return self._delete_checked(root, version, (), delete_root=True)

    def _delete_checked(self, root: str, version: int, nodes: tuple[str, ...], delete_root: bool = False) -> bool:
        """One transaction: ``root`` is at ``version``, and ``nodes`` (children before parents), then ``root``
        when ``delete_root``, are deleted. True when it was applied (or the root is gone already)."""
        from kazoo.exceptions import NoNodeError, RolledBackError

        def start() -> Any:
            txn = self._kazoo.transaction()
            if delete_root:
                txn.delete(root, version)
            else:
                txn.check(root, version)
            for node in nodes:
                txn.delete(node)
            return txn.commit_async()

        results = self._bounded(f"deleting {len(nodes) + delete_root} nodes of {root}", start)
        failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not failures:
            return True
        if delete_root and len(failures) == 1 and isinstance(failures[0], NoNodeError):
            return True  # deleted meanwhile (by another query's clean-up)
        log.info("batch ends of query at %s were left: %s", root, ", ".join(type(f).__name__ for f in failures))
        return False

    def close(self) -> None:
        client, self._client = self._client, None
        with self._lost_lock:
            self._owned.clear()  # ZooKeeper deletes the ownership nodes with the session
            self._suspended_since = None
            self._session = None
        self._connected.clear()
        self.state = "CLOSED"
        if client is not None:
            try:
                client.stop()
            finally:
                client.close()


#: kazoo's errors that no retry can mend (everything else it raises is retriable), with what to do about each.
_PERMANENT = {
    "NotEmptyError": "the node has children this library did not write; remove them or use another path",
    "NoChildrenForEphemeralsError": "a node of this path is ephemeral (written by another program?); use another "
                                    "path",
    "InvalidACLError": "the ACL this store sets is invalid for the server; check zookeeper_auth",
    "AuthFailedError": "the server rejected the credentials; check zookeeper_auth",
    "BadArgumentsError": "the server rejected the request's arguments (a node name or a value too large?)",
    "QuotaExceededError": "a quota of the server is exceeded; raise it or delete old nodes under this path",
    "UnimplementedError": "the server does not support this request; check the ZooKeeper version (3.5 or later)",
    "MarshallingError": "the request could not be encoded (a value over the server's jute.maxbuffer?)",
}


def _parse_owner(data: bytes) -> tuple[str, float | None]:
    """The holder and session timeout an ownership node holds (a node written otherwise: its text, no timeout)."""
    text = bytes(data).decode("utf-8", "replace")
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:200] or "(unknown)", None
    if not isinstance(doc, dict):
        return text[:200], None
    timeout = doc.get("session_timeout_s")
    return str(doc.get("holder", "(unknown)")), float(timeout) if isinstance(timeout, (int, float)) else None


def _parse_batch_id(data: bytes, node: str) -> int:
    text = data.decode("utf-8", "replace").strip()
    if not text.isdigit():
        raise CheckpointError(f"unreadable batch id at ZooKeeper node {node}: {text[:40]!r} is not a whole number; "
                              f"fix or delete the node")
    return int(text)
