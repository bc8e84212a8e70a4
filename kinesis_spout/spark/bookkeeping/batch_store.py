"""Where Spark's side keeps its batch bookkeeping, next to the app's checkpoints of the stream.

- **Batch ids** (``SpoutPipeline``): ``{prefix}/{app}/{stream}/batch_id`` holds the last batch id taken, as
  decimal text. Ids only increase (compare-and-set), so two pipelines never share one.
- **Batch ends** (``readMode=executors``, see :mod:`kinesis_spout.spark.source.executor_batches`):
  ``{prefix}/{app}/{stream}/batches/{query}/{batch}/{shard_id}`` holds the end an executor task recorded (first
  writer wins); the ``batches/{query}`` node's modification time is the query's heartbeat.

:class:`ZooKeeperBatchStore` works on a :class:`~kinesis_spout.zookeeper.session.ZooKeeperSession` it does not own
(the checkpoint store's, or one per executor process); :class:`MemoryBatchStore` keeps the same in memory, for
tests and for pipelines on a memory checkpoint store. :func:`batch_store_for` picks the one that goes with a
checkpoint store.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from kinesis_spout.checkpoint.base import ZooKeeperHome, zookeeper_home
from kinesis_spout.checkpoint.memory import MemoryCheckpointStore
from kinesis_spout.checkpoint.zookeeper import CAS_ATTEMPTS, TryAgain, compare_and_set, retry_compare_and_set
from kinesis_spout.errors import CheckpointError
from kinesis_spout.spark.bookkeeping.batch_store_memory import MemoryBatchStore
from kinesis_spout.zookeeper.errors import NodeExistsError, NoNodeError, RolledBackError
from kinesis_spout.zookeeper.session import ZooKeeperSession

log = logging.getLogger(__name__)

__all__ = ["BatchIds", "BatchStore", "MemoryBatchStore", "ZooKeeperBatchStore", "batch_store_for"]


@runtime_checkable
class BatchIds(Protocol):
    """A pipeline's batch ids. Who calls: ``SpoutPipeline``'s run thread, its checkpoint store open."""

    def load_batch_id(self) -> int:
        """The last batch id (txid) a pipeline stored; 0 when none was stored."""
        ...

    def save_batch_id(self, batch_id: int) -> None:
        """Take a pipeline's next batch id: an id at or below the stored one is taken already
        (``CheckpointConflict``), so ids only increase and two pipelines never share one."""
        ...


class BatchStore(BatchIds, Protocol):
    """Batch ids plus the batch ends and heartbeats of executor reads. Who calls: the driver's planner (ends,
    heartbeats, clean-ups) and executor tasks (``batch_end``, ``record_batch_end``)."""

    def batches_node(self, query: str) -> str: ...

    def batch_end(self, query: str, batch: int, shard_id: str) -> bytes | None: ...

    def record_batch_end(self, query: str, batch: int, shard_id: str, payload: bytes) -> bytes: ...

    def batch_ends(self, query: str, batch: int, shards: Sequence[str] | None = None) -> dict[str, bytes]: ...

    def open_batch(self, query: str, batch: int) -> None: ...

    def delete_batches(self, query: str, below: int) -> int: ...

    def delete_ends(self, query: str, ends: Mapping[int, Sequence[str]]) -> bool: ...

    def touch_query(self, query: str, payload: bytes) -> float: ...

    def query_heartbeats(self) -> dict[str, tuple[float, int]]: ...

    def delete_query(self, query: str, version: int, per_transaction: int = 500) -> bool: ...


_memory_stores: "weakref.WeakKeyDictionary[MemoryCheckpointStore, MemoryBatchStore]" = weakref.WeakKeyDictionary()
_memory_lock = threading.Lock()


def batch_store_for(checkpoints: Any) -> BatchIds:
    """The batch store that goes with a checkpoint store: on the session of a store in ZooKeeper (one that declares
    a ``zookeeper_home``, as the ZooKeeper store does; no I/O here); the store itself when it keeps batch ids of its
    own (a user's store); else one memory batch store per checkpoint store, which lasts as long as it does
    (pipelines sharing a memory store see one batch id sequence)."""
    home = zookeeper_home(checkpoints)
    if home is not None:
        return ZooKeeperBatchStore(home.session, home.base_path)
    if isinstance(checkpoints, BatchIds):
        return checkpoints
    with _memory_lock:
        store = _memory_stores.get(checkpoints)
        if store is None:
            store = MemoryBatchStore(checkpoints if isinstance(checkpoints, MemoryCheckpointStore) else None)
            _memory_stores[checkpoints] = store
        return store


def _parse_batch_id(data: bytes, node: str) -> int:
    text = data.decode("utf-8", "replace").strip()
    if not text.isdigit():
        raise CheckpointError(f"unreadable batch id at ZooKeeper node {node}: {text[:40]!r} is not a whole number; "
                              f"fix or delete the node")
    return int(text)


class ZooKeeperBatchStore:
    """Batch ids, batch ends and query heartbeats under ``base`` (``{prefix}/{app}/{stream}``), on ``session``
    (started by its owner; this store never starts or closes it). No state of its own: thread-safe as the
    session is."""

    def __init__(self, session: ZooKeeperSession, base: str) -> None:
        self.session = session
        self.base = base.rstrip("/")

    @classmethod
    def on_store(cls, checkpoints: ZooKeeperHome) -> "ZooKeeperBatchStore":
        """The batch store next to ``checkpoints`` (a store in ZooKeeper), on its session."""
        return cls(checkpoints.session, checkpoints.base_path)

    # -- batch ids (SpoutPipeline) --------------------------------------------------------------------------------
    @property
    def batch_id_node(self) -> str:
        """``{prefix}/{app}/{stream}/batch_id``: a pipeline's last batch id, next to its checkpoints."""
        return f"{self.base}/batch_id"

    def load_batch_id(self) -> int:
        node = self.batch_id_node
        try:
            data, _ = self.session.get(node)
        except NoNodeError:
            return 0
        return _parse_batch_id(data, node)

    def save_batch_id(self, batch_id: int) -> None:
        """Take ``batch_id`` for one batch: compare-and-set like a checkpoint's save, and an id at or below the
        stored one raises ``CheckpointConflict`` (it was taken: by another pipeline on the same app and stream, or
        by this one already), so two pipelines never use one id."""
        node = self.batch_id_node

        def refuse(data: bytes) -> str | None:
            stored = _parse_batch_id(data, node)
            return f"batch id at {node} is {stored}; {batch_id} is taken" if batch_id <= stored else None

        compare_and_set(self.session, node, str(batch_id).encode(), refuse, "batch id")

    # -- batch ends of executor reads -----------------------------------------------------------------------------
    def batches_node(self, query: str) -> str:
        """``{prefix}/{app}/{stream}/batches/{query}``: the ends executor tasks recorded for one query's batches."""
        return f"{self.base}/batches/{query}"

    def batch_end(self, query: str, batch: int, shard_id: str) -> bytes | None:
        """The end recorded for ``(batch, shard)``, or None when no task recorded one yet."""
        try:
            data, _ = self.session.get(f"{self.batches_node(query)}/{batch}/{shard_id}")
        except NoNodeError:
            return None
        return bytes(data)

    def record_batch_end(self, query: str, batch: int, shard_id: str, payload: bytes) -> bytes:
        """Record ``payload`` as the end of ``(batch, shard)`` unless a task recorded one first (create, never
        overwrite); returns the end that stands: ``payload`` or the first writer's."""
        node = f"{self.batches_node(query)}/{batch}/{shard_id}"
        try:
            try:
                self.session.create(node, payload)
            except NoNodeError:  # the batch's node is not there (open_batch failed, or an older driver planned it)
                self.session.create(node, payload, makepath=True)
            return payload
        except NodeExistsError:
            pass
        try:
            data, _ = self.session.get(node)
        except NoNodeError as exc:  # created and deleted at once: only a cleanup far ahead of this batch does that
            raise CheckpointError(f"batch end {node} vanished right after it was written; was the batch cleaned "
                                  f"up by a query that is further on?", retriable=False) from exc
        return bytes(data)

    def open_batch(self, query: str, batch: int) -> None:
        """Create ``batch``'s node (and its query's), so that each of its tasks records its end with one request.
        Who calls: the driver, before the batch's tasks run; a batch whose node exists (a replay) is left as it is.
        A failure is logged: the tasks then make the node themselves."""
        node = f"{self.batches_node(query)}/{batch}"
        try:
            self.session.create(node, makepath=True)
        except NodeExistsError:
            pass
        except CheckpointError as exc:
            log.info("could not create %s ahead of its tasks (they create it): %s", node, exc)

    def batch_ends(self, query: str, batch: int, shards: Sequence[str] | None = None) -> dict[str, bytes]:
        """The ends recorded for ``batch`` (shard id -> payload): of ``shards`` (pipelined reads of their nodes),
        or of every shard that recorded one (a listing first)."""
        node = f"{self.batches_node(query)}/{batch}"
        if shards is None:
            try:
                shards = self.session.get_children(node)
            except NoNodeError:
                return {}
        answers = self.session.pipelined("get", [f"{node}/{s}" for s in shards])
        out: dict[str, bytes] = {}
        for shard_id in shards:
            answer = answers[f"{node}/{shard_id}"]
            if isinstance(answer, NoNodeError):
                continue
            if isinstance(answer, BaseException):  # a read that failed in the pipeline is made again, bounded
                data = self.batch_end(query, batch, shard_id)
                if data is None:
                    continue
            else:
                data = answer[0]
            out[shard_id] = bytes(data)
        return out

    def delete_batches(self, query: str, below: int) -> int:
        """Delete the recorded ends of ``query``'s batches numbered below ``below``; returns how many batches."""
        base = self.batches_node(query)
        try:
            batches = self.session.get_children(base)
        except NoNodeError:
            return 0
        deleted = 0
        for name in sorted((b for b in batches if b.isdigit() and int(b) < below), key=int):
            node = f"{base}/{name}"
            try:
                for shard_id in self.session.get_children(node):
                    try:
                        self.session.delete(f"{node}/{shard_id}")
                    except NoNodeError:
                        pass
                self.session.delete(node)
                deleted += 1
            except (NoNodeError, CheckpointError):
                continue  # deleted meanwhile, a straggling task recorded an end since, or ZooKeeper is slow: the
                # next cleanup tries again
        return deleted

    def delete_ends(self, query: str, ends: Mapping[int, Sequence[str]], per_transaction: int = 500) -> bool:
        """Delete the recorded ends ``ends`` (batch -> the shards that recorded one) and their batches' nodes by
        name, in transactions of at most ``per_transaction`` deletes (one request each: no listing). True when every
        transaction was applied; False when one was not (a node was not there, or a straggling task recorded
        another end since): the caller then deletes by listing (:meth:`delete_batches`). Who calls: the driver's
        planner, with the ends it read when it planned the batches after them."""
        base = self.batches_node(query)
        doomed: list[str] = []
        for batch in sorted(ends):
            doomed += [f"{base}/{batch}/{s}" for s in sorted(ends[batch])] + [f"{base}/{batch}"]
        for start in range(0, len(doomed), per_transaction):
            chunk = doomed[start:start + per_transaction]

            def build(txn: Any, chunk: list[str] = chunk) -> None:
                for node in chunk:
                    txn.delete(node)

            try:
                results = self.session.commit(f"deleting {len(chunk)} batch ends of {base}", build)
            except CheckpointError as exc:
                log.info("batch ends of %s were left for the next clean-up: %s", base, exc)
                return False
            if any(isinstance(r, Exception) for r in results):
                return False
        return True

    def touch_query(self, query: str, payload: bytes) -> float:
        """Write ``payload`` to ``query``'s batches node (creating it): its modification time is the query's
        heartbeat. Returns that time by ZooKeeper's clock (seconds since the epoch), so callers compare heartbeats
        without trusting their own clock. Tried again at once when the node came or went meanwhile, up to
        ``CAS_ATTEMPTS`` times (:func:`~kinesis_spout.checkpoint.zookeeper.retry_compare_and_set`)."""
        node = self.batches_node(query)

        def attempt() -> float:
            try:
                stat = self.session.set(node, payload)
                return float(stat.mtime) / 1000.0
            except NoNodeError:
                pass
            try:
                self.session.create(node, payload, makepath=True)
            except NodeExistsError:
                raise TryAgain from None
            stat = self.session.exists(node)
            if stat is None:
                raise TryAgain
            return float(stat.mtime) / 1000.0

        return retry_compare_and_set(attempt, f"heartbeat of {node}: gave up after {CAS_ATTEMPTS} attempts")

    def query_heartbeats(self) -> dict[str, tuple[float, int]]:
        """Every query with a batches node: query id -> (its last heartbeat by ZooKeeper's clock in seconds, the
        node's version), from one listing and pipelined reads of the nodes' stats."""
        base = f"{self.base}/batches"
        try:
            queries = self.session.get_children(base)
        except NoNodeError:
            return {}
        answers = self.session.pipelined("exists", [f"{base}/{q}" for q in queries])
        out: dict[str, tuple[float, int]] = {}
        for query in queries:
            stat = answers[f"{base}/{query}"]
            if isinstance(stat, BaseException):  # a read that failed in the pipeline is made again, bounded
                stat = self.session.exists(f"{base}/{query}")
            if stat is not None:
                out[query] = (float(stat.mtime) / 1000.0, int(stat.version))
        return out

    def delete_query(self, query: str, version: int, per_transaction: int = 500) -> bool:
        """Delete ``query``'s whole batches tree, but only while its node is still at ``version`` (no heartbeat
        since the caller judged it): every ZooKeeper transaction of the deletion (``per_transaction`` deletes at
        most: one request, within the server's 1 MiB limit) checks that version, so a query that beats meanwhile
        loses nothing. Returns True when the tree is gone, False when it was left (it beat, or a task recorded an
        end meanwhile: the next clean-up judges it again)."""
        root = self.batches_node(query)
        try:
            batches = self.session.get_children(root)
        except NoNodeError:
            return True
        listings = self.session.pipelined("get_children", [f"{root}/{b}" for b in batches])
        doomed: list[str] = []
        for batch in batches:
            shards = listings[f"{root}/{batch}"]
            if isinstance(shards, NoNodeError):
                continue
            if isinstance(shards, BaseException):  # a listing that failed in the pipeline is made again, bounded
                try:
                    shards = self.session.get_children(f"{root}/{batch}")
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
        def build(txn: Any) -> None:
            if delete_root:
                txn.delete(root, version)
            else:
                txn.check(root, version)
            for node in nodes:
                txn.delete(node)

        results = self.session.commit(f"deleting {len(nodes) + delete_root} nodes of {root}", build)
        failures = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if not failures:
            return True
        if delete_root and len(failures) == 1 and isinstance(failures[0], NoNodeError):
            return True  # deleted meanwhile (by another query's clean-up)
        log.info("batch ends of query at %s were left: %s", root, ", ".join(type(f).__name__ for f in failures))
        return False
