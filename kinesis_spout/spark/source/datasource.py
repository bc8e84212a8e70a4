"""The Structured Streaming source ``kinesis_spout``: a Kinesis stream as ``spark.readStream`` (and ``spark.read``).

    spark.dataSource.register(KinesisSpoutDataSource)
    df = (spark.readStream.format("kinesis_spout").option("streamName", "sentences")
          .option("appName", "wordcount").option("zookeeper", "127.0.0.1:2181").load())

The data source only validates the options and picks the reader: ``readMode=driver`` (the default,
:mod:`kinesis_spout.spark.source.driver`), ``readMode=executors`` (:mod:`kinesis_spout.spark.source.executor`),
or a batch read (:mod:`kinesis_spout.spark.source.batch`).
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import StreamNotFoundError
from kinesis_spout.kinesis.client import make_client, translate
from kinesis_spout.spark.offsets import parse_source_options, unused_options
from kinesis_spout.spark.schema import SCHEMA_DDL
from kinesis_spout.spark.source.batch import KinesisBatchReader, parse_batch_options
from kinesis_spout.spark.source.driver import KinesisSpoutStreamReader
from kinesis_spout.spark.source.executor import ExecutorStreamReader

__all__ = ["KinesisSpoutDataSource", "check_stream_exists"]

log = logging.getLogger("kinesis_spout.spark")


class KinesisSpoutDataSource(DataSource):
    """``format("kinesis_spout")``: register with ``spark.dataSource.register(KinesisSpoutDataSource)``.

    Options are SpoutConfig's string options (``streamName``, ``appName``, ``zookeeper``, ``endpointUrl``,
    ``initialPosition``, ...) plus ``maxRecordsPerTrigger``, ``maxBytesPerTrigger`` and ``readMode``. Columns: see
    :mod:`kinesis_spout.spark.schema`.
    """

    @classmethod
    def name(cls) -> str:
        return "kinesis_spout"

    def schema(self) -> str:
        """Called by Spark at ``load()``: validates the options there, so a bad one fails before the query.

        ``load()`` serves ``spark.read`` and ``spark.readStream`` alike, so the batch-read options are accepted and
        ``appName`` is not required here; a stream query without ``appName`` fails at ``start()``."""
        config, _, _ = parse_batch_options(self.options)
        check_stream_exists(config)
        unused = unused_options(self.options)
        if unused:
            log.warning("options %s have no effect on the kinesis_spout source (a batch is done when Spark "
                        "commits it; per-record ack/fail is the spout's)", ", ".join(unused))
        return SCHEMA_DDL

    def reader(self, schema: Any) -> KinesisBatchReader:
        """``spark.read.format("kinesis_spout")``: a batch read between two times."""
        return KinesisBatchReader(self.options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """The reader of the ``readMode`` option: ``driver`` or ``executors``."""
        _, limits = parse_source_options(self.options)
        if limits.read_mode == "executors":
            return ExecutorStreamReader(self.options)
        return KinesisSpoutStreamReader(self.options)


def check_stream_exists(config: SpoutConfig) -> None:
    """Raise ``StreamNotFoundError`` at ``load()`` when Kinesis says the stream does not exist (instead of a long
    Py4J trace once the query runs). When Kinesis cannot be asked now (no credentials here, no network), nothing is
    raised: the query reports it when it runs."""
    try:
        client = make_client(config.region, config.endpoint_url, read_timeout_s=5.0, credentials=config.credentials)
        client.describe_stream_summary(StreamName=config.stream_name)
    except Exception as exc:  # noqa: BLE001 - only "not found" is an answer; the rest is checked when reading
        err = translate(exc, f"describing stream {config.stream_name!r}")
        if isinstance(err, StreamNotFoundError):
            where = f"endpoint {config.endpoint_url}" if config.endpoint_url else f"region {config.region or 'default'}"
            raise StreamNotFoundError(
                f"stream {config.stream_name!r} does not exist at {where}; check the options streamName, region "
                f"and endpointUrl; if the stream was deleted, this query's checkpoint location and the app's "
                f"ZooKeeper checkpoints refer to the old stream: start with a new checkpoint location and a new "
                f"appName, or reset the checkpoints (kinesis-spout checkpoints reset)", code=err.code) from exc
        log.debug("could not check that stream %r exists at load(): %s", config.stream_name, err)
