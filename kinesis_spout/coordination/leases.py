"""Shard leases in ZooKeeper: which live worker reads which shard, with a fencing epoch per shard.

Layout, next to the checkpoints (``{prefix}/{app}/{stream}/``):

- ``workers/{worker_id}``: ephemeral, one per live worker; it disappears when the worker's session ends (a
  SIGKILLed worker after the ZooKeeper session timeout, a closed one at once).
- ``leases/{shard_id}``: persistent JSON ``{"owner": "<worker id>" | null, "updated_at": "<ISO-8601>"}``. Every
  change of owner is a compare-and-set on the znode's version, so the version is the lease's **epoch**: it moves
  on whenever the shard changes hands. While a worker holds a lease, the shard's checkpoint is written in one
  transaction with a check that the lease is still at the worker's epoch
  (:meth:`ZooKeeperCheckpointStore.fence`), so a worker that lost its lease (paused past its session, cut off)
  cannot write: its write fails with ``LeaseLost``. (An ephemeral lease node could not serve: re-created, its
  version starts at 0 again.)

A lease is taken only when its owner is nobody or a worker that is not live, and given back by its owner
(``release``): leases never move from a live owner without its consent. "Not live" means missing from the
workers listed *after* the lease was read: a worker registers before it takes a lease, so an owner named by the
lease and missing from a later listing has left (listed before, a worker that joined and took the lease in
between would look gone). A lease stays this worker's until ZooKeeper says otherwise: it is forgotten only once
its give-back is written or it is found to have moved on, and a lease that names this worker counts as its own.

Reading every lease every round would cost workers x shards ZooKeeper reads a round (16 workers over 1,024 shards:
16,384), though at rest nothing changes. So every change of a lease node (taken, given back, created, deleted) is
written in one transaction with a write to ``leases`` itself, whose version is then the **generation** of the
leases: a round reads the generation (one request) and reads lease nodes again only when it moved, or once every
``refresh_s`` (a writer that does not bump the generation, an older release of this library during a rolling
upgrade, is seen within that time; it can delay a balance move, never a fenced checkpoint write).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from kinesis_spout.checkpoint.base import ZooKeeperHome
from kinesis_spout.errors import CheckpointError, LeaseError, SpoutError
from kinesis_spout.zookeeper.errors import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

__all__ = ["LeaseState", "ZooKeeperLeases"]

log = logging.getLogger(__name__)

#: A shard's lease as read: its owner (None: free) and its epoch (the znode version; -1: no lease node yet).
LeaseState = tuple["str | None", int]

#: How long lease states read under one generation are trusted without reading the nodes again (see above).
REFRESH_S = 300.0


class ZooKeeperLeases:
    """The leases of one app and stream, as seen by one worker.

    Who calls: the spout's shard sync thread (``join``, ``workers``, ``read``, ``acquire``, ``release``) and the
    spout (``still_held`` and ``forget`` after a ``LeaseLost``, ``held``). ``held`` maps each shard this worker
    holds to its epoch; it is guarded by one lock. The constructor does no I/O; the store must be open.

    It works on the checkpoint store's session (``store.session``, through its public operations only) and fences
    that store's writes (``store.fence``/``store.unfence``): a lease and the checkpoint writes it guards meet in one
    ZooKeeper transaction, so both must be on one session.

    ``read`` keeps the lease states it read, under the generation they were read at; ``acquire`` and ``release``
    forget them when a compare-and-set finds a lease moved on. All three are called by one thread at a time (the
    shard sync thread); ``still_held`` reads the node itself.
    """

    def __init__(self, store: ZooKeeperHome, worker_id: str, *, refresh_s: float = REFRESH_S) -> None:
        self.store = store
        self.session = store.session
        self.worker_id = worker_id
        base = store.base_path
        self.workers_path = f"{base}/workers"
        self.leases_path = f"{base}/leases"
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._watching = False
        self.refresh_s = refresh_s
        self._seen: dict[str, LeaseState] = {}  # lease states read under ``self._generation`` (``read``'s only)
        self._generation: int | None = None
        self._refresh_at = 0.0

    # -- membership ---------------------------------------------------------------------------------------------
    def join(self) -> None:
        """Register this worker (an ephemeral node). Idempotent within a session; after a lost session, call again.

        Raises ``LeaseError`` when another live worker registered the same ``worker_id``.
        """
        node = f"{self.workers_path}/{self.worker_id}"
        doc = json.dumps({"joined_at": datetime.now(timezone.utc).isoformat()}).encode()
        self.session.ensure_path(self.workers_path)
        self.session.ensure_path(self.leases_path)
        try:
            self.session.create(node, doc, ephemeral=True, what=f"registering {node}")
        except NodeExistsError:
            _, stat = self.session.get(node)
            if stat.ephemeralOwner != self.session.session_id:
                raise LeaseError(f"another live worker is registered as {self.worker_id!r} at {node}; give each "
                                 f"worker its own worker_id (the default host:pid is unique per process)") from None

    def registered(self) -> bool:
        """Whether this worker's node exists (it does not after a lost session until ``join`` again)."""
        return self.session.exists(f"{self.workers_path}/{self.worker_id}", what="reading the workers") is not None

    def workers(self) -> list[str]:
        """The live workers' ids, sorted (none when no worker ever joined)."""
        return self._children(self.workers_path)

    def lease_ids(self) -> list[str]:
        """The shards that have a lease node, sorted."""
        return self._children(self.leases_path)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.session.get_children(path))
        except NoNodeError:
            return []

    def watch_workers(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` (on kazoo's thread: it must not block) whenever a worker joins or leaves."""
        if self._watching:
            return
        self._watching = True

        def on_children(_children: list[str]) -> None:
            changed()

        self.session.watch_children(self.workers_path, on_children)

    def leave(self) -> None:
        """Unregister this worker (best effort; the node goes with the session anyway)."""
        if not self.session.started:
            return
        try:
            self.session.delete(f"{self.workers_path}/{self.worker_id}", what="unregistering")
        except (NoNodeError, CheckpointError):
            pass

    # -- leases -------------------------------------------------------------------------------------------------
    def _node(self, shard_id: str) -> str:
        return f"{self.leases_path}/{shard_id}"

    def read(self, shard_ids: list[str]) -> dict[str, LeaseState]:
        """Each shard's lease (owner, epoch); a shard without a lease node is ``(None, -1)``. A lease node that is
        not a lease is a ``LeaseError`` naming it.

        The generation is read first; lease states read under the same generation (within ``refresh_s``) are
        returned as they were, and only the others' nodes are read. Each state is therefore as ZooKeeper had the
        node at some moment after the generation was read, as a fresh read would be: an epoch read here is only
        what a later compare-and-set is checked against, never trusted beyond that."""
        generation = self._read_generation()
        now = time.monotonic()
        if generation is None or generation != self._generation or now >= self._refresh_at:
            self._seen = {}
            self._generation = generation
            self._refresh_at = now + self.refresh_s
        missing = [shard_id for shard_id in shard_ids if shard_id not in self._seen]
        if missing:
            fresh = self._read_nodes(missing)
            if generation is None:  # no leases node yet: nothing to keep them under
                return fresh
            self._seen.update(fresh)
        return {shard_id: self._seen[shard_id] for shard_id in shard_ids}

    def _read_generation(self) -> int | None:
        """The version of the ``leases`` node (moved on by every lease change), or None when it does not exist."""
        stat = self.session.exists(self.leases_path, what="reading the leases' generation")
        return None if stat is None else int(stat.version)

    def _read_nodes(self, shard_ids: list[str]) -> dict[str, LeaseState]:
        """Each shard's lease node as ZooKeeper has it now.

        The reads are pipelined: every lease node's read is sent at once and the answers collected after, so a
        read of N shards costs one round trip to ZooKeeper, not N (N requests still). A read that failed (the
        connection lost meanwhile), and every read while the connection is down, is made on its own within the
        session's operation deadline, which raises ``CheckpointError`` when ZooKeeper stays away."""
        nodes = {shard_id: self._node(shard_id) for shard_id in shard_ids}
        # not connected: each read on its own, the first waiting for the connection within the deadline (queued
        # pipelined reads would each wait out the deadline in turn)
        pipelined = bool(nodes) and self.session.connected
        answers = self.session.pipelined("get", list(nodes.values())) if pipelined else {}
        out: dict[str, LeaseState] = {}
        for shard_id, node in nodes.items():
            answer = answers.get(node)
            if isinstance(answer, NoNodeError):
                out[shard_id] = (None, -1)
                continue
            if isinstance(answer, BaseException) or answer is None:
                try:
                    answer = self.session.get(node, what=f"reading the lease {node}")
                except NoNodeError:
                    out[shard_id] = (None, -1)
                    continue
            data, stat = answer
            out[shard_id] = (_owner(data, node), stat.version)
        return out

    def _change(self, what: str, op: str, node: str, *args: Any) -> Any:
        """Change a lease node (``op``: ``create``, ``set_data`` or ``delete`` of a kazoo transaction, with
        ``args``) and move the generation on, in one transaction. Returns the change's result; its
        ``BadVersionError``, ``NoNodeError`` or ``NodeExistsError`` is raised as the plain call would."""
        build = self._build(op, node, *args)
        for _ in range(2):
            change, bump = self.session.commit(what, build)
            if isinstance(change, Exception) and not isinstance(change, RolledBackError):
                raise change
            if not isinstance(bump, NoNodeError):
                break
            self.session.ensure_path(self.leases_path)  # deleted under us (a reset): made again, then once more
        if isinstance(change, Exception):
            raise LeaseError(f"{what}: ZooKeeper refused the transaction ({type(bump).__name__} on "
                             f"{self.leases_path})")
        return change

    def _build(self, op: str, node: str, *args: Any) -> Callable[[Any], None]:
        """A lease change's transaction: ``op`` on ``node`` with ``args``, then the generation moved on."""
        def build(txn: Any) -> None:
            getattr(txn, op)(node, *args)
            txn.set_data(self.leases_path, b"", -1)
        return build

    def _take(self, shard_id: str, seen: LeaseState) -> tuple[str, str, str, tuple[Any, ...]]:
        """What taking ``shard_id``'s lease writes (``what``, ``op``, node, args): the node created when there is
        none yet (its epoch is then 0), else set at the version ``seen``."""
        node, doc = self._node(shard_id), _lease_doc(self.worker_id)
        if seen[1] < 0:
            return f"creating {node}", "create", node, (doc,)
        return f"taking {node}", "set_data", node, (doc, seen[1])

    def acquire(self, shard_id: str, seen: LeaseState) -> int | None:
        """Take the lease of ``shard_id`` if it is still as ``seen`` (compare-and-set); returns the new epoch, or
        None when someone else changed it first. Fences the shard's checkpoint writes with the new epoch."""
        what, op, node, args = self._take(shard_id, seen)
        try:
            change = self._change(what, op, node, *args)
        except (BadVersionError, NodeExistsError, NoNodeError):
            self._seen = {}  # what this worker read is out of date: the next round reads the leases again
            return None
        epoch = 0 if op == "create" else change.version
        self._taken(shard_id, seen, epoch)
        return epoch

    def _taken(self, shard_id: str, seen: LeaseState, epoch: int) -> None:
        """The lease of ``shard_id`` now names this worker at ``epoch``: fence its checkpoint writes, hold it."""
        # From here the lease names this worker. Should fencing fail (ZooKeeper unreachable), the error goes to the
        # caller and the shard is not held (nothing of it is read unfenced): the next round reads the lease naming
        # this worker and takes it again under a new epoch, or gives it back. The same holds for a take whose reply
        # was lost (the write happened, the retry found the version moved on and returned None above).
        self.store.fence(shard_id, self._node(shard_id), epoch)
        with self._lock:
            self._held[shard_id] = epoch
        log.info("worker %s took the lease of %s (epoch %d, from %s)", self.worker_id, shard_id, epoch,
                 seen[0] or "nobody")

    def acquire_many(self, seen: dict[str, LeaseState]) -> dict[str, int | None]:
        """:meth:`acquire` for each shard of ``seen``, the takes sent to ZooKeeper at once and their answers
        collected after (one round trip, not one per lease). A take that got no answer (the connection lost
        meanwhile) or found the leases' node gone is made again on its own with :meth:`acquire`, as a lost reply
        always is. Returns each shard's new epoch, or None when someone else changed its lease first."""
        if len(seen) < 2 or not self.session.connected:
            return {shard_id: self.acquire(shard_id, state) for shard_id, state in seen.items()}
        takes = {shard_id: self._take(shard_id, state) for shard_id, state in seen.items()}
        answers = self.session.pipelined_commits({shard_id: self._build(op, node, *args)
                                                  for shard_id, (_, op, node, args) in takes.items()})
        out: dict[str, int | None] = {}
        for shard_id, answer in answers.items():
            if isinstance(answer, list) and not any(isinstance(r, Exception) for r in answer):
                epoch = 0 if takes[shard_id][1] == "create" else answer[0].version
                self._taken(shard_id, seen[shard_id], epoch)
                out[shard_id] = epoch
            elif isinstance(answer, list) and isinstance(answer[0], (BadVersionError, NodeExistsError, NoNodeError)):
                self._seen = {}  # moved on: the next round reads the leases again
                out[shard_id] = None
            else:  # no answer, or the generation node missing: on its own, bounded and retried
                out[shard_id] = self.acquire(shard_id, seen[shard_id])
        return out

    def release(self, shard_id: str, epoch: int | None = None) -> bool:
        """Give the lease of ``shard_id`` back (owner none, a new epoch) if it is still at ``epoch``: by default the
        epoch this worker holds it at; a round passes the epoch it read for a lease that names this worker without
        being held (a take whose reply was lost). Returns False when there is nothing to give back.

        The lease is forgotten (no longer held, its fence removed) only once the write succeeded, or once it is
        found to have moved past ``epoch`` (given back already by a write whose reply was lost, or taken by another
        worker). When the write fails (ZooKeeper unreachable past the operation deadline) the ``CheckpointError``
        is raised and the lease stays held and fenced: a later round gives it back, or reads the shard again."""
        if epoch is None:
            with self._lock:
                epoch = self._held.get(shard_id)
            if epoch is None:
                return False
        node = self._node(shard_id)
        try:
            self._change(f"releasing {node}", "set_data", node, _lease_doc(None), epoch)
        except (BadVersionError, NoNodeError):
            self._seen = {}
            log.warning("lease of %s was past epoch %d when worker %s gave it back (given back by a write whose "
                        "reply was lost, or taken by another worker)", shard_id, epoch, self.worker_id)
            self.forget(shard_id)
            return False
        with self._lock:
            self._held.pop(shard_id, None)
        self.store.unfence(shard_id)
        log.info("worker %s released the lease of %s (epoch %d)", self.worker_id, shard_id, epoch)
        return True

    def delete(self, shard_id: str) -> None:
        """Delete the lease node of a shard that is gone for good (finished and past the stream's retention)."""
        node = self._node(shard_id)
        try:
            self._change(f"deleting {node}", "delete", node, -1)
        except (NoNodeError, BadVersionError):
            pass

    def still_held(self, shard_id: str) -> bool:
        """Whether this worker holds the lease of ``shard_id`` and ZooKeeper says so too (the lease names it at the
        held epoch). Who calls: the spout, on the checkpoint writer's thread, for a write refused with
        ``LeaseLost``: a refusal met at an earlier epoch can reach the spout after the lease was taken again, and
        must not drop the lease held now. (A refused check at epoch ``e`` means the version was past ``e``; versions
        only grow, so a lease read at the held epoch afterwards was refused at another one.) False when the read
        fails: the caller drops the shard, as for any refusal."""
        with self._lock:
            epoch = self._held.get(shard_id)
        if epoch is None:
            return False
        try:
            return self._read_nodes([shard_id])[shard_id] == (self.worker_id, epoch)
        except SpoutError:
            return False

    def forget(self, shard_id: str) -> None:
        """Drop a lease this worker lost (``LeaseLost``, a lost session) without writing to ZooKeeper."""
        with self._lock:
            self._held.pop(shard_id, None)
        self.store.unfence(shard_id, revoke=True)

    @property
    def held(self) -> dict[str, int]:
        """A copy of the shards this worker holds, with their epochs."""
        with self._lock:
            return dict(self._held)


def _lease_doc(owner: str | None) -> bytes:
    return json.dumps({"owner": owner, "updated_at": datetime.now(timezone.utc).isoformat()}).encode()


def _owner(data: bytes, node: str) -> str | None:
    try:
        doc: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        doc = None
    if not isinstance(doc, dict) or not (doc.get("owner") is None or isinstance(doc.get("owner"), str)):
        raise LeaseError(f"lease znode {node} is not a lease ({data[:60]!r}); was the path used by something else? "
                         f"Delete the node to let the workers re-create it")
    owner: str | None = doc.get("owner")
    return owner
