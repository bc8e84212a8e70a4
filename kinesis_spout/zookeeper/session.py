"""One ZooKeeper session (a kazoo client) whose every call is bounded in time, shared by the stores built on it.

Who uses it: the checkpoint store, the lease manager, the Spark batch store and the pipeline's ownership, each
through the public operations below (``get``, ``create``, ``set``, ``delete``, ``exists``, ``get_children``,
``ensure_path``, ``commit``, ``pipelined*``, ``delete_once``, ``watch_children``) and the connection's view
(``connected``, ``state``, ``add_listener``, ``session_id``, ``kept_session``, ``take_session_lost``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from kinesis_spout import retry
from kinesis_spout.errors import CheckpointError, RetryError
from kinesis_spout.zookeeper.security import ZooKeeperSecurity, kazoo_log

__all__ = ["ZooKeeperSession"]

log = logging.getLogger(__name__)

#: A connection listener: called with "CONNECTED", "SUSPENDED" or "LOST" on kazoo's thread (it must not block).
Listener = Callable[[str], None]


class ZooKeeperSession:
    """A bounded kazoo session. The constructor does no I/O; ``start()`` connects (idempotent while started);
    ``close()`` ends the session and stops kazoo's threads (idempotent); ``start()`` after ``close()`` opens a new
    session.

    Every call is bounded in time (kazoo's own blocking calls are not): a command that gets no answer within
    ``operation_timeout_s`` (default: ``connect_timeout_s``), also while the connection is down, raises a retriable
    ``CheckpointError`` saying what it waited for; the tries follow :attr:`retry_policy` (``sleep`` and ``clock``,
    the monotonic clock of the bounded calls, are injectable). ``connected`` is clear while the connection is
    SUSPENDED or LOST;
    a lost session (kazoo then opens a new one) is counted in ``session_losses`` and reported once by
    :meth:`take_session_lost`.

    Shared state: ``_client`` is replaced only by ``start``/``close`` (the owner's thread); the session's id, the
    time the connection went down, the lost flag and ``session_losses`` are written by kazoo's connection listener
    and read by any thread, all under ``_lock``.
    """

    def __init__(self, hosts: str, *, session_timeout_s: float = 10.0, connect_timeout_s: float = 15.0,
                 command_retries: int = 5, security: ZooKeeperSecurity | None = None,
                 operation_timeout_s: float | None = None, name: str = "ZooKeeper session",
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.hosts = hosts
        self.name = name
        self.session_timeout_s = session_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.command_retries = command_retries
        self.operation_timeout_s = operation_timeout_s if operation_timeout_s is not None else connect_timeout_s
        self.security = security or ZooKeeperSecurity()
        self._sleep = sleep
        self._clock = clock
        self._client: Any = None
        self._connected = threading.Event()
        self._lock = threading.Lock()
        self._session_lost = False  # under _lock
        self._suspended_since: float | None = None  # under _lock: when the connection went down (monotonic)
        self._session: int | None = None  # under _lock: the session's id, kept while SUSPENDED, None once LOST
        self._listeners: list[Listener] = []
        self.state = "CLOSED"
        self.session_losses = 0

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect (TLS and digest auth when configured); raises a retriable ``CheckpointError`` on timeout. Who
        calls: the owner of the session (a store's ``open()``), before any operation."""
        if self._client is not None:
            return
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.retry import KazooRetry

        self.security.register_secrets()
        client = KazooClient(
            hosts=self.hosts, timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=2.0),
            command_retry=KazooRetry(max_tries=self.command_retries, delay=0.1, max_delay=2.0,
                                     ignore_expire=False),
            logger=kazoo_log, **self.security.client_kwargs())
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

    @property
    def started(self) -> bool:
        """True between ``start()`` and ``close()``."""
        return self._client is not None

    def close(self) -> None:
        """End the session (ZooKeeper deletes its ephemeral nodes) and stop kazoo's threads. Idempotent."""
        client, self._client = self._client, None
        with self._lock:
            self._suspended_since = None
            self._session = None
        self._connected.clear()
        self.state = "CLOSED"
        if client is not None:
            try:
                client.stop()
            finally:
                client.close()

    # -- the connection -----------------------------------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
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
            with self._lock:
                self._suspended_since = None
                self._session = client_id[0] if client_id else None
            self._connected.set()
            return
        self._connected.clear()
        with self._lock:
            if self._suspended_since is None:
                self._suspended_since = time.monotonic()
        if state == "LOST":
            with self._lock:
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
        """True once after each lost session (the caller re-reads what it relies on). One consumer per session:
        the checkpoint writer."""
        with self._lock:
            lost, self._session_lost = self._session_lost, False
        return lost

    @property
    def negotiated_session_timeout_s(self) -> float | None:
        """The session timeout ZooKeeper granted (it bounds the requested one by its min/max), once connected."""
        millis = getattr(self._client, "_session_timeout", None) if self._client is not None else None
        return millis / 1000.0 if isinstance(millis, (int, float)) and millis > 0 else None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """kazoo's ``(session id, password)`` of the live connection, None when not connected: what a tool needs to
        join this session (tests use it to expire the session)."""
        client_id = getattr(self._client, "client_id", None)
        return (client_id[0], client_id[1]) if client_id else None

    @property
    def session_id(self) -> int | None:
        """The session's id while connected (from kazoo's ``client_id``), else None."""
        client_id = self.client_id
        return client_id[0] if client_id else None

    def kept_session(self) -> tuple[int | None, float | None]:
        """``(session id, down since)`` read together: the id of the client's session, also while the connection
        is SUSPENDED (a reconnect may resume it), None after it was lost or closed and before a new one is made;
        and when the connection went down (``time.monotonic()``), None while it is up."""
        with self._lock:
            return self._session, self._suspended_since

    # -- bounded calls ------------------------------------------------------------------------------------------
    def _open_client(self) -> Any:
        """The started kazoo client; a clear error before ``start()`` or after ``close()``."""
        client = self._client
        if client is None:
            raise CheckpointError(f"{self.name} at ZooKeeper {self.hosts} is not open: call open() first (a closed "
                                  f"store stays closed until opened again)")
        return client

    def call(self, what: str, op: str, *args: Any, **kwargs: Any) -> Any:
        """Run one kazoo command (``op``, the name of a client method such as ``"get"``) within a bounded time.

        kazoo's blocking calls wait for an answer with no time limit, and a request made while the connection is
        down waits for the reconnect, however long that takes. So the command's asynchronous form is used, each
        try waits at most until ``operation_timeout_s`` after the first, and a lost connection is waited for only
        within that time. Connection losses and time-outs are tried again up to ``command_retries`` times, then
        raised as a retriable ``CheckpointError`` that says what was waited for. ``NoNodeError``,
        ``NodeExistsError`` and ``BadVersionError`` (of :mod:`kinesis_spout.zookeeper.errors`) are the caller's to
        handle.
        """
        asynchronous = getattr(self._open_client(), f"{op}_async")
        return self.bounded(what, lambda: asynchronous(*args, **kwargs))

    @property
    def retry_policy(self) -> retry.RetryPolicy:
        """How a bounded call tries again: ``command_retries`` more tries after the first, 0.1 s between the first
        two, doubling up to 2 s (no jitter), none that could not start within ``operation_timeout_s``."""
        return retry.RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=2.0, max_attempts=self.command_retries + 1,
                                 deadline_s=self.operation_timeout_s)

    def bounded(self, what: str, start: Callable[[], Any]) -> Any:
        """Run ``start()`` (which sends one asynchronous kazoo request and returns its result object) within
        ``operation_timeout_s``, as :meth:`call` describes; ``start`` is called again for each try, following
        :attr:`retry_policy` on the caller's thread."""
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

        from kinesis_spout.zookeeper.translation import PERMANENT, translated

        transient = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, KazooTimeoutError)
        if self.command_retries < 0 or not self.operation_timeout_s > 0:
            raise self._failed(what, "no answer")
        deadline = self._clock() + self.operation_timeout_s
        problem = ["no answer"]  # what the last try met, for the error

        def attempt() -> Any:
            left = deadline - self._clock()
            if left <= 0:
                raise _GiveUp(problem[0])
            if not self._connected.wait(min(left, 1.0)):
                log.info("ZooKeeper at %s: %s waits for the connection (%s)", self.hosts, what, self.state)
                if not self._connected.wait(max(0.0, deadline - self._clock())):
                    raise _GiveUp(f"not connected ({self.state})")
            try:
                return start().get(timeout=max(0.001, deadline - self._clock()))
            except (NoNodeError, NodeExistsError, BadVersionError) as exc:
                raise translated(exc)  # noqa: B904 - the translation's __cause__ is exc
            except NoAuthError as exc:
                who = f"identity {self.security.user!r}" if self.security.auth else "an unauthenticated client"
                raise CheckpointError(f"ZooKeeper at {self.hosts} refused {what}: {who} is not allowed by the "
                                      f"node's ACL; set zookeeper_auth to the identity that owns these "
                                      f"checkpoints") from exc
            except transient as exc:
                problem[0] = f"{type(exc).__name__} {exc}".strip()
                raise
            except KazooException as exc:
                name = type(exc).__name__
                if name in PERMANENT:
                    raise CheckpointError(f"ZooKeeper at {self.hosts} refused {what}: {name} {exc}".rstrip()
                                          + f"; trying again cannot help: {PERMANENT[name]}") from exc
                raise CheckpointError(f"ZooKeeper at {self.hosts}: {what} failed: {name} {exc}",
                                      retriable=True) from exc

        try:
            return retry.call(attempt, self.retry_policy, what=what, retry_on=transient, sleep=self._sleep,
                              clock=self._clock)
        except _GiveUp as exc:
            raise self._failed(what, exc.problem) from None
        except RetryError:
            raise self._failed(what, problem[0]) from None

    def _failed(self, what: str, problem: str) -> CheckpointError:
        """The retriable error of a bounded call that got no answer within ``operation_timeout_s``."""
        return CheckpointError(f"ZooKeeper at {self.hosts}: {what} failed within {self.operation_timeout_s:g} s "
                               f"({problem}); is it running and reachable?", retriable=True)

    # -- operations (bounded; ``what`` names the request in errors) ----------------------------------------------
    def get(self, path: str, *, what: str | None = None) -> tuple[bytes, Any]:
        """The node's data and stat; ``NoNodeError`` when it does not exist."""
        data, stat = self.call(what or f"reading {path}", "get", path)
        return data, stat

    def exists(self, path: str, *, what: str | None = None) -> Any:
        """The node's stat, or None."""
        return self.call(what or f"reading {path}", "exists", path)

    def get_children(self, path: str, *, what: str | None = None) -> list[str]:
        """The names of the node's children (unsorted); ``NoNodeError`` when it does not exist."""
        return list(self.call(what or f"listing {path}", "get_children", path))

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False,
               include_data: bool = False, what: str | None = None) -> Any:
        """Create the node (with the session's default ACL); ``NodeExistsError`` when it exists. Returns its path,
        or ``(path, stat)`` with ``include_data``."""
        return self.call(what or f"creating {path}", "create", path, value, ephemeral=ephemeral, makepath=makepath,
                         include_data=include_data)

    def set(self, path: str, value: bytes, *, version: int = -1, what: str | None = None) -> Any:
        """Write the node's data if it is at ``version`` (-1: any); returns its new stat. ``BadVersionError`` when
        it moved on, ``NoNodeError`` when it does not exist."""
        return self.call(what or f"writing {path}", "set", path, value, version=version)

    def delete(self, path: str, *, version: int = -1, what: str | None = None) -> None:
        """Delete the node if it is at ``version`` (-1: any)."""
        self.call(what or f"deleting {path}", "delete", path, version=version)

    def ensure_path(self, path: str, *, what: str | None = None) -> None:
        """Create the node and its parents unless they exist."""
        self.call(what or f"creating {path}", "ensure_path", path)

    def commit(self, what: str, build: Callable[[Any], None]) -> list[Any]:
        """One transaction, bounded like every call: ``build(txn)`` adds its operations (``check``, ``create``,
        ``set_data``, ``delete``) to a new kazoo transaction each try. Returns each operation's result (an
        exception of :mod:`kinesis_spout.zookeeper.errors` for a failed one; the others are then
        ``RolledBackError``)."""
        from kinesis_spout.zookeeper.translation import translated

        def start() -> Any:
            txn = self._open_client().transaction()
            build(txn)
            return txn.commit_async()

        return [translated(r) if isinstance(r, BaseException) else r for r in self.bounded(what, start)]

    def pipelined(self, op: str, paths: list[str]) -> dict[str, Any]:
        """Send ``op`` ("get", "exists" or "get_children") for every path at once, then wait for each answer up to
        ``operation_timeout_s``: path -> the answer, or the exception it raised (kazoo's translated: not retried,
        the caller repeats a failed one with a bounded call)."""
        send = getattr(self._open_client(), f"{op}_async")
        return self._answers([(path, send(path)) for path in paths])

    def pipelined_commits(self, builds: dict[str, Callable[[Any], None]]) -> dict[str, Any]:
        """A transaction per key of ``builds`` (as :meth:`commit` makes it), all sent at once and answered as
        :meth:`pipelined`: key -> each operation's result, or the exception the whole transaction raised."""
        client, pending = self._open_client(), []
        for key, build in builds.items():
            build(txn := client.transaction())
            pending.append((key, txn.commit_async()))
        return self._answers(pending, each=True)

    def _answers(self, pending: list[tuple[str, Any]], each: bool = False) -> dict[str, Any]:
        """Each answer (``each``: a transaction's, results translated) or its exception, in one operation timeout."""
        from kinesis_spout.zookeeper.translation import translated

        out: dict[str, Any] = {}
        deadline = self._clock() + self.operation_timeout_s  # one wait for them all, not one each
        for key, result in pending:
            try:
                answer = result.get(timeout=max(0.001, deadline - self._clock()))
                out[key] = [translated(r) if isinstance(r, BaseException) else r for r in answer] if each else answer
            except Exception as exc:  # noqa: BLE001 - handed to the caller, who decides
                out[key] = translated(exc)
        return out

    def delete_once(self, path: str, version: int) -> None:
        """Send one delete at ``version`` and wait up to ``operation_timeout_s`` for its answer; never retried
        (kazoo would send a retry on a new session after an expiry). ``NoAnswerError`` when no answer came (whether
        the node was deleted is unknown), ``NoNodeError`` or ``BadVersionError`` when it was not deleted."""
        from kinesis_spout.zookeeper.translation import translated
        try:
            self._open_client().delete_async(path, version=version).get(timeout=self.operation_timeout_s)
        except Exception as exc:  # noqa: BLE001 - kazoo's translated (its __cause__), any other as it is
            raise translated(exc)  # noqa: B904

    def watch_children(self, path: str, changed: Callable[[list[str]], Any]) -> None:
        """Call ``changed(children)`` on kazoo's thread (it must not block) now and whenever ``path``'s children
        change, for as long as the session is started."""
        from kazoo.recipe.watchers import ChildrenWatch

        ChildrenWatch(self._open_client(), path, changed)


class _GiveUp(Exception):
    """A bounded call's try cannot be made within the operation timeout; ``problem`` says why (not connected, or
    what the last try met). Raised and caught inside :meth:`ZooKeeperSession.bounded`."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem

