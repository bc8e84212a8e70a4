"""What both stream readers plan with on the driver: clients, the owned shards, lineage, ZooKeeper checkpoints.

The driver-read reader (:mod:`kinesis_spout.spark.source.driver`) and the executor-read reader
(:mod:`kinesis_spout.spark.source.executor`) each own one :class:`QueryPlanning` and add their own planner to it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Generic, Mapping, TypeVar

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.checkpoint.throttle import CheckpointThrottle
from kinesis_spout.config import SpoutConfig
from kinesis_spout.coordination.listing import ListingSchedule
from kinesis_spout.errors import CheckpointError
from kinesis_spout.kinesis.retrieval.consumers import ensure_consumer
from kinesis_spout.kinesis.shards import HashKeyRange, Shard, drop_range, list_shards, owned_shards
from kinesis_spout.positions import Position
from kinesis_spout.spark.source.checkpoint_writes import CheckpointWriter
from kinesis_spout.spark.source.clients import DriverClients
from kinesis_spout.spark.source.offsets import (
    SourceLimits,
    as_checkpoint,
    initial_positions,
    lineage_checkpoint,
    parse_source_options,
)

__all__ = ["AVAILABLE_NOW_MARGIN", "IDLE_WAIT_S", "PlannedReader", "QueryPlanning", "default_read_limit", "read_budget"]

log = logging.getLogger(__name__)

#: How long an idle ``latestOffset`` waits for the next shard poll before telling Spark there is nothing new.
IDLE_WAIT_S = 0.5
#: Trigger.AvailableNow reads records that arrived up to this long after the run started (by Kinesis' clock):
#: an allowance for clock skew between this driver and Kinesis, so nothing present at the start is left out.
AVAILABLE_NOW_MARGIN = timedelta(seconds=2)


def default_read_limit(limits: SourceLimits) -> ReadLimit:
    """``maxRecordsPerTrigger`` as ReadMaxRows, else ``maxBytesPerTrigger`` as ReadMaxBytes (both apply when both
    are set, see :func:`read_budget`), else everything available."""
    if limits.max_records is not None:
        return ReadMaxRows(limits.max_records)
    if limits.max_bytes is not None:
        return ReadMaxBytes(limits.max_bytes)
    return ReadAllAvailable()


def read_budget(limit: ReadLimit, limits: SourceLimits) -> tuple[int | None, int | None]:
    """(most records, most bytes) of the next batch, for the ``limit`` Spark hands ``latestOffset``."""
    if isinstance(limit, ReadMaxRows):
        return limit.max_rows, limits.max_bytes
    if isinstance(limit, ReadMaxBytes):
        return limits.max_records, limit.max_bytes
    return None, None  # ReadAllAvailable (Trigger.Once, ...) ignores the configured limits


class QueryPlanning:
    """The driver side a stream reader shares with the other kind: its clients, the shard listing, where shards
    start (lineage), the ZooKeeper checkpoint writes and the Trigger.AvailableNow cutoff.

    Owned by Spark's planning thread: every method is called from it, so no lock. A reader unpickled on an
    executor gets a fresh one and never calls it there. ``close()`` releases the clients and is idempotent.
    """

    def __init__(self, config: SpoutConfig) -> None:
        self.config = config
        self.clients = DriverClients(config)
        #: Trigger.AvailableNow: read records that arrived up to this time (None: not an AvailableNow run).
        self.cutoff: datetime | None = None
        self._shards: dict[str, Shard] = {}
        self._listing = ListingSchedule(config.reading.shard_sync_interval_s)
        self._written: dict[str, str] = {}
        self._throttle = CheckpointThrottle(config.tracking.checkpoint_interval_s)
        self._consumer_arn: str | None = None
        self._writer = CheckpointWriter()

    # -- shards ---------------------------------------------------------------------------------------------------
    def list_shards(self, force: bool = False) -> dict[str, Shard]:
        """The owned shards, listed again every ``shardSyncIntervalS`` (or when ``force``, or after
        :meth:`relist`)."""
        now = time.monotonic()
        if force or self._listing.due(now):
            cfg = self.config
            mine = owned_shards(list_shards(self.clients.kinesis(), cfg.stream_name), cfg.worker.task_index,
                                cfg.worker.task_count)
            self._shards = {s.shard_id: s for s in mine}
            self._listing.listed(now)
        return self._shards

    def relist(self) -> None:
        """List the shards again at the next :meth:`list_shards` (a shard ended: look for its children)."""
        self._listing.relist()

    def hash_range(self, shard_id: str) -> HashKeyRange | None:
        """The shard's hash key range, from the listing, for its getters (None: no user record is dropped, with
        ``dropForeignUserRecords=false`` or for a shard no longer listed)."""
        drop = self.config.reading.drop_foreign_user_records
        return drop_range(self.config.stream_name, shard_id, self.list_shards().get(shard_id) if drop else None, drop)

    def consumer_arn(self) -> str:
        """``retrieval="fanout"``: the ARN of the app's stream consumer (``consumerName``, default ``appName``),
        registered (or found) and waited for until ACTIVE at the first call, then remembered."""
        if self._consumer_arn is None:
            cfg = self.config
            self._consumer_arn = ensure_consumer(self.clients.kinesis(), cfg.stream_name,
                                                 cfg.reading.consumer_name or cfg.app_name).arn
        return self._consumer_arn

    def start_available_now(self, margin: timedelta) -> None:
        """Trigger.AvailableNow starts: records that arrive later than ``margin`` from now are left for later."""
        self.cutoff = datetime.now(timezone.utc) + margin
        self.relist()

    # -- where shards start -----------------------------------------------------------------------------------------
    def initial_positions(self) -> dict[str, Position]:
        """Where a new query starts: each shard's ZooKeeper checkpoint, else by the lineage rule, else
        ``initialPosition``. Checkpoints read here count as written (they are not written back)."""
        shards = self.list_shards(force=True)
        stored = self.clients.checkpoints().list()
        positions = initial_positions({s: shard.parents for s, shard in shards.items()}, stored, self.config,
                                      {s for s, shard in shards.items() if shard.closed})
        for shard_id, checkpoint in stored.items():
            if shard_id in positions and (checkpoint.sequence_number is not None or checkpoint.shard_end):
                self._written[shard_id] = positions[shard_id].encode()
        return positions

    def new_shard_positions(self, shard_ids: list[str], positions: Mapping[str, Position]
                            ) -> dict[str, Position]:
        """Where shards new to this query start (children of a reshard, shards this task newly owns): by the
        lineage rule, from their ZooKeeper checkpoints, their parents in this query or in ZooKeeper, else the
        initial position. A shard whose checkpoint cannot be read now is left out of this round (never guessed)."""
        if not shard_ids:
            return {}
        parents = {s: self._shards[s].parents for s in shard_ids}
        stored: dict[str, Checkpoint] = {}
        for parent in {p for ps in parents.values() for p in ps}:
            if parent in positions:  # this query reads the parent: where it stands decides what it hands down
                stored[parent] = lineage_checkpoint(parent, positions[parent])
        out: dict[str, Position] = {}
        for shard_id in shard_ids:
            try:
                for wanted in (shard_id, *(p for p in parents[shard_id] if p not in stored)):
                    checkpoint = self.clients.checkpoints().load(wanted)
                    if checkpoint is not None:
                        stored[wanted] = checkpoint
            except CheckpointError as exc:
                log.warning("shard %s is new to this query but its checkpoint cannot be read (%s); it waits for the "
                            "next batch", shard_id, exc)
                continue
            out[shard_id] = initial_positions({shard_id: parents[shard_id]}, stored, self.config,
                                              first_start=False)[shard_id]
            log.info("shard %s is new to this query: it starts at %s", shard_id, out[shard_id].encode())
        return out

    # -- ZooKeeper checkpoints ------------------------------------------------------------------------------------
    def save(self, positions: Mapping[str, Position], force: bool) -> None:
        """Write positions that changed, at most once per ``checkpointIntervalS`` per shard unless ``force``.

        A checkpoint already ahead in ZooKeeper (another query, or the spout) is left alone; an unreachable
        ZooKeeper is logged and tried again at the next batch: Spark's checkpoint still holds the truth. Shards
        written before by this planning go in one transaction (:class:`CheckpointWriter`).
        """
        now = time.monotonic()
        due: list[Checkpoint] = []
        texts: dict[str, str] = {}
        for shard_id, pos in sorted(positions.items()):
            text = pos.encode()
            checkpoint = as_checkpoint(shard_id, pos)
            if checkpoint is None or self._written.get(shard_id) == text:
                continue
            if not force and not self._throttle.due(shard_id, now) and checkpoint.sequence_number is not None:
                continue
            due.append(checkpoint.stamped(self.config.worker.worker_id))
            texts[shard_id] = text

        def done(shard_id: str) -> None:
            self._written[shard_id] = texts[shard_id]
            self._throttle.wrote(shard_id, now)

        if not due:
            return
        try:
            self._writer.write(self.clients.checkpoints(), due, done)
        except CheckpointError as exc:
            log.warning("could not write checkpoints to ZooKeeper (trying again after the next batch): %s", exc)

    def close(self) -> None:
        """Release the clients. Idempotent."""
        self._writer.forget()
        self.clients.close()


P = TypeVar("P")


class PlannedReader(Generic[P]):
    """What both stream readers hold: the source's parsed options, and the driver's planning state made from them
    (a :class:`QueryPlanning` and the reader's planner, built by ``planner_type``).

    A reader travels to Spark's tasks as its configuration and limits only: pickling leaves out the planning state
    (its clients, cursors and kept records), which is made afresh wherever the reader is unpickled. The planning
    state is used by Spark's thread that calls the reader on the driver.
    """

    planner_type: Callable[[QueryPlanning], P]

    def __init__(self, options: Mapping[str, str]) -> None:
        self.config, self.limits = parse_source_options(options)
        self._fresh_planning()

    def _fresh_planning(self) -> None:
        self._planning = QueryPlanning(self.config)
        self._planner: P = type(self).planner_type(self._planning)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self.limits = state["limits"]
        self._fresh_planning()
