"""Lease membership: how a spout with ``coordination="leases"`` joins its app's workers in ZooKeeper, pauses while
ZooKeeper is away, hands shards back (draining them first) and drops the shards whose leases it lost.

:class:`LeaseMembership` keeps no shard state of its own: it moves the shards' lifecycles (under the registry's
lock) and talks to :class:`~kinesis_spout.coordination.leases.ZooKeeperLeases`. Its callbacks run on other threads:
the shard sync thread (the lease rounds: :meth:`hand_back`, :meth:`drop`, :meth:`drop_all`), kazoo's thread
(:meth:`on_zookeeper_state`: one assignment, no lock) and the checkpoint writer's thread (:meth:`on_writer_conflict`).
In static mode (``leases`` None) only :meth:`on_writer_conflict` and :meth:`refuse_beside_lease_workers` act.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from kinesis_spout.checkpoint.base import zookeeper_home
from kinesis_spout.errors import CheckpointConflict, ConfigError, LeaseLost, SpoutError
from kinesis_spout.spout.shards import ShardLifecycle, ShardPhase

if TYPE_CHECKING:
    from kinesis_spout.checkpoint.base import CheckpointStore
    from kinesis_spout.coordination.leases import ZooKeeperLeases
    from kinesis_spout.coordination.rebalance import HandBack
    from kinesis_spout.kinesis.shards import Shard
    from kinesis_spout.spout.registry import ShardRegistry

__all__ = ["HANDOFF_FLUSH_S", "HANDOFF_TIMEOUT_S", "LEASE_ROUND_S", "LeaseMembership"]

log = logging.getLogger(__name__)

LEASE_ROUND_S = 1.0  # how often a worker with leases looks at the workers and leases (and at once when one joins)
HANDOFF_TIMEOUT_S = 10.0  # how long a lease given back waits for the shard's in-flight records
HANDOFF_FLUSH_S = 10.0  # how long a hand-over waits for the shard's checkpoint to be written (else: a later round)


class LeaseMembership:
    """This worker's place among its app's workers. ``leases`` is set by :meth:`join` (leases mode), ``store`` by
    :meth:`join` too; ``on_conflict`` is the user's checkpoint-conflict handler. The worker ``worker_id`` reads
    ``stream_name`` for ``app_name``; ``session_timeout_s`` (ZooKeeper's) bounds how long it keeps its shards while
    ZooKeeper is away, ``message_timeout_s`` (tracking's) how long a hand-over waits for records in flight,
    ``settle_s`` (the worker's ``lease_settle_s``) how long the live workers must stay unchanged before this worker,
    holding no lease, takes any."""

    def __init__(self, registry: ShardRegistry, stream_name: str, app_name: str, worker_id: str, *,
                 session_timeout_s: float, message_timeout_s: float | None, settle_s: float = 2.0,
                 on_conflict: Callable[[CheckpointConflict], None] | None = None) -> None:
        self.registry = registry
        self.stream_name, self.app_name, self.worker_id = stream_name, app_name, worker_id
        self.session_timeout_s, self.message_timeout_s = session_timeout_s, message_timeout_s
        self.settle_s = settle_s
        self.on_conflict = on_conflict
        self.leases: ZooKeeperLeases | None = None
        self.store: Any = None
        self._disconnected_since: float | None = None  # when ZooKeeper's connection was last lost

    @property
    def active(self) -> bool:
        return self.leases is not None

    def join(self, store: CheckpointStore) -> Callable[[list[Shard]], list[Shard]]:
        """Leases mode (in ``open()``): register this worker in ZooKeeper and return the lease round that decides
        which shards it reads. The store must declare a ``zookeeper_home`` (the ZooKeeper store does)."""
        from kinesis_spout.coordination.leases import ZooKeeperLeases
        from kinesis_spout.coordination.rebalance import LeaseBalancer

        home = zookeeper_home(store)
        if home is None:
            raise ConfigError("coordination 'leases' needs the ZooKeeper checkpoint store (the workers meet there); "
                              f"got {type(store).__name__}: use coordination='static' with it")
        self.store = store
        self.leases = ZooKeeperLeases(home, self.worker_id)
        self.leases.join()
        home.add_listener(self.on_zookeeper_state)
        return LeaseBalancer(self.leases, hand_back=self.hand_back, drop_all=self.drop_all, drop=self.drop,
                             settle_s=self.settle_s).owns

    def refuse_beside_lease_workers(self, store: CheckpointStore) -> None:
        """Static mode (in ``open()``): refuse to read an app's stream while workers share it through leases: both
        would read the same shards, and the static spout's unfenced checkpoints would fight theirs."""
        from kinesis_spout.coordination.leases import ZooKeeperLeases

        home = zookeeper_home(store)
        if home is None:
            return
        live = ZooKeeperLeases(home, self.worker_id).workers()
        if live:
            raise ConfigError(f"app {self.app_name!r} reads stream {self.stream_name!r} with leases "
                              f"(live workers: {', '.join(live)}), but this spout has coordination='static': both "
                              f"would read the same shards. Use coordination='leases', or another app_name")

    def on_zookeeper_state(self, state: str) -> None:
        """Note when the connection went away (kazoo's thread; no lock taken, one assignment)."""
        self._disconnected_since = None if state == "CONNECTED" else (self._disconnected_since or time.monotonic())

    def paused(self) -> bool:
        """Lock held: True while ZooKeeper is unreachable (leases mode), so no record is emitted from a shard whose
        lease may have moved on. Once it has been unreachable for the session timeout, the session is surely gone
        and other workers may own the shards: they are dropped (nothing more is emitted or written for them)."""
        since = self._disconnected_since
        if self.leases is None or since is None:
            return False
        if time.monotonic() - since >= self.session_timeout_s and self.registry.shards:
            log.warning("ZooKeeper unreachable for %.0f s (the session timeout): dropping this worker's %d shards",
                        time.monotonic() - since, len(self.registry.shards))
            self.drop_all()
        return True

    def hand_back(self, shard_ids: list[str]) -> dict[str, HandBack]:
        """Leases (shard sync thread): drain the shards (no new records), wait up to ``HANDOFF_TIMEOUT_S`` for
        their records in flight (dead letters pending included; one wait for them all), forget them and write
        their checkpoints. Says, per shard, ``stored`` when its checkpoint is stored: only then does the caller
        release the lease, and the next owner resumes after that checkpoint without replays (records still in
        flight after the wait are replayed). ``kept`` when it could not be written: the lease is kept and a later
        round calls again; the shard is no longer read, so that call only waits (a round's time) for the shard's
        pending checkpoint. ``lost`` when the shard was dropped during the wait (its lease was lost: the writer met
        ``LeaseLost``): there is nothing to give back.

        Only the wait for the records in flight holds the lock (and releases it while waiting); the checkpoints are
        waited for without it, since the writer's thread takes it to make a shard's checkpoint."""
        registry = self.registry
        with registry.lock:
            states = {s: registry.shards[s] for s in shard_ids if s in registry.shards}
            self._settle(list(states.values()))
            lost = {s for s, state in states.items() if state.phase is ShardPhase.DROPPED}
            for shard_id, state in states.items():
                if shard_id not in lost:
                    if state.checkpoint_unoffered():  # else the writer has it (a failure is retried)
                        registry.offer_checkpoint(state)
                    state.hand_back()
                    del registry.shards[shard_id]
        for shard_id in sorted(lost):  # drop() took it out of the round-robin; its reader is ours to close
            states[shard_id].reader.close()
            log.warning("hand-over of %s ended: its lease was lost while it waited for its records in flight (the "
                        "next owner reads them again)", shard_id)
        assert registry.writer is not None
        flushed = [s for s in shard_ids if s not in lost]
        stored = registry.writer.flush_shards(flushed, HANDOFF_FLUSH_S if states else LEASE_ROUND_S)
        for shard_id, state in states.items():
            if shard_id not in lost:
                state.reader.close()
        return {s: "lost" if s in lost else "stored" if s in stored else "kept" for s in shard_ids}

    def _settle(self, states: list[ShardLifecycle]) -> None:
        """Drain the shards being handed over and wait (lock held, released while waiting) for their records in
        flight, within one hand-over's bound for them all. A shard dropped meanwhile (its lease was lost) ends up
        DROPPED."""
        registry = self.registry
        for state in states:
            if state.phase is ShardPhase.READING:
                state.drain(registry.rr)
        if not states:
            return
        wait_s = min(HANDOFF_TIMEOUT_S, self.message_timeout_s or HANDOFF_TIMEOUT_S)

        def waiting() -> list[ShardLifecycle]:
            return [s for s in states if s.phase is ShardPhase.DRAINING and s.tracker.inflight_count]

        for state in states:
            log.info("handing %s over to another worker: waiting up to %.0f s for its %d records in flight, then "
                     "writing its checkpoint and giving its lease back", state.shard_id, wait_s,
                     state.tracker.inflight_count)
        deadline = time.monotonic() + wait_s
        while registry.phase == "open" and (late := waiting()):
            left = deadline - time.monotonic()
            if left <= 0:
                for state in late:
                    log.warning("handing %s over with %d records still in flight: the next owner reads them again",
                                state.shard_id, state.tracker.inflight_count)
                break
            registry.wait_settled(min(left, 0.5))

    def give_back_leases(self) -> None:
        """At ``close()``, after the last checkpoints were written: release the leases and leave, so the next owners
        start at once. Without ZooKeeper this is skipped: the leases go with the session."""
        assert self.leases is not None
        try:
            for shard_id in self.leases.held:
                if not getattr(self.store, "connected", True):
                    log.warning("closing without ZooKeeper: the leases of %s go when the session times out",
                                ", ".join(self.leases.held))
                    return
                self.leases.release(shard_id)
            self.leases.leave()
        except SpoutError as exc:
            log.warning("could not give the leases back on close (they go when the session times out): %s", exc)

    def drop_all(self) -> None:
        """Stop reading every shard at once, writing nothing more for them (their leases are lost)."""
        with self.registry.lock:
            for shard_id in list(self.registry.shards):
                self.drop(shard_id, "this worker may have lost its ZooKeeper session")

    def drop(self, shard_id: str, why: str = "its lease was lost to another worker") -> None:
        """Stop reading one shard whose lease was lost, writing nothing more for it."""
        registry = self.registry
        with registry.lock:
            state = registry.shards.pop(shard_id, None)
            if state is not None:
                state.drop(registry.rr)
            if self.leases is not None:
                self.leases.forget(shard_id)
                registry.settled.notify_all()  # a hand-over waiting for this shard's records ends
        if state is not None:
            log.warning("shard %s dropped: %s", shard_id, why)

    def on_writer_conflict(self, conflict: CheckpointConflict) -> None:
        """The checkpoint writer's conflicts (its thread): a lost lease drops its shard, unless the refusal was met
        at an earlier epoch and the worker holds the lease again now (ZooKeeper is asked); all go to the user's
        handler too."""
        if isinstance(conflict, LeaseLost):
            if self.leases is not None and self.leases.still_held(conflict.shard_id):
                log.warning("a checkpoint write of %s was refused at an earlier epoch of its lease; this worker holds "
                            "the lease again (epoch %s) and keeps reading the shard", conflict.shard_id,
                            self.leases.held.get(conflict.shard_id))
            else:
                self.drop(conflict.shard_id)
        if self.on_conflict is not None:
            self.on_conflict(conflict)
