"""The Spark writers of the ``kinesis_spout`` sink: ``df.write`` (:class:`KinesisSinkWriter`) and ``writeStream``
(:class:`KinesisSinkStreamWriter`), both Arrow writers of the Python data source API.

Made on the driver by :meth:`KinesisSpoutDataSource.writer` / ``streamWriter`` (:func:`make_writer` checks the
options, the columns and that the stream exists before anything is written), pickled to the executors, where
``write`` puts one task's rows (:func:`~kinesis_spout.spark.sink.task.write_task`). ``commit`` logs what the write
did, summed over its tasks; ``abort`` says what was put before the failure: Kinesis cannot take records back, so
a failed or retried write leaves what it put (at-least-once: consumers de-duplicate, see docs/guides/writing.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from kinesis_spout.errors import ConfigError, StreamNotFoundError
from kinesis_spout.kinesis.botocore_errors import translate
from kinesis_spout.spark.shared.clients import WORKER_CLIENTS
from kinesis_spout.spark.sink.columns import Columns, check_schema
from kinesis_spout.spark.sink.options import SinkOptions, parse_sink_options
from kinesis_spout.spark.sink.task import SinkCounts, write_task

__all__ = ["KinesisSinkStreamWriter", "KinesisSinkWriter", "SinkCommit", "make_writer"]

log = logging.getLogger(__name__)


@dataclass
class SinkCommit(WriterCommitMessage):
    """A task's commit message: its counts."""

    counts: SinkCounts


def _task_name() -> str:
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:
            return f"partition {ctx.partitionId()} (task attempt {ctx.taskAttemptId()})"
    except Exception:  # noqa: BLE001 - only for naming the task in messages
        pass
    return "this task"


def _write(options: SinkOptions, columns: Columns, iterator: Iterator[Any]) -> SinkCommit:
    client = WORKER_CLIENTS.kinesis(options.config.kinesis)
    return SinkCommit(write_task(iterator, options, columns, client, _task_name()))


def _total(messages: list[Any]) -> SinkCounts:
    total = SinkCounts()
    for m in messages:
        if isinstance(m, SinkCommit):
            total.add(m.counts)
    return total


class KinesisSinkWriter(DataSourceArrowWriter):
    """``df.write.format("kinesis_spout")``: each task puts its partition's rows; see the module docstring."""

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        """Called by Spark on an executor, once per partition (task attempt). Changes the stream."""
        return _write(self.options, self.columns, iterator)

    def commit(self, messages: list[Any]) -> None:
        """Called on the driver once every task succeeded: logs the write's counts."""
        log.info("kinesis_spout sink: wrote to stream %r: %s", self.options.stream_name, _total(messages).describe())

    def abort(self, messages: list[Any]) -> None:
        """Called on the driver when the write failed: what the tasks that finished put stays in the stream."""
        log.warning("kinesis_spout sink: the write to stream %r failed; tasks that finished had put: %s (Kinesis "
                    "keeps them: writing again puts them again)", self.options.stream_name,
                    _total(messages).describe())


class KinesisSinkStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("kinesis_spout")``: each micro-batch's tasks put their rows; a micro-batch re-run after
    a failure or a restart puts its rows again (at-least-once)."""

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        """Called by Spark on an executor, once per partition of a micro-batch. Changes the stream."""
        return _write(self.options, self.columns, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        """Called on the driver when every task of micro-batch ``batchId`` succeeded: logs its counts."""
        log.info("kinesis_spout sink: micro-batch %d to stream %r: %s", batchId, self.options.stream_name,
                 _total(messages).describe())

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        """Called on the driver when micro-batch ``batchId`` failed; it is run again on restart."""
        log.warning("kinesis_spout sink: micro-batch %d to stream %r failed; tasks that finished had put: %s (they "
                    "are put again when the batch is run again)", batchId, self.options.stream_name,
                    _total(messages).describe())


#: Spark hands a sink ``overwrite`` for ``mode("overwrite")`` and for a streaming ``outputMode("complete")``; its
#: default mode and "ignore" it refuses itself (UNSUPPORTED_DATA_SOURCE_SAVE_MODE) before asking a Python sink.
_ONLY_APPENDS = ('the kinesis_spout sink only appends (a Kinesis stream cannot be overwritten): write with '
                 '.mode("append"). Spark refuses its default mode (ErrorIfExists) and "ignore" for Python data '
                 'sources, so a write to Kinesis always says .mode("append")')
_ONLY_APPENDS_STREAM = ('the kinesis_spout sink only appends (a Kinesis stream cannot be overwritten), and '
                        'outputMode("complete") would write the whole result table again every micro-batch: use '
                        'outputMode("append") (writeStream\'s default) on a query that appends rows')


def make_writer(options: Mapping[str, str], schema: Any, overwrite: bool, streaming: bool) -> Any:
    """The writer for ``options`` and ``schema``, checked: the mode (``overwrite``: ``mode("overwrite")`` or a
    streaming ``outputMode("complete")``, refused naming ``mode("append")``), options, columns, the stream's
    existence. Called by the data source on the driver (at ``save()`` / ``start()``), so a mistake fails before
    anything is written."""
    if overwrite:
        raise ConfigError(_ONLY_APPENDS_STREAM if streaming else _ONLY_APPENDS)
    parsed = parse_sink_options(options)
    columns = check_schema(schema, parsed)
    check_stream(parsed)
    return (KinesisSinkStreamWriter if streaming else KinesisSinkWriter)(parsed, columns)


def check_stream(options: SinkOptions) -> None:
    """StreamNotFoundError naming the stream and the options to check when Kinesis says it does not exist; other
    failures (no network now) are left to the tasks, which report them."""
    cfg = options.config
    try:
        client = WORKER_CLIENTS.kinesis(cfg.kinesis, read_timeout_s=5.0)  # the driver process's: one for all its writes
        client.describe_stream_summary(StreamName=cfg.stream_name)
    except Exception as exc:  # noqa: BLE001 - only "not found" is an answer here
        err = translate(exc, f"describing stream {cfg.stream_name!r}")
        if isinstance(err, StreamNotFoundError):
            kinesis = cfg.kinesis
            where = f"endpoint {kinesis.endpoint_url}" if kinesis.endpoint_url else \
                f"region {kinesis.region or 'default'}"
            raise StreamNotFoundError(f"the kinesis_spout sink cannot write to stream {cfg.stream_name!r}: it does "
                                      f"not exist at {where}; create it, or check the options streamName, region "
                                      f"and endpointUrl", code=err.code) from exc
        log.debug("could not check that stream %r exists: %s", cfg.stream_name, err)
