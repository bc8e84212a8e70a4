"""Opening a spout: the parts :meth:`KinesisSpout.open() <kinesis_spout.spout.facade.KinesisSpout.open>` builds and
starts.

Who calls: the facade's ``open()`` only, on its caller's thread, holding the registry's lock. :func:`wire` builds
the parts into a :class:`SpoutParts` the facade made and copies back whether wiring succeeded or not: what was built
before a failure (the Kinesis client, the checkpoint store, the unstarted checkpoint writer and shard sync) stays the
spout's, so a later ``open()`` reuses the client and the store and ``close()`` sees the rest. :func:`start` then
starts the threads (the writer, the dead-letter worker, the readers, the shard sync), once the facade holds the
parts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable

from kinesis_spout.checkpoint.base import CheckpointStore, zookeeper_home
from kinesis_spout.checkpoint.writer import CheckpointWriter
from kinesis_spout.config import SpoutConfig
from kinesis_spout.coordination.sync import ShardSync
from kinesis_spout.deadletters.worker import DeadLetterWorker
from kinesis_spout.errors import SpoutError
from kinesis_spout.kinesis.client import kinesis_client
from kinesis_spout.kinesis.retrieval.consumers import ensure_consumer
from kinesis_spout.kinesis.shards import Shard, owned_shards
from kinesis_spout.spout.caught_up import TIP_MARGIN
from kinesis_spout.spout.dead_letters import DeadLetterGlue, poison_hold_s
from kinesis_spout.spout.membership import LEASE_ROUND_S, LeaseMembership
from kinesis_spout.spout.registry import ShardRegistry
from kinesis_spout.spout.starting import ShardStarter

__all__ = ["SpoutParts", "start", "wire"]

log = logging.getLogger(__name__)


@dataclass
class SpoutParts:
    """What ``open()`` builds. ``client`` and ``store`` come in as the spout holds them (None: made here);
    ``writer``, ``sync`` and ``owned_at_open`` (static mode: the shards the spout owned at ``open()``, each with
    whether it was closed then) are made by :func:`wire`. Touched only by the thread in ``open()``."""

    client: Any
    store: CheckpointStore | None
    writer: CheckpointWriter | None = None
    sync: ShardSync | None = None
    owned_at_open: dict[str, bool] | None = None


def statically_owned(cfg: SpoutConfig, listed: list[Shard]) -> list[Shard]:
    """The shards of the listing a spout reads without leases (Storm-style static split by ``task_index`` and
    ``task_count``)."""
    return owned_shards(listed, cfg.worker.task_index, cfg.worker.task_count)


def fanout_consumer(cfg: SpoutConfig, client: Any) -> str | None:
    """With ``retrieval="fanout"``: the ARN of the app's enhanced fan-out consumer (``consumer_name``, else
    ``app_name``), registered or found and ACTIVE; None when the spout polls."""
    if cfg.reading.retrieval != "fanout":
        return None
    name = cfg.reading.consumer_name or cfg.app_name
    consumer = ensure_consumer(client, cfg.stream_name, name)
    log.info("stream %r is read through enhanced fan-out consumer %s (%s)", cfg.stream_name, name, consumer.arn)
    return consumer.arn


def coordination_mode(cfg: SpoutConfig, store: CheckpointStore) -> str:
    """``"leases"`` or ``"static"``: the configured coordination, ``"auto"`` decided by the store (leases when it is
    in ZooKeeper, where the workers meet: one that declares a ``zookeeper_home``)."""
    return cfg.worker.mode(zookeeper_store=zookeeper_home(store) is not None)


def wire(parts: SpoutParts, cfg: SpoutConfig, registry: ShardRegistry, membership: LeaseMembership, *,
         flush: Callable[[float], bool], on_sync_error: Callable[[SpoutError], None]) -> None:
    """Make the client and the store when missing, open the store, make the checkpoint writer and the shard sync
    (joining the leases with ``coordination="leases"``), and add the shards ready now to ``registry``. Fills
    ``parts`` as it goes. When a step after the store's ``open()`` fails, the store is closed and the error raised;
    nothing is started."""
    if parts.client is None:
        parts.client = kinesis_client(cfg.kinesis)
    if parts.store is None:
        from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore

        parts.store = ZooKeeperCheckpointStore.from_config(cfg)
    store = parts.store
    store.open()
    try:
        parts.writer = registry.writer = CheckpointWriter(
            store, cfg.checkpoint_interval_s, cfg.worker_id, deadline_s=cfg.zookeeper_deadline_s,
            on_conflict=membership.on_writer_conflict)
        owns: Callable[[list[Shard]], list[Shard]] = partial(statically_owned, cfg)
        if coordination_mode(cfg, store) == "leases":
            owns = membership.join(store)
        else:
            membership.refuse_beside_lease_workers(store)
        leases = membership.leases
        starter = ShardStarter(registry, cfg.stream_name, cfg.reading, cfg.tracking, cfg.worker.worker_id,
                               parts.client, store, consumer_arn=fanout_consumer(cfg, parts.client),
                               tip_cutoff=datetime.now(timezone.utc) + TIP_MARGIN)
        sync = parts.sync = ShardSync(parts.client, cfg.stream_name, store, interval_s=cfg.shard_sync_interval_s,
                                      owns=owns, known=registry.known, add=starter.add, flush=flush,
                                      on_error=on_sync_error, round_s=LEASE_ROUND_S if leases is not None else None,
                                      forget=leases.delete if leases is not None else None,
                                      initial_position=cfg.initial_position,
                                      initial_timestamp=cfg.initial_timestamp, owner=cfg.worker_id)
        registry.on_finished = sync.wake  # a finished shard's children may be read now
        ready = sync.sync()
        if leases is None:
            parts.owned_at_open = {s.shard_id: s.closed for s in statically_owned(cfg, sync.listed)}
        starter.add(ready, sync.take_fresh_pins())
    except BaseException:
        store.close()
        raise


def start(parts: SpoutParts, cfg: SpoutConfig, registry: ShardRegistry, membership: LeaseMembership,
          dead: DeadLetterGlue, dead_letter_writer: Any) -> None:
    """Start what :func:`wire` built: the checkpoint writer, a dead-letter worker on ``dead_letter_writer``, each
    shard's reading, then (the registry now open) the shard sync and the watch of the lease workers; logs what the
    spout reads."""
    writer, sync = parts.writer, parts.sync
    assert writer is not None and sync is not None, "start() follows a wire() that succeeded"
    writer.start()
    dead.worker = DeadLetterWorker(dead_letter_writer, dead.on_written, deadline_s=cfg.dead_letters.deadline_s,
                                   hold_s=poison_hold_s(cfg.tracking))
    dead.worker.start()
    for state in registry.shards.values():
        state.start_reading()
    registry.phase = "open"
    sync.start()
    leases = membership.leases
    if leases is not None:
        leases.watch_workers(sync.wake)
    reading = ", ".join(f"{s.shard_id} {s.start.describe()}" for s in registry.shards.values()) or "none yet"
    if leases is not None:
        log.info("spout %s opened stream %r as worker %s, sharing its %d shards with the app's other workers "
                 "through ZooKeeper leases (coordination=%r); reading %s", cfg.app_name, cfg.stream_name,
                 cfg.worker_id, len(sync.listed), cfg.coordination, reading)
        return
    mine = statically_owned(cfg, sync.listed)
    log.info("spout %s opened stream %r: task %d/%d owns %d of %d shards%s", cfg.app_name, cfg.stream_name,
             cfg.task_index, cfg.task_count, len(mine), len(sync.listed), static_reading(registry, sync, mine))


def static_reading(registry: ShardRegistry, sync: ShardSync, mine: list[Shard]) -> str:
    """The end of a static spout's open line: the shards it reads (with their starts), those of its shards that
    wait for a parent to be read to its end (with those parents), or that it owns none."""
    if not mine:
        return ": nothing to read (a task reads the shards whose number modulo task_count is its task_index)"
    reading = ", ".join(f"{s.shard_id} {s.start.describe()}" for s in registry.shards.values())
    waiting = ", ".join(f"{shard_id} (after {' and '.join(sync.waiting[shard_id])})"
                        for shard_id in sorted({s.shard_id for s in mine} & set(sync.waiting)))
    parts = ([f"reading {reading}"] if reading else []) + ([f"waiting for their parents: {waiting}"]
                                                          if waiting else [])
    return "; " + "; ".join(parts) if parts else ""
