"""Several streams in one query: ``option("streamName", "clicks,orders")``, read by one stream reader per stream.

Composition, not a second reader: :class:`MultiStreamReader` holds a reader per stream (``readMode=driver`` or
``executors``, each made from the query's options with its own ``streamName`` and ``initialPosition``), so each
stream keeps its own planning, checkpoints (``{prefix}/{app}/{stream}/...`` in ZooKeeper), lineage and limits
(``maxRecordsPerTrigger`` and ``maxBytesPerTrigger`` apply to each stream). A batch is every stream's batch.

**Offsets** are keyed by stream, then as the stream's reader keys them (shard, or ``batch`` and ``shards``), as
Spark's Kafka source keys its offsets by topic, then partition::

    {"clicks": {"shardId-000000000000": "4959..."}, "orders": {"shardId-000000000000": "TRIM_HORIZON"}}

A stream added to the list of a running query starts at its ZooKeeper checkpoints, else at its initial position; a
stream taken out is no longer read. A checkpoint location written by a query of one stream holds that stream's
offsets alone (``{"shardId-...": "..."}``): a query of several streams refuses it (:func:`split_offset`), since it
cannot tell which stream it was: give the query a new checkpoint location (each stream resumes from its ZooKeeper
checkpoints) or keep the one stream. A query of one stream keeps the offsets it always had.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from kinesis_spout.errors import CheckpointError
from kinesis_spout.spark.source.aliases import resolve_aliases
from kinesis_spout.spark.source.offsets import parse_source_options

__all__ = ["MultiStreamReader", "StreamPartition", "split_offset", "stream_options"]

log = logging.getLogger(__name__)


def stream_options(options: Mapping[str, str], stream: str, position: str | None) -> dict[str, str]:
    """The options of one stream's reader: the query's, with ``streamName`` the one stream and ``initialPosition``
    that stream's (``position``; None: the option left out when it was a per-stream map, so the default applies)."""
    out: dict[str, str] = {}
    for name, value in resolve_aliases(options).items():
        lowered = name.lower()
        if lowered == "streamname":
            continue
        if lowered == "initialposition" and str(value).lstrip().startswith("{"):
            continue
        out[name] = value
    out["streamName"] = stream
    if position is not None:
        out["initialPosition"] = position
    return out


def split_offset(doc: Any, streams: Sequence[str], where: str) -> dict[str, Any]:
    """A multi-stream offset as ``{stream: that stream's offset}`` (streams of the query only; a stream not in it is
    missing). ``CheckpointError`` for an offset of a one-stream query (values that are not objects), naming the fix."""
    if not isinstance(doc, Mapping) or not all(isinstance(v, Mapping) for v in doc.values()):
        raise CheckpointError(
            f"{where}: the checkpoint location holds the offset of a query of one stream ({str(doc)[:200]}), and this "
            f"query reads the streams {', '.join(streams)}: start it with a new checkpoint location (each stream "
            f"resumes from its checkpoints in ZooKeeper), or read the one stream as before")
    return {stream: doc[stream] for stream in streams if stream in doc}


class StreamPartition(InputPartition):
    """A partition of one stream's reader (``inner``), with the stream it belongs to."""

    def __init__(self, stream: str, inner: InputPartition) -> None:
        super().__init__((stream, inner.value))
        self.stream = stream
        self.inner = inner

    def __repr__(self) -> str:
        return f"StreamPartition({self.stream}: {self.inner!r})"


class MultiStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of a query of several streams: a reader per stream, made by ``reader_type`` (the driver's
    or the executors' reader) from :func:`stream_options`. Spark's calls go to every stream's reader; ``latestOffset``
    asks them at once (each may wait for new records up to its idle wait) so a batch waits no longer than one
    stream's reader would. The constructor does no I/O; pickled for the tasks, each reader travels as its own
    configuration. Who calls: Spark, through ``KinesisSpoutDataSource.streamReader``."""

    def __init__(self, options: Mapping[str, str], reader_type: Callable[[Mapping[str, str]], Any]) -> None:
        self.config, self.limits = parse_source_options(options)
        positions = {stream: position.value for stream, position in self.config.stream_positions}
        self.readers: dict[str, Any] = {
            stream: reader_type(stream_options(options, stream, positions.get(stream)))
            for stream in self.config.stream_names}
        self._initial: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "limits": self.limits, "readers": self.readers}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._initial = {}

    # -- Spark's calls on the driver -------------------------------------------------------------------------------
    def _start_of(self, stream: str, given: Mapping[str, Any]) -> Any:
        """The stream's offset in ``given``, else where it starts (asked once: the same answer for a batch's plan and
        its partitions)."""
        if stream in given:
            return given[stream]
        if stream not in self._initial:
            self._initial[stream] = self.readers[stream].initialOffset()
        return self._initial[stream]

    def initialOffset(self) -> dict[str, Any]:
        """Every stream's start (its ZooKeeper checkpoints, else its initial position)."""
        return {stream: self._start_of(stream, {}) for stream in self.readers}

    def getDefaultReadLimit(self) -> ReadLimit:
        """The limit of each stream's reader (the same options: ``maxRecordsPerTrigger`` is per stream)."""
        return next(iter(self.readers.values())).getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: each stream's run ends at its tips (see the stream reader's own)."""
        for reader in self.readers.values():
            reader.prepareForTriggerAvailableNow()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Every stream's next end, asked of the streams' readers at once; ``start`` when none has anything new."""
        starts = split_offset(start, list(self.readers), "start offset")
        begin = {stream: self._start_of(stream, starts) for stream in self.readers}
        with ThreadPoolExecutor(len(self.readers), thread_name_prefix="kinesis-spout-streams") as pool:
            ends = dict(zip(begin, pool.map(lambda s: self.readers[s].latestOffset(begin[s], limit), begin)))
        return ends

    def reportLatestOffset(self) -> dict[str, Any]:
        """The streams' readers' reports as one in the form of :mod:`kinesis_spout.spark.source.lag` (so its listener
        reads it): ``stream`` is the list of streams (``"clicks,orders"``), and each shard is
        ``"{stream}/{shard_id}"``."""
        shards: dict[str, Any] = {}
        for stream, reader in self.readers.items():
            report = reader.reportLatestOffset()
            for shard_id, entry in (report.get("shards") or {}).items():
                shards[f"{stream}/{shard_id}"] = entry
        return {"source": "kinesis_spout", "stream": self.config.stream_name, "app": self.config.app_name,
                "shards": shards}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Every stream's partitions of the batch ``(start, end]``, each marked with its stream."""
        starts = split_offset(start, list(self.readers), "start offset")
        ends = split_offset(end, list(self.readers), "end offset")
        return [StreamPartition(stream, part) for stream in sorted(ends)
                for part in self.readers[stream].partitions(self._start_of(stream, starts), ends[stream])]

    def commit(self, end: dict[str, Any]) -> None:
        """Spark completed every batch up to ``end``: each stream's reader commits its part."""
        for stream, offset in split_offset(end, list(self.readers), "committed offset").items():
            self.readers[stream].commit(offset)

    def stop(self) -> None:
        """Stop every stream's reader. Idempotent."""
        for reader in self.readers.values():
            reader.stop()

    # -- executors -------------------------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The partition's rows, read by its stream's reader."""
        assert isinstance(partition, StreamPartition)
        yield from self.readers[partition.stream].read(partition.inner)
