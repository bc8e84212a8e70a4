"""``spark.read.format("kinesis_spout")``: a batch read of what a stream holds between two times.

::

    df = (spark.read.format("kinesis_spout").option("streamName", "sentences")
          .option("startingTimestamp", "2026-11-22T10:00:00+00:00")   # default: the oldest record (TRIM_HORIZON)
          .option("endingTimestamp", "2026-11-22T11:00:00+00:00")     # default: when the read is planned
          .load())

Each shard the stream lists (closed ones within the retention period included) is one partition, read on an
executor from its start until its tip, its end, or its first record that arrived after the end time. The end is
fixed when Spark plans the read (``partitions``), so every task of one action agrees; another action on the same
DataFrame is planned again and may see records that arrived since, as with any live source. No checkpoint is read or
written: a batch read leaves the app's ZooKeeper state alone, and ``appName``/``zookeeper`` are not needed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence, cast

from pyspark.sql.datasource import DataSourceReader, InputPartition

from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.client import kinesis_client
from kinesis_spout.kinesis.retrieval.factory import polling_getter
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.shards import HashKeyRange, drop_range, list_shards
from kinesis_spout.positions import TRIM_HORIZON, at_timestamp
from kinesis_spout.spark.source.clients import WORKER_CLIENTS
from kinesis_spout.spark.source.offsets import parse_source_options
from kinesis_spout.spark.source.read_kinds import BATCH_OPTIONS, ENDING_TIMESTAMP, STARTING_TIMESTAMP
from kinesis_spout.spark.source.rows import column_getter, rows_to_arrow
from kinesis_spout.spark.source.shard_reads import paced_getter

__all__ = ["BATCH_OPTIONS", "KinesisBatchReader", "ShardSpan", "between", "parse_batch_options"]


def _timestamp(name: str, value: Any) -> datetime:
    try:
        when = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(f"option {name!r} must be an ISO-8601 time such as 2026-11-22T10:00:00+00:00, got "
                          f"{value!r}") from exc
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def initial_position_problem(options: Mapping[str, str]) -> ConfigError | None:
    """Why a batch read cannot take the stream read's ``initialPosition`` it was given, or None (none given, or
    ``TRIM_HORIZON``, which is where a batch read starts anyway). ``LATEST`` would read nothing a batch read can
    end on, and was once ignored silently (the whole stream was read); ``AT_TIMESTAMP`` is ``startingTimestamp``."""
    typed = {str(raw).lower(): str(raw) for raw in options}
    name = typed.get("initialposition")
    if name is None:
        return None
    value = str(options[name]).strip()
    kind = value.upper().replace("-", "_")
    if kind == "TRIM_HORIZON":
        return None
    when_name = typed.get("initialtimestamp")
    when = str(options[when_name]).strip() if when_name is not None else "2026-11-22T10:00:00+00:00"
    instead = (f"a batch read starts at a time with .option('startingTimestamp', {when!r}) instead"
               if kind == "AT_TIMESTAMP" else
               "to read the records that arrive from now on, use a stream read (spark.readStream, whose first "
               "batch starts at the tip with initialPosition LATEST); to read recent records only, give a batch "
               "read .option('startingTimestamp', ...)")
    return ConfigError(f"option {name!r}={value!r} is a stream read's (spark.readStream): a batch read "
                       f"(spark.read) reads from option 'startingTimestamp' (default: the oldest record, "
                       f"TRIM_HORIZON) to 'endingTimestamp' (default: when the read is planned); {instead}")


def parse_batch_options(options: Mapping[str, str]) -> tuple[SpoutConfig, datetime | None, datetime | None]:
    """The configuration and the (start, end) times of a batch read; ``ConfigError`` naming a bad option.

    Spark hands the options with lower-cased names; they match case-insensitively. ``appName`` defaults to
    ``batch-read`` (nothing is stored under it). A stream read's ``initialPosition`` other than ``TRIM_HORIZON`` is
    refused (:func:`initial_position_problem`).
    """
    problem = initial_position_problem(options)
    if problem is not None:
        raise problem
    canonical = {n.lower(): n for n in BATCH_OPTIONS}
    times: dict[str, datetime] = {}
    rest: dict[str, str] = {}
    for raw, value in options.items():
        name = canonical.get(str(raw).lower())
        if name is not None:
            times[name] = _timestamp(name, value)
        else:
            rest[str(raw)] = value
    if not any(k.lower() == "appname" for k in rest):
        rest["appName"] = "batch-read"
    config, _ = parse_source_options(rest)
    if "," in config.stream_name:
        raise ConfigError(f"a batch read (spark.read) reads one stream; option 'streamName' lists "
                          f"{config.stream_name!r}: read each stream with spark.read and union the DataFrames, or "
                          f"read them all with spark.readStream")
    start, end = times.get(STARTING_TIMESTAMP), times.get(ENDING_TIMESTAMP)
    if start is not None and end is not None and end <= start:
        raise ConfigError(f"option {ENDING_TIMESTAMP!r} ({end.isoformat()}) must be after {STARTING_TIMESTAMP!r} "
                          f"({start.isoformat()})")
    return config, start, end


class ShardSpan(InputPartition):
    """One shard of a batch read: records from ``start`` (None: the oldest) that arrived at or before ``end``.
    ``hash_range`` is the shard's (user records of aggregates outside it are dropped)."""

    def __init__(self, shard_id: str, start: str | None, end: str, hash_range: HashKeyRange | None = None) -> None:
        super().__init__((shard_id, start, end))
        self.shard_id = shard_id
        self.start = start
        self.end = end
        self.hash_range = hash_range


