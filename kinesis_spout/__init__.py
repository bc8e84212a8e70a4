"""kinesis_spout: read Amazon Kinesis into Apache Spark from Python.

A port of the Amazon Kinesis Storm spout: round-robin buffered shard readers, an in-flight record tracker with
retries and a safe checkpoint per shard, checkpoints in ZooKeeper, and adapters for Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesis_spout import lazy_names

if TYPE_CHECKING:  # the names below, for type checkers and IDEs; at run time they are loaded on first use
    from kinesis_spout.checkpoint import Checkpoint, CheckpointStore, MemoryCheckpointStore
    from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore, ZooKeeperSecurity
    from kinesis_spout.config import (
        DeadLetterSettings,
        InitialPosition,
        KinesisSettings,
        MetricsSettings,
        ReadingSettings,
        SpoutConfig,
        TrackingSettings,
        WorkerSettings,
        ZooKeeperSettings,
    )
    from kinesis_spout.deadletters import DeadLetterError, JsonLinesDeadLetters, KinesisDeadLetters
    from kinesis_spout.errors import (
        BatchFailedError,
        CheckpointConflict,
        CheckpointError,
        ConfigError,
        DeadLetterStormError,
        InvalidRecordError,
        KinesisError,
        PutRecordsError,
        RetryError,
        SpoutError,
        SpoutStateError,
        StreamNotFoundError,
        ThrottledError,
    )
    from kinesis_spout.kinesis.credentials import AwsCredentials
    from kinesis_spout.metrics.shard import ShardMetrics
    from kinesis_spout.records import Record, SequenceKey, SpoutTuple
    from kinesis_spout.schemes import JsonScheme, RawScheme, RecordScheme, TextScheme
    from kinesis_spout.spout import KinesisSpout
    from kinesis_spout.spout.batch import SpoutBatch
    from kinesis_spout.spout.columns import ColumnBatch
    from kinesis_spout.spout.multi import MultiStreamSpout
    from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff

    __version__: str

#: Where each public name lives. ``import kinesis_spout`` loads none of them: a process that needs one module (a
#: Spark Python worker unpickling the data source, the ``kinesis-spout`` command) does not pay for the spout, the
#: ZooKeeper client, boto3 and the rest. ``from kinesis_spout import X`` and ``kinesis_spout.X`` load X's module
#: on first use (PEP 562).
_WHERE: dict[str, str] = {
    "AwsCredentials": "kinesis_spout.kinesis.credentials",
    "BatchFailedError": "kinesis_spout.errors",
    "Checkpoint": "kinesis_spout.checkpoint",
    "CheckpointConflict": "kinesis_spout.errors",
    "CheckpointError": "kinesis_spout.errors",
    "CheckpointStore": "kinesis_spout.checkpoint",
    "ConfigError": "kinesis_spout.errors",
    "DeadLetterError": "kinesis_spout.deadletters",
    "DeadLetterSettings": "kinesis_spout.config",
    "DeadLetterStormError": "kinesis_spout.errors",
    "FailOutcome": "kinesis_spout.tracker",
    "InflightRecordTracker": "kinesis_spout.tracker",
    "InitialPosition": "kinesis_spout.config",
    "InvalidRecordError": "kinesis_spout.errors",
    "JsonLinesDeadLetters": "kinesis_spout.deadletters",
    "JsonScheme": "kinesis_spout.schemes",
    "KinesisDeadLetters": "kinesis_spout.deadletters",
    "KinesisError": "kinesis_spout.errors",
    "KinesisSettings": "kinesis_spout.config",
    "KinesisSpout": "kinesis_spout.spout",
    "MemoryCheckpointStore": "kinesis_spout.checkpoint",
    "MetricsSettings": "kinesis_spout.config",
    "MultiStreamSpout": "kinesis_spout.spout.multi",
    "PutRecordsError": "kinesis_spout.errors",
    "RawScheme": "kinesis_spout.schemes",
    "ReadingSettings": "kinesis_spout.config",
    "ColumnBatch": "kinesis_spout.spout.columns",
    "Record": "kinesis_spout.records",
    "RecordScheme": "kinesis_spout.schemes",
    "RetryBackoff": "kinesis_spout.tracker",
    "RetryError": "kinesis_spout.errors",
    "SequenceKey": "kinesis_spout.records",
    "ShardMetrics": "kinesis_spout.metrics.shard",
    "SpoutBatch": "kinesis_spout.spout.batch",
    "SpoutConfig": "kinesis_spout.config",
    "SpoutError": "kinesis_spout.errors",
    "SpoutStateError": "kinesis_spout.errors",
    "SpoutTuple": "kinesis_spout.records",
    "StreamNotFoundError": "kinesis_spout.errors",
    "TextScheme": "kinesis_spout.schemes",
    "ThrottledError": "kinesis_spout.errors",
    "TrackingSettings": "kinesis_spout.config",
    "WorkerSettings": "kinesis_spout.config",
    "ZooKeeperCheckpointStore": "kinesis_spout.checkpoint.zookeeper",
    "ZooKeeperSecurity": "kinesis_spout.checkpoint.zookeeper",
    "ZooKeeperSettings": "kinesis_spout.config",
}


def _version() -> str:
    """The installed distribution's version (pyproject.toml ``version``, the one place it is written); from a source
    tree that was never installed, the ``version`` line of its pyproject.toml; else ``0+unknown``."""
    from importlib import metadata
    from pathlib import Path

    try:
        return metadata.version("kinesis-spout")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        if pyproject.is_file():
            for line in pyproject.read_text().splitlines():
                if line.startswith("version = "):
                    return line.split("=", 1)[1].strip().strip('"')
        return "0+unknown"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept in the package's namespace
    (:func:`kinesis_spout.lazy_names.load`); ``__version__`` is read on first use too (``importlib.metadata`` costs
    tens of milliseconds). Called by Python for a name the package does not hold yet (PEP 562)."""
    if name == "__version__":
        version = globals()["__version__"] = _version()
        return version
    return lazy_names.load(globals(), _WHERE, name)


def __dir__() -> list[str]:
    """The package's names and its public names not loaded yet, for ``dir(kinesis_spout)`` and completion."""
    return lazy_names.names(globals(), _WHERE)

__all__ = [
    "AwsCredentials",
    "BatchFailedError",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointStore",
    "ConfigError",
    "DeadLetterError",
    "DeadLetterSettings",
    "DeadLetterStormError",
    "FailOutcome",
    "InflightRecordTracker",
    "InitialPosition",
    "InvalidRecordError",
    "JsonLinesDeadLetters",
    "JsonScheme",
    "KinesisDeadLetters",
    "KinesisError",
    "KinesisSettings",
    "KinesisSpout",
    "MemoryCheckpointStore",
    "MetricsSettings",
    "MultiStreamSpout",
    "PutRecordsError",
    "RawScheme",
    "ReadingSettings",
    "Record",
    "RecordScheme",
    "RetryBackoff",
    "RetryError",
    "SequenceKey",
    "ShardMetrics",
    "SpoutConfig",
    "SpoutError",
    "SpoutBatch",
    "ColumnBatch",
    "SpoutStateError",
    "SpoutTuple",
    "StreamNotFoundError",
    "TextScheme",
    "ThrottledError",
    "TrackingSettings",
    "WorkerSettings",
    "ZooKeeperCheckpointStore",
    "ZooKeeperSecurity",
    "ZooKeeperSettings",
    "__version__",
]
