"""Starting shards: resolving where each new shard starts and building its lifecycle (tracker, getter, reader).

:class:`ShardStarter` is made by ``open()`` once the Kinesis client and the checkpoint store exist; its
:meth:`ShardStarter.add` is called by ``open()`` and by the shard sync thread. The store reads happen without the
registry's lock; the new lifecycles are installed under it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any, Mapping

from kinesis_spout.coordination.lineage import ShardStart
from kinesis_spout.coordination.starts import resolve_starts
from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.retrieval.factory import shard_retrieval
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
from kinesis_spout.kinesis.shards import Shard, drop_range
from kinesis_spout.positions import LATEST, Position
from kinesis_spout.spout.shards import ShardLifecycle
from kinesis_spout.tracking.spans import SpanTracker

if TYPE_CHECKING:
    from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore
    from kinesis_spout.config import ReadingSettings, TrackingSettings
    from kinesis_spout.spout.registry import ShardRegistry

__all__ = ["ShardStarter"]

log = logging.getLogger(__name__)


class ShardStarter:
    """Adds shards of ``stream_name`` to a registry: ``client`` is the Kinesis client, ``store`` the checkpoint store
    (both opened); ``reading`` makes each shard's getter and reader, ``tracking`` its tracker, ``owner`` (the worker
    id) stamps the starts it pins. Made by the spout's ``open()``."""

    def __init__(self, registry: ShardRegistry, stream_name: str, reading: ReadingSettings,
                 tracking: TrackingSettings, owner: str, client: Any, store: CheckpointStore,
                 consumer_arn: str | None = None, tip_cutoff: datetime | None = None) -> None:
        self.registry = registry
        self.stream_name = stream_name
        self.reading = reading
        self.tracking = tracking
        self.owner = owner
        self.client = client
        self.store = store
        self.consumer_arn = consumer_arn  # retrieval="fanout": the registered consumer the shards subscribe as
        self.tip_cutoff = tip_cutoff  # records that arrived later are past the tip the readers look for

    def add(self, shards: list[Shard], fresh_pins: Mapping[str, datetime] | None = None) -> None:
        """Start reading ``shards``: their starts are resolved (store I/O, no lock held), then their lifecycles are
        installed under the lock and their readers started (unless the spout is still opening: ``open()`` starts
        them). ``fresh_pins``: the pins the app's first start wrote just now (from ``open()``)."""
        registry = self.registry
        states = []
        for shard, start, checkpoint, first in resolve_starts(self.store, self.reading, self.owner, shards,
                                                                      fresh_pins):
            if first is None:
                log.info("shard %s was finished earlier (shard_end); not reading it again", shard.shard_id)
                with registry.lock:
                    registry.done.add(shard.shard_id)
                continue
            states.append(self.make(shard, start, checkpoint, first))
        with registry.lock:
            if registry.phase == "closed":
                for state in states:
                    state.reader.close()
                return
            for state in states:
                registry.install(state)

    def make(self, shard: Shard, start: ShardStart, checkpoint: Checkpoint | None,
             first: Position) -> ShardLifecycle:
        """A new shard's lifecycle (STARTING): its tracker, getter and reader (the reader not started yet)."""
        reading, tracking = self.reading, self.tracking
        rr = self.registry.rr
        initial = checkpoint.key if checkpoint is not None else None
        tracker = SpanTracker(
            shard.shard_id, retry_limit=tracking.retry_limit, backoff=tracking.retry_backoff,
            message_timeout_s=tracking.message_timeout_s, checkpoint=initial)
        hash_range = drop_range(self.stream_name, shard.shard_id, shard, reading.drop_foreign_user_records)
        getter = shard_retrieval(self.client, self.stream_name, shard.shard_id, first, reading,
                                 consumer_arn=self.consumer_arn, hash_range=hash_range)
        if first == LATEST:  # LATEST is the tip when open() runs, not when the reader thread gets to it
            try:
                getter.prepare()
            except KinesisError as exc:
                if not exc.retriable:
                    raise
                log.warning("%s; the reader of %s takes its LATEST position when it can", exc, shard.shard_id)
        reader = BufferedShardReader(getter, max_records=reading.prefetch_records, max_bytes=reading.prefetch_bytes,
                                     empty_backoff_s=reading.empty_record_backoff_s, on_data=rr.notify,
                                     pool=rr.pool, max_empty_backoff_s=reading.max_empty_record_backoff_s)
        reader.tip_cutoff = self.tip_cutoff
        return ShardLifecycle(shard, tracker, reader, start, restored=checkpoint)