class KinesisBatchReader(DataSourceReader):
    """The reader of ``spark.read.format("kinesis_spout")``: one partition per shard, read on the executors.

    The constructor does no I/O; ``partitions`` lists the shards on the driver; ``read`` runs on executors, with
    the worker process's Kinesis client.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        self.config, self.start, self.end = parse_batch_options(options)

    def partitions(self) -> Sequence[InputPartition]:
        cfg = self.config
        end = self.end or datetime.now(timezone.utc)
        start = self.start.isoformat() if self.start is not None else None
        shards = list_shards(kinesis_client(cfg.kinesis), cfg.stream_name)
        return [ShardSpan(s.shard_id, start, end.isoformat(),
                          drop_range(cfg.stream_name, s.shard_id, s, cfg.reading.drop_foreign_user_records))
                for s in shards]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The shard's records up to the end time, as Arrow batches, one per GetRecords reply, built from the columns
        the reply was decoded into (no record object per record)."""
        assert isinstance(partition, ShardSpan)
        cfg = self.config
        first = at_timestamp(datetime.fromisoformat(partition.start)) if partition.start else TRIM_HORIZON
        end = datetime.fromisoformat(partition.end)
        begin = datetime.fromisoformat(partition.start) if partition.start else None
        getter = paced_getter(cast(ShardGetter, column_getter(polling_getter(
            WORKER_CLIENTS.kinesis(cfg.kinesis), cfg.stream_name, partition.shard_id, first, cfg.reading,
            hash_range=partition.hash_range))))
        while True:
            result = getter.fetch()
            table = rows_to_arrow(cfg.stream_name, result.records)
            table, late = between(table, begin, end)
            if table.num_rows:
                yield from table.to_batches()
            if late or result.shard_end:
                return
            if not result.fetched and result.millis_behind_latest in (0, None):
                return  # the tip: nothing more has arrived


def between(table: Any, begin: datetime | None, end: datetime) -> tuple[Any, bool]:
    """The rows of a reply's ``table`` (the source's columns) a batch read keeps, and whether one arrived after
    ``end``: those that arrived at or after ``begin`` (an iterator at a time may start a little early; unknown times
    kept), up to the first that arrived after ``end``. Compared in Arrow, in microseconds as the records' times."""
    import pyarrow as pa
    import pyarrow.compute as pc

    at = table.column("approximate_arrival_timestamp")
    kind = at.type
    if begin is not None:
        table = table.filter(pc.or_kleene(pc.is_null(at), pc.greater_equal(at, pa.scalar(begin, kind))))
        at = table.column("approximate_arrival_timestamp")
    past = pc.indices_nonzero(pc.fill_null(pc.greater(at, pa.scalar(end, kind)), False))
    if len(past):
        return table.slice(0, past[0].as_py()), True
    return table, False
