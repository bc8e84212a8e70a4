"""The Structured Streaming source ``kinesis_spout``: a Kinesis stream as ``spark.readStream`` (and ``spark.read``).

    kinesis_spout.spark.register(spark)        # or spark.dataSource.register(KinesisSpoutDataSource)
    df = (spark.readStream.format("kinesis_spout").option("streamName", "sentences")
          .option("appName", "wordcount").option("zookeeper", "127.0.0.1:2181").load())

The data source only validates the options and picks the reader: ``readMode=driver``
(:mod:`kinesis_spout.spark.source.driver`), ``readMode=executors`` (:mod:`kinesis_spout.spark.source.executor`),
``readMode=auto`` (the default: one of them by the Spark master, see
:func:`~kinesis_spout.spark.source.offsets.choose_read_mode`), or a batch read
(:mod:`kinesis_spout.spark.source.batch`).

Spark runs a data source's driver side in a Python process of its own, which cannot ask Spark for its master:
:func:`register` records the master on the class it registers (a subclass, pickled with it).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Iterator, NoReturn, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import ConfigError, StreamNotFoundError
from kinesis_spout.kinesis.botocore_errors import asked, translate
from kinesis_spout.kinesis.client import kinesis_client
from kinesis_spout.spark.shared.schema import SCHEMA_DDL
from kinesis_spout.spark.source.batch import KinesisBatchReader, parse_batch_options
from kinesis_spout.spark.source.driver import KinesisSpoutStreamReader
from kinesis_spout.spark.source.executor import ExecutorStreamReader
from kinesis_spout.spark.source.offsets import choose_read_mode, parse_source_options, unused_options
from kinesis_spout.spark.source.read_kinds import STREAM_SIGNS, given, load_problem

__all__ = ["KinesisSpoutDataSource", "RefusedStreamReader", "check_stream_exists", "register"]

log = logging.getLogger(__name__)


class KinesisSpoutDataSource(DataSource):
    """``format("kinesis_spout")``: register with ``spark.dataSource.register(KinesisSpoutDataSource)``.

    Options are SpoutConfig's string options (``streamName``, ``appName``, ``zookeeper``, ``endpointUrl``,
    ``initialPosition``, ...) plus ``maxRecordsPerTrigger``, ``maxBytesPerTrigger`` and ``readMode``. Columns: see
    :mod:`kinesis_spout.spark.shared.schema`. ``spark_master`` is the Spark master :func:`register` saw (None:
    registered by hand), which decides ``readMode=auto``.
    """

    spark_master: ClassVar[str | None] = None

    @classmethod
    def name(cls) -> str:
        return "kinesis_spout"

    def schema(self) -> str:
        """Called by Spark at ``load()``: validates the options there, so a bad one fails before the query.

        At ``load()`` Spark runs only the constructor and this method, in a Python worker, with the same options for
        ``spark.read`` and ``spark.readStream``: nothing says which kind of read it is. Options that only a stream
        read acts on (``appName``, ``zookeeper``, ``initialPosition``, ``readMode``, a trigger limit...: see
        :data:`~kinesis_spout.spark.source.read_kinds.STREAM_SIGNS`) make it a stream read, checked as one (a batch
        read's ``startingTimestamp`` is refused with the stream's way to start at a time, a missing ``appName``
        named); other options are checked as a batch read's, and a stream read with them is refused when its query
        starts (:meth:`streamReader`)."""
        problem = load_problem(self.options)
        if problem is not None:
            raise problem
        if given(self.options, STREAM_SIGNS):
            config, _ = parse_source_options(self.options)
        else:
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
        """The reader of the ``readMode`` option: ``driver``, ``executors``, or ``auto`` (by the Spark master).

        Who calls: Spark, when the query starts. Options a stream read refuses that ``load()`` took for a batch
        read's give a :class:`RefusedStreamReader`, which fails the query with the refusal (raised here, PySpark
        4.3 would bury it under an ``UnboundLocalError`` of its own)."""
        try:
            cfg, limits = parse_source_options(self.options)
        except ConfigError as exc:
            return RefusedStreamReader(str(exc))
        mode = choose_read_mode(limits.read_mode, self.spark_master)
        if limits.read_mode == "auto":
            log.info("readMode auto: %s (Spark master %s); set the option readMode to choose", mode,
                     self.spark_master or "not known: register the source with kinesis_spout.spark.register(spark)")
        reader_type = ExecutorStreamReader if mode == "executors" else KinesisSpoutStreamReader
        if "," in cfg.stream_name:  # several streams: a reader per stream (kinesis_spout.spark.source.streams)
            from kinesis_spout.spark.source.streams import MultiStreamReader

            return MultiStreamReader(self.options, reader_type)
        return reader_type(self.options)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        """``df.write.format("kinesis_spout")``: the sink (:mod:`kinesis_spout.spark.sink`), checked here on the
        driver: options, columns, the stream's existence."""
        from kinesis_spout.spark.sink import make_writer

        return make_writer(self.options, schema, overwrite, streaming=False)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        """``writeStream.format("kinesis_spout")``: the streaming sink, checked like :meth:`writer`."""
        from kinesis_spout.spark.sink import make_writer

        return make_writer(self.options, schema, overwrite, streaming=True)


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of options a stream read refuses: every call Spark makes raises the refusal, a
    ``ConfigError`` with ``message`` (the first call fails the query with it). ``stop()`` does nothing."""

    def __init__(self, message: str) -> None:
        self.message = message

    def _refuse(self) -> NoReturn:
        raise ConfigError(self.message)

    def initialOffset(self) -> dict[str, Any]:
        self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        self._refuse()

    def commit(self, end: dict[str, Any]) -> None:
        self._refuse()

    def stop(self) -> None:
        return None


def register(spark: Any) -> type[KinesisSpoutDataSource]:
    """Register ``format("kinesis_spout")`` with ``spark`` and return the class registered.

    ``spark`` is a classic SparkSession or a Spark Connect one (``SparkSession.builder.remote(...)``; the class is
    then pickled to the server, into that client's session only). The same as
    ``spark.dataSource.register(KinesisSpoutDataSource)``, and it records the session's Spark master
    (``spark.master``, asked of the server through Connect) on the class, so that ``readMode=auto`` reads on the
    executors on a cluster and on the driver on ``local[...]``. Who calls: the user, on the driver (the Connect
    client), once per session (again after a new session).
    """
    try:
        master = spark.sparkContext.master
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: ask its conf
        master = spark.conf.get("spark.master", None)
    source = source_for(master)
    spark.dataSource.register(source)
    _make_active(spark)
    return source


def _make_active(spark: Any) -> None:
    """Make ``spark`` the calling thread's active session in the JVM.

    Spark finds a Python data source for ``df.write.format(...)`` (not for reads) in the JVM thread's *active*
    session, and a thread may have none: after some failed queries the py4j thread that serves the caller has lost
    it, and the write fails with ``DATA_SOURCE_NOT_FOUND`` although the source is registered. Spark Connect has no
    JVM session here and looks sources up on the server: nothing to do.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    jvm = getattr(spark, "_jvm", None)
    if jsession is not None and jvm is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


def source_for(master: str | None) -> type[KinesisSpoutDataSource]:
    """The data source class for the Spark master ``master``: a subclass of :class:`KinesisSpoutDataSource` that
    carries it. Made anew on each call, so pickling (when Spark sends it to its Python processes) copies the class
    with its master instead of naming the module's class."""
    return type("KinesisSpoutDataSource", (KinesisSpoutDataSource,),
                {"spark_master": master, "__module__": __name__,
                 "__doc__": f"{KinesisSpoutDataSource.__doc__}\n    Registered for the Spark master {master!r}."})


def check_stream_exists(config: SpoutConfig) -> None:
    """Raise ``StreamNotFoundError`` at ``load()`` when Kinesis says the stream (each of the streams) does not exist
    (instead of a long Py4J trace once the query runs). When Kinesis cannot be asked now (no credentials here, no
    network), nothing is raised: the query reports it when it runs."""
    if "," in config.stream_name:
        for stream in config.stream_names:
            check_stream_exists(config.for_stream(stream))
        return
    try:
        client = kinesis_client(config.kinesis, read_timeout_s=5.0)
        client.describe_stream_summary(StreamName=config.stream_name)
    except Exception as exc:  # noqa: BLE001 - only "not found" is an answer; the rest is checked when reading
        err = translate(exc, f"describing stream {config.stream_name!r}")
        if isinstance(err, StreamNotFoundError):
            raise StreamNotFoundError(
                f"stream {config.stream_name!r} does not exist in {asked(client)}; check the options streamName, "
                f"region and endpointUrl; if the stream was deleted, this query's checkpoint location and the app's "
                f"ZooKeeper checkpoints refer to the old stream: start with a new checkpoint location and a new "
                f"appName, or reset the checkpoints (kinesis-spout checkpoints reset)", code=err.code) from exc
        log.debug("could not check that stream %r exists at load(): %s", config.stream_name, err)
