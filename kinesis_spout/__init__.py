"""kinesis_spout: read Amazon Kinesis into Apache Spark from Python.

A port of the Amazon Kinesis Storm spout: round-robin buffered shard readers, an in-flight record tracker with
retries and a safe checkpoint per shard, checkpoints in ZooKeeper, and adapters for Spark.
"""

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
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff


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


__version__ = _version()

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
