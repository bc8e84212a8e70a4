"""Pure logic of the Structured Streaming source: its options, its offsets, and admission control.

No Spark, no network, no clock: the stream reader in :mod:`kinesis_spout.spark.source` does the I/O and asks this
module what a position means, which records a batch may take, and which shards may be read.

An offset is a JSON object ``{shard_id: position}`` whose positions are the strings of
:class:`kinesis_spout.positions.Position` (:meth:`~kinesis_spout.positions.Position.encode`):

=============================  ================================================================================
``"49590338271490256608559"``  the last record this query consumed from the shard, all of it (the next read
                               starts ``AFTER_SEQUENCE_NUMBER`` it)
``"4959...8559:41"``           inside a KPL aggregate: its user records up to sub-sequence 41 were consumed, the
                               rest were not (the next read starts ``AT_SEQUENCE_NUMBER`` it and skips 0..41)
``"TRIM_HORIZON"``             nothing consumed yet; the shard is read from its oldest record
``"LATEST"``                   nothing consumed yet; only in a new query's first offset, resolved to
                               ``AT_TIMESTAMP`` by the first batch (so a replay reads the same records)
``"AT_TIMESTAMP:<ISO-8601>"``  nothing consumed yet; the shard is read from records that arrived at that time
``"SHARD_END:<seq>"``          the shard is closed and was read to its end; ``<seq>`` is its last record
``"SHARD_END"``                the shard is closed and nothing of it was consumed (its children start at
                               ``TRIM_HORIZON``)
``"SHARD_END@LATEST"``         the shard closed before the app first started at ``LATEST`` and is not read
                               (its children start at ``LATEST``)
``"SHARD_END@AT_TIMESTAMP:<ISO-8601>"``  the shard was closed when the query decided to read it from that time,
                               and nothing came after it (its children start at that time)
=============================  ================================================================================

Sequence numbers are compared as ints, never as strings.

**Aggregated records.** The source de-aggregates KPL records (``deaggregate``, on by default) and works at user
record granularity: admission control counts user records, and a batch may end inside an aggregate (``SEQ:SUB``);
the next batch, or a replay, reads that Kinesis record again and skips the user records already consumed. So
``maxRecordsPerTrigger`` holds even for an aggregate of thousands of user records, and a ZooKeeper checkpoint the
spout left inside an aggregate is a valid start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import OPTION_NAMES, SpoutConfig
from kinesis_spout.coordination import lineage
from kinesis_spout.errors import CheckpointError, ConfigError
from kinesis_spout.positions import Kind, Position, after_record
from kinesis_spout.records import SequenceKey

#: Options of the source that are not SpoutConfig fields; taken out before the rest goes to ``from_options``.
MAX_RECORDS_PER_TRIGGER = "maxRecordsPerTrigger"
MAX_BYTES_PER_TRIGGER = "maxBytesPerTrigger"
READ_MODE = "readMode"
RECORDS_PER_PARTITION = "recordsPerPartition"
SHARDS_PER_TASK = "shardsPerTask"
SOURCE_ONLY_OPTIONS = (MAX_RECORDS_PER_TRIGGER, MAX_BYTES_PER_TRIGGER, READ_MODE, RECORDS_PER_PARTITION,
                       SHARDS_PER_TASK)
#: ``recordsPerPartition`` when not given: the records of a ``readMode=driver`` batch are packed into partitions of
#: about this many (a Spark task costs tens of milliseconds whatever it holds; a shard's records are never split).
DEFAULT_RECORDS_PER_PARTITION = 10_000
#: ``shardsPerTask`` when not given: a ``readMode=executors`` batch reads its shards with new records in tasks of up
#: to this many shards each (read at once by threads of the task), and each task records its shards' ends in one
#: ZooKeeper node: a caught-up batch costs ZooKeeper about two requests per task, not per shard.
DEFAULT_SHARDS_PER_TASK = 32
#: ``readMode``: ``driver`` reads Kinesis on the driver and hands the records to the tasks; ``executors`` plans on
#: the driver and reads on the executors (:mod:`kinesis_spout.spark.source.executor_batches`); ``auto`` (the
#: default) picks one by the Spark master (:func:`choose_read_mode`).
READ_MODES = ("auto", "driver", "executors")

#: SpoutConfig options for per-record ack/fail, which a Structured Streaming source has no use for: a batch is
#: done when Spark commits it. They are accepted (the same options serve the spout) and reported as unused.
UNUSED_BY_SOURCE = frozenset({
    "retryLimit", "retryBackoffInitialS", "retryBackoffMultiplier", "retryBackoffMaxS", "messageTimeoutS",
    "maxInflightRecords", "maxInflightBytes", "prefetchRecords", "prefetchBytes", "readerThreads",
    "reliable",
    "scheme",
})


@dataclass(frozen=True)
class SourceLimits:
    """Admission control from the source-only options: at most this many records / bytes per micro-batch.

    ``None`` means no limit. A batch always admits at least one record, even one larger than ``max_bytes``.
    ``read_mode`` is the ``readMode`` option (one of ``READ_MODES``), which says who reads Kinesis
    (:func:`choose_read_mode` decides ``auto``). ``records_per_partition``: with ``readMode=driver``, the shards'
    records of a batch are packed into partitions of up to this many (a shard with more is a partition alone).
    ``shards_per_task``: with ``readMode=executors``, a task reads up to this many shards of a batch.
    """

    max_records: int | None = None
    max_bytes: int | None = None
    read_mode: str = "auto"
    records_per_partition: int = DEFAULT_RECORDS_PER_PARTITION
    shards_per_task: int = DEFAULT_SHARDS_PER_TASK


def choose_read_mode(read_mode: str, master: str | None) -> str:
    """``"driver"`` or ``"executors"``: the ``readMode`` option, with ``auto`` decided by the Spark master the data
    source was registered under (``kinesis_spout.spark.register(spark)`` records it; None: not known).

    ``auto`` is ``driver`` on ``local[...]`` (one machine: the executors are threads of the driver's JVM, and reading
    on the driver measured as fast as reading in tasks, with fewer ZooKeeper requests) and when the master is not
    known (the data source registered by hand), and ``executors`` on a cluster (standalone, YARN, Kubernetes,
    ``local-cluster``), where reading on the driver would cap the query at one Python process.
    """
    if read_mode != "auto":
        return read_mode
    if master is None:
        return "driver"
    master = master.strip().lower()
    return "driver" if master == "local" or master.startswith("local[") else "executors"


def parse_source_options(options: Mapping[str, str]) -> tuple[SpoutConfig, SourceLimits]:
    """Split Spark's options into the spout configuration and the source's admission limits.

    Who calls: the data source (``schema()``, to fail at ``load()``) and the stream reader's constructor. Spark
    hands Python data sources their options with lower-cased names, so names match case-insensitively and are
    given to :meth:`SpoutConfig.from_options` (the one parser of string options) under their canonical spelling.
    Raises ``ConfigError`` naming the option: a batch read's option (``startingTimestamp``...) or no ``appName`` with
    what a stream read does instead, and ``metricsPort``, which the source does not serve
    (:mod:`kinesis_spout.spark.source.read_kinds`).
    """
    from kinesis_spout.spark.source.aliases import resolve_aliases
    from kinesis_spout.spark.source.read_kinds import metrics_port_problem, stream_read_problem

    options = resolve_aliases(options)
    problem = metrics_port_problem(options) or stream_read_problem(options)
    if problem is not None:
        raise problem
    canonical = {name.lower(): name for name in (*OPTION_NAMES, *SOURCE_ONLY_OPTIONS)}
    spout_options: dict[str, str] = {}
    limits: dict[str, int] = {}
    read_mode = "auto"
    for raw_name, value in options.items():
        name = canonical.get(str(raw_name).lower(), str(raw_name))
        if name == READ_MODE:
            read_mode = str(value).strip().lower()
            if read_mode not in READ_MODES:
                raise ConfigError(f"option {READ_MODE!r} must be one of {', '.join(READ_MODES)}, got {value!r}")
        elif name in SOURCE_ONLY_OPTIONS:
            limits[name] = _positive_int(name, value)
        else:
            spout_options[name] = value
    from kinesis_spout.spark.source.read_kinds import BATCH_OPTIONS

    config = SpoutConfig.from_options(spout_options, also_known=(*SOURCE_ONLY_OPTIONS, *BATCH_OPTIONS))
    return config, SourceLimits(limits.get(MAX_RECORDS_PER_TRIGGER), limits.get(MAX_BYTES_PER_TRIGGER), read_mode,
                                limits.get(RECORDS_PER_PARTITION, DEFAULT_RECORDS_PER_PARTITION),
                                limits.get(SHARDS_PER_TASK, DEFAULT_SHARDS_PER_TASK))


def unused_options(options: Mapping[str, str]) -> list[str]:
    """The given options that have no effect on the source (canonical names, sorted)."""
    canonical = {name.lower(): name for name in UNUSED_BY_SOURCE}
    return sorted(canonical[n.lower()] for n in options if n.lower() in canonical)


def _positive_int(name: str, value: Any) -> int:
    text = str(value).strip().replace("_", "")
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"option {name!r} must be a whole number of at least 1, got {value!r}; leave it out "
                          f"for no limit")
    return int(text)


def initial_positions(parents: Mapping[str, Sequence[str]], stored: Mapping[str, Checkpoint],
                      config: SpoutConfig, closed: Iterable[str] = (), first_start: bool | None = None
                      ) -> dict[str, Position]:
    """Where a query starts in each shard of ``parents`` (shard id -> its parent shard ids; ``closed``: those
    that are closed), by the lineage rule the spout uses too
    (:func:`kinesis_spout.coordination.lineage.start_positions`): a shard's checkpoint wins; a shard without one
    starts where its parents hand it down (``TRIM_HORIZON`` below a parent the app read, the pin below a pinned
    one, ``LATEST`` below a ``LATEST`` one), else at ``config.initial_position``; a closed shard at an unpinned
    ``LATEST`` is not read (``SHARD_END@LATEST``) when this is the app's first start (``first_start``; None: when
    ``stored`` holds nothing of these shards), else read from ``TRIM_HORIZON``.
    """
    if first_start is None:
        first_start = lineage.is_first_start(parents, stored)
    reading = config.reading
    starts = lineage.start_positions(parents, stored, reading.initial_position, reading.initial_timestamp,
                                     frozenset(closed), first_start)
    return {shard_id: start.position for shard_id, start in starts.items()}


def as_checkpoint(shard_id: str, position: Position) -> Checkpoint | None:
    """The ZooKeeper checkpoint that stands for a query position; None for a position that needs none (nothing
    consumed from ``TRIM_HORIZON``, a ``LATEST`` not pinned yet). A shard closed before a ``LATEST`` start and never
    read gets the never-read mark (an end whose children start at ``LATEST``, not at ``TRIM_HORIZON``); an end
    read from a pin with nothing after it keeps the pin."""
    if position.kind in (Kind.TRIM_HORIZON, Kind.LATEST):
        return None
    return Checkpoint.at(shard_id, position)


def lineage_checkpoint(shard_id: str, position: Position) -> Checkpoint:
    """The checkpoint that stands for a query position when the lineage rule looks at it as a parent's: what
    :func:`as_checkpoint` writes, and for a position that writes none, the reset it amounts to (``TRIM_HORIZON``
    with nothing consumed, or a ``LATEST`` not pinned yet).

    Who calls: the stream reader, for the parents in the query of a shard new to it (a child of a reshard).
    """
    return Checkpoint.at(shard_id, position)


def parse_offset(doc: Any, where: str = "offset") -> dict[str, Position]:
    """A Spark offset (the JSON object) as ``{shard_id: Position}``; ``CheckpointError`` when malformed."""
    if not isinstance(doc, Mapping):
        raise CheckpointError(f"{where}: expected a JSON object of shard positions, got {doc!r}; was the "
                              f"checkpoint location written by another source?")
    if "batch" in doc and "shards" in doc:
        raise CheckpointError(f"{where}: the checkpoint location was written with readMode=executors; keep that "
                              f"mode for it, or start the query with a new checkpoint location (it resumes from "
                              f"ZooKeeper's checkpoints)")
    return {str(shard): Position.parse(text, f"{where}, shard {shard}") for shard, text in doc.items()}


def encode_offset(positions: Mapping[str, Position]) -> dict[str, str]:
    """The JSON object Spark stores for ``positions``, ordered by shard id (so equal offsets compare equal)."""
    return {shard: positions[shard].encode() for shard in sorted(positions)}


def range_is_empty(start: Position, end: Position) -> bool:
    """True when no record lies after ``start`` and at or before ``end`` (a batch has nothing of the shard)."""
    return not end.is_beyond(start)


def in_range(key: SequenceKey, start: Position, end: Position) -> bool:
    """Whether the (user) record ``key`` belongs to the batch ``(start, end]`` of its shard."""
    low, high = start.key, end.key
    return high is not None and key <= high and (low is None or key > low)


def consumed(key: SequenceKey, position: Position) -> bool:
    """Whether the (user) record ``key`` was consumed by ``position`` (at or before it)."""
    mine = position.key
    return mine is not None and key <= mine


def end_after(taken: Sequence[SequenceKey], following: SequenceKey | None, position: Position) -> Position:
    """The shard's position after a batch takes the records ``taken`` (keys in order) from ``position``.

    ``following`` is the key of the first record left for later (None when the batch took all it had read): when
    it has the same sequence number as the last record taken, the batch ends inside that aggregate.
    """
    if not taken:
        return position
    last = taken[-1]
    whole = following is None or following.sequence != last.sequence
    return after_record(last, whole)


def allocate(sizes: Mapping[str, Sequence[int]], max_records: int | None, max_bytes: int | None) -> dict[str, int]:
    """How many of each shard's waiting records (their ``sizes`` in order) one batch admits.

    Who calls: the stream reader's ``latestOffset``. Shards take turns one record at a time (in the mapping's
    order), so a limit is shared fairly and each shard's records stay in order. The batch stops at the first
    record that would pass ``max_records`` or ``max_bytes``, except that the first record is always admitted so
    a record larger than ``max_bytes`` cannot stall the query.
    """
    taken = {shard: 0 for shard in sizes}
    if max_records is None and max_bytes is None:
        return {shard: len(s) for shard, s in sizes.items()}
    rows = used = 0
    active = [shard for shard, s in sizes.items() if s]
    while active:
        still = []
        for shard in active:
            i = taken[shard]
            size = sizes[shard][i]
            if rows and ((max_records is not None and rows + 1 > max_records)
                         or (max_bytes is not None and used + size > max_bytes)):
                return taken
            taken[shard] = i + 1
            rows += 1
            used += size
            if i + 1 < len(sizes[shard]):
                still.append(shard)
        active = still
    return taken


def first_after(timestamps: Iterable[datetime | None], cutoff: datetime) -> int | None:
    """Index of the first record that arrived after ``cutoff`` (None when none did; unknown times count as before).

    Who calls: the stream reader under ``Trigger.AvailableNow``, to leave out records that arrived after the run
    started.
    """
    for i, ts in enumerate(timestamps):
        if ts is not None and ts > cutoff:
            return i
    return None


def waiting_for_parents(parents: Mapping[str, Sequence[str]], positions: Mapping[str, Position],
                        listed: Iterable[str]) -> set[str]:
    """Shards that must not be read yet: a parent of theirs is still listed and not read to its end (the lineage
    rule the spout uses too, :func:`kinesis_spout.coordination.lineage.waiting_for_parents`)."""
    finished = {shard for shard, position in positions.items() if position.ended}
    return lineage.waiting_for_parents(parents, set(listed), finished)
