"""Which options belong to one kind of read only: the batch read's (``spark.read.format("kinesis_spout")``), the
stream read's (``spark.readStream``), and the refusals that name the other kind's way to do the same.

Pure: no Spark, no I/O. Names match case-insensitively (Spark hands a Python data source its options lower-cased)
and messages name each option as it was given. Who calls:
:func:`kinesis_spout.spark.source.offsets.parse_source_options` (every stream read, and the rest of a batch read's
options) and the data source's ``schema()``, which Spark runs at ``load()`` with the same options for both kinds of
read, so it tells them apart by :data:`STREAM_SIGNS`.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from kinesis_spout.errors import ConfigError

__all__ = ["BATCH_OPTIONS", "ENDING_TIMESTAMP", "STARTING_TIMESTAMP", "STREAM_SIGNS", "given", "load_problem",
           "metrics_port_problem", "stream_read_problem"]

STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
#: Options of batch reads only (a stream read refuses them, naming its own way to do the same).
BATCH_OPTIONS = (STARTING_TIMESTAMP, ENDING_TIMESTAMP)
#: Options that only a stream read acts on: given with a batch read's times, the options cannot serve either kind.
#: (A batch read reads no checkpoint, needs no app, starts at ``startingTimestamp`` and has no micro-batches.)
STREAM_SIGNS = ("appName", "zookeeper", "initialPosition", "initialTimestamp", "readMode", "maxRecordsPerTrigger",
                "maxBytesPerTrigger", "recordsPerPartition", "shardsPerTask")
_APP_NAME = "appName"
_METRICS_PORT = "metricsPort"
_NO_PORT = ("", "none", "off")


def given(options: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The options of ``names`` present in ``options``: canonical name -> the name as given."""
    wanted = {name.lower(): name for name in names}
    return {wanted[str(raw).lower()]: str(raw) for raw in options if str(raw).lower() in wanted}


def _value(options: Mapping[str, str], typed: str) -> str:
    return str(options[typed]).strip()


def stream_read_problem(options: Mapping[str, str]) -> ConfigError | None:
    """Why ``options`` cannot be a stream read's, or None: a batch read's option, or no ``appName``. The message
    names the option as typed and what a stream read uses instead."""
    batch = given(options, BATCH_OPTIONS)
    if STARTING_TIMESTAMP in batch:
        typed = batch[STARTING_TIMESTAMP]
        when = _value(options, typed)
        return ConfigError(
            f"option {typed!r} is an option of batch reads (spark.read); a stream read (spark.readStream) starts "
            f"at a time with .option('initialPosition', 'AT_TIMESTAMP').option('initialTimestamp', {when!r}) "
            f"instead (used while the app has no checkpoint in ZooKeeper; a restarted query resumes where it "
            f"stopped)")
    if ENDING_TIMESTAMP in batch:
        return ConfigError(
            f"option {batch[ENDING_TIMESTAMP]!r} is an option of batch reads (spark.read): a stream read has no end; "
            f"to read what the stream holds and stop, start the query with .trigger(availableNow=True), or read "
            f"between two times with spark.read.format('kinesis_spout')")
    if not given(options, (_APP_NAME,)):
        return ConfigError(
            "option 'appName' is required by a stream read (spark.readStream): it names the app whose checkpoints "
            "the query keeps in ZooKeeper (shared with the app's other queries and spouts); add "
            ".option('appName', 'my-app')")
    return None


def load_problem(options: Mapping[str, str]) -> ConfigError | None:
    """What ``load()`` can refuse although it cannot tell a stream read from a batch read: options that show a
    stream read (:data:`STREAM_SIGNS`) that a stream read refuses (a batch read's time, no ``appName``). The
    message adds what a batch read would leave out. Who calls: the data source's ``schema()``."""
    stream = given(options, STREAM_SIGNS)
    problem = stream_read_problem(options) if stream else None
    if problem is None:
        return None
    names = ", ".join(repr(typed) for typed in stream.values())
    return ConfigError(f"{problem} (If this is a batch read, spark.read, leave out {names}: a batch read uses no "
                       f"app, no ZooKeeper checkpoint and no micro-batches.)")


def metrics_port_problem(options: Mapping[str, str]) -> ConfigError | None:
    """Why ``metricsPort`` is refused here, or None (not given, or ``none``): the Spark source serves no metrics.

    Its code runs in Python processes Spark starts and stops (the driver's planner of each query, the tasks on the
    executors), none of which is the user's: a port there would serve part of the figures, for part of the time.
    """
    typed = given(options, (_METRICS_PORT,)).get(_METRICS_PORT)
    if typed is None or _value(options, typed).lower() in _NO_PORT:
        return None
    return ConfigError(
        f"option {typed!r} is not served by the kinesis_spout Spark source (it runs in Python processes Spark "
        f"starts and stops, none of them yours); leave it out. A stream read's figures: the query's progress "
        f"(query.lastProgress, query.recentProgress, or a StreamingQueryListener: rows, input and processing rates, "
        f"each shard's offset), and Spark's own metrics with spark.sql.streaming.metricsEnabled=true; the spout's "
        f"Prometheus metrics (lag and checkpoints per shard) come from reading with SpoutPipeline and "
        f"start_metrics_server. See docs/guides/metrics.md")
