"""The configuration of a spout: :class:`SpoutConfig`, frozen and validated, made of groups of settings, and the one
parser of string options.

Every setting has a flat Python name (``checkpoint_interval_s``), a place in a group
(``TrackingSettings.checkpoint_interval_s``) and, when it has a string form, an option name
(``checkpointIntervalS``) used by ``spark.readStream.option(...)`` and the command line;
:meth:`SpoutConfig.from_options` is the only place strings become values.

PURE (the core layer): standard library, :mod:`kinesis_spout.errors` and the other core modules only.
"""

from kinesis_spout.config.credentials import AwsCredentials
from kinesis_spout.config.deadletters import (
    DeadLetterDestination,
    DeadLetterHandler,
    DeadLetterSettings,
    DeadLetterTarget,
    log_dead_letter,
)
from kinesis_spout.config.flat import FlatSettings
from kinesis_spout.config.groups import (
    COORDINATION_MODES,
    MAX_RECORDS_PER_CALL_LIMIT,
    MIN_POLL_INTERVAL_S,
    InitialPosition,
    KinesisSettings,
    MetricsSettings,
    ReadingSettings,
    TrackingSettings,
    WorkerSettings,
    default_worker_id,
)
from kinesis_spout.config.names import FLAT_FIELDS
from kinesis_spout.config.options import OPTION_NAMES
from kinesis_spout.config.spout import SpoutConfig
from kinesis_spout.config.zookeeper import ZooKeeperSettings

__all__ = [
    "COORDINATION_MODES",
    "FLAT_FIELDS",
    "MAX_RECORDS_PER_CALL_LIMIT",
    "MIN_POLL_INTERVAL_S",
    "OPTION_NAMES",
    "AwsCredentials",
    "DeadLetterDestination",
    "DeadLetterHandler",
    "DeadLetterSettings",
    "DeadLetterTarget",
    "FlatSettings",
    "InitialPosition",
    "KinesisSettings",
    "MetricsSettings",
    "ReadingSettings",
    "SpoutConfig",
    "TrackingSettings",
    "WorkerSettings",
    "ZooKeeperSettings",
    "default_worker_id",
    "log_dead_letter",
]
