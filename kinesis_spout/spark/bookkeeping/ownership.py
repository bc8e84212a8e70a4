"""One exactly-once pipeline at a time per app and stream: the ownership ``SpoutPipeline`` takes before it reads.

It lives on Spark's side because only the exactly-once ``SpoutPipeline`` uses it: the node's name is the
pipeline's, and nothing below the adapters needs it. In ZooKeeper it is an ephemeral node next to the app's
checkpoints of the stream (``{prefix}/{app}/{stream}/{name}``, JSON ``{"holder": ..., "session_timeout_s": ...}``)
made on the checkpoint store's session, so it goes when that session ends. :func:`ownership_for` gives the
ownership that goes with a checkpoint store.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from typing import Any, Protocol, runtime_checkable

from kinesis_spout.checkpoint.base import zookeeper_home
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.checkpoint.zookeeper import CAS_ATTEMPTS, TryAgain, retry_compare_and_set
from kinesis_spout.errors import CheckpointConflict, CheckpointError
from kinesis_spout.zookeeper.errors import BadVersionError, NoAnswerError, NodeExistsError, NoNodeError
from kinesis_spout.zookeeper.session import ZooKeeperSession

__all__ = ["MemoryOwnership", "OwnershipStore", "OwnershipTaken", "ZooKeeperOwnership", "ownership_for"]

log = logging.getLogger(__name__)


class OwnershipTaken(CheckpointConflict):
    """Another holder owns the name asked for (e.g. another exactly-once pipeline of the same app and stream).

    ``holder`` is how that holder described itself; ``where`` is where the ownership is kept (a ZooKeeper node);
    ``vanishes_within_s`` is how long a holder that died keeps it (its ZooKeeper session timeout), None when it
    is kept until released."""

    def __init__(self, message: str, *, holder: str, where: str, vanishes_within_s: float | None) -> None:
        super().__init__(message)
        self.holder = holder
        self.where = where
        self.vanishes_within_s = vanishes_within_s


@runtime_checkable
class OwnershipStore(Protocol):
    """Makes one holder at a time the owner of a name, until the holder releases it or its process dies.

    Who calls: ``SpoutPipeline`` in exactly-once mode, on its run thread, with the checkpoint store open.
    ``holder`` is a description unique to the caller's run (it names the process). ``take_ownership`` raises
    ``OwnershipTaken`` while another holder owns the name; ``holds_ownership`` says, without I/O, whether the caller
    still owns it (False once the session ended, or once it has been cut off from its server for longer than the
    session timeout, by its own clock); ``release_ownership`` gives it up (idempotent).

    The ZooKeeper ownership is an ephemeral node of the checkpoint store's session, so closing that store (or the
    process's death, after the session timeout) releases it; the memory ownership has no session, so it outlives
    the store's ``close()`` and lasts until ``release_ownership`` (or, in tests, ``revoke_ownership``).
    """

    def take_ownership(self, name: str, holder: str) -> None: ...

    def holds_ownership(self, name: str, holder: str) -> bool: ...

    def release_ownership(self, name: str, holder: str) -> None: ...


_owners: "weakref.WeakKeyDictionary[Any, OwnershipStore]" = weakref.WeakKeyDictionary()
_owners_lock = threading.Lock()


def ownership_for(checkpoints: Any) -> OwnershipStore | None:
    """The ownership that goes with a checkpoint store (one per store, for as long as it lives): on the session of a
    store in ZooKeeper (one that declares a ``zookeeper_home``, as the ZooKeeper store does), in memory for a memory
    store, the store itself when it can own (a user's store); None when it cannot (a user's store without
    ownership)."""
    home = zookeeper_home(checkpoints)
    if home is None and not isinstance(checkpoints, MemoryCheckpointStore):
        return checkpoints if isinstance(checkpoints, OwnershipStore) else None
    with _owners_lock:
        owner = _owners.get(checkpoints)
        if owner is None:
            owner = ZooKeeperOwnership(home.session, home.base_path) if home is not None else MemoryOwnership()
            _owners[checkpoints] = owner
        return owner


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


class ZooKeeperOwnership:
    """Ownerships as ephemeral nodes under ``base`` on ``session`` (started and closed by its owner, the checkpoint
    store). ``_owned`` (name -> (holder, id of the session that owns its node)) is touched under ``_lock``."""

    def __init__(self, session: ZooKeeperSession, base: str) -> None:
        self.session = session
        self.base = base.rstrip("/")
        self._lock = threading.Lock()
        self._owned: dict[str, tuple[str, int]] = {}

    def ownership_node(self, name: str) -> str:
        """``{prefix}/{app}/{stream}/{name}``: an ephemeral node naming the owner, next to the checkpoints."""
        if not name or "/" in name:
            raise ValueError(f"an ownership name is one node name, got {name!r}")
        return f"{self.base}/{name}"

    def take_ownership(self, name: str, holder: str) -> None:
        """Create the ephemeral node of ``name`` holding ``holder`` (and the session timeout, so that a waiter
        knows how long a dead holder keeps it). ZooKeeper deletes it when the session ends: the store's
        ``close()``, the process's death (after the session timeout), or an expiry. ``OwnershipTaken`` names the
        owner while the node exists; a node this session created already (a create retried after a lost reply) is
        taken.

        The ownership is recorded against the session that owns the node (its ``ephemeralOwner``, as the create
        answered it): a create made again on a new session after the first one's answer was lost and its session
        expired belongs to the new session, and is held. A node released between the create and the read is taken
        again at once, up to ``CAS_ATTEMPTS`` times
        (:func:`~kinesis_spout.checkpoint.zookeeper.retry_compare_and_set`)."""
        node = self.ownership_node(name)
        timeout_s = self.session.negotiated_session_timeout_s or self.session.session_timeout_s
        payload = json.dumps({"holder": holder, "session_timeout_s": timeout_s}).encode()

        def attempt() -> Any:
            try:
                _, stat = self.session.create(node, payload, ephemeral=True, makepath=True, include_data=True)
            except NodeExistsError:
                try:
                    data, stat = self.session.get(node)
                except NoNodeError:
                    raise TryAgain from None  # released between the two requests: try to take it again
                other, other_timeout = _parse_owner(data)
                if not (other == holder and stat.ephemeralOwner == self.session.session_id):
                    raise OwnershipTaken(f"{node} is owned by {other}", holder=other, where=node,
                                         vanishes_within_s=other_timeout) from None
            return stat

        stat = retry_compare_and_set(attempt, f"ownership {node}: gave up after {CAS_ATTEMPTS} holders came and "
                                              f"went while {holder} tried to take it")
        with self._lock:
            self._owned[name] = (holder, int(stat.ephemeralOwner))
        log.info("ZooKeeper %s: %s owns %s", self.session.hosts, holder, node)

    def holds_ownership(self, name: str, holder: str) -> bool:
        """True while ``holder`` took ``name`` here, the session that owns its node is still the session's current
        one, and the connection has not been down for longer than the session timeout (no I/O).

        A session that expired while the connection is down shows only on reconnecting; so, by this process's own
        clock, an ownership whose connection has been SUSPENDED for longer than the session timeout is no longer
        held (ZooKeeper has expired the session by then, or will within one tick, and another holder may take it).
        That still leaves a window, between the expiry and that moment, in which a new owner may act: writes that
        must not outlive the ownership need a fence of their own too (the batch log's compare-and-set)."""
        with self._lock:
            mine = self._owned.get(name)
        current, suspended = self.session.kept_session()
        if not self.session.started or mine is None or mine != (holder, current):
            return False
        timeout_s = self.session.negotiated_session_timeout_s or self.session.session_timeout_s
        return suspended is None or time.monotonic() - suspended <= timeout_s

    def release_ownership(self, name: str, holder: str) -> None:
        """Delete the node of ``name`` if ``holder`` owns it in this session (idempotent).

        The delete is sent once, and only while the session that owns the node is the live session: never
        retried, since kazoo would send a retry on a new session after an expiry, and a node re-created by the next
        owner starts again at version 0, so a retried delete would delete the next owner's node. A delete that gets
        no answer (connection lost, session expired) leaves the node to its session: it goes when the session
        ends (an expiry, or the store's ``close()``)."""
        with self._lock:
            mine = self._owned.pop(name, None)
            if mine is None or mine[0] != holder:
                if mine is not None:
                    self._owned[name] = mine
                return
        if not self.session.started or mine[1] != self.session.kept_session()[0]:
            return  # the session that owned it is gone, and the node with it
        node = self.ownership_node(name)
        try:
            data, stat = self.session.get(node)  # a read may be retried
        except NoNodeError:
            return
        except CheckpointError as exc:
            log.warning("ownership %s not released (%s); it goes when this store closes its session", node, exc)
            return
        if _parse_owner(data)[0] != holder or stat.ephemeralOwner != mine[1]:
            return
        if self.session.session_id != mine[1]:  # not connected now, or another session: no request that could be
            log.info("ownership %s not released: not connected on its session; it goes with the session", node)
            return
        try:
            self.session.delete_once(node, stat.version)
        except (NoNodeError, BadVersionError):
            pass
        except NoAnswerError as exc:
            log.info("ownership %s: the delete got no answer (%s); the node goes with its session", node,
                     type(exc).__name__)


class MemoryOwnership:
    """Ownerships in a dict, for pipelines on a memory checkpoint store. Thread-safe (one lock). It has no session:
    an ownership lasts until ``release_ownership`` or ``revoke_ownership``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, str] = {}

    def take_ownership(self, name: str, holder: str) -> None:
        """Make ``holder`` the owner of ``name``; ``OwnershipTaken`` (naming the owner) while another holds it."""
        with self._lock:
            current = self._owners.get(name)
            if current is not None and current != holder:
                raise OwnershipTaken(f"{name} of this memory checkpoint store is owned by {current}", holder=current,
                                     where=f"memory checkpoint store {name}", vanishes_within_s=None)
            self._owners[name] = holder

    def holds_ownership(self, name: str, holder: str) -> bool:
        with self._lock:
            return self._owners.get(name) == holder

    def release_ownership(self, name: str, holder: str) -> None:
        """Give ``name`` up if ``holder`` owns it (idempotent)."""
        with self._lock:
            if self._owners.get(name) == holder:
                del self._owners[name]

    def revoke_ownership(self, name: str) -> None:
        """End whoever owns ``name``, as an expired ZooKeeper session would (tests of a lost ownership)."""
        with self._lock:
            self._owners.pop(name, None)
