"""The options of the ``kinesis_spout`` sink (``df.write`` / ``writeStream``), parsed once on the driver.

The connection options are the source's: ``streamName``, ``region``, ``endpointUrl`` and the ``aws*`` credentials
options, parsed by the one parser of string options (:meth:`SpoutConfig.from_options`), so a sink signs and connects
exactly as a read of the same options would. The sink's own:

- ``partitionKeyColumn`` (default ``partitionKey``): the column holding each row's partition key; or
- ``partitionKey``: one constant partition key for every row (then no column is needed), 1 to 256 UTF-16 code units
  long as Kinesis counts it (:func:`~kinesis_spout.kinesis.writing.limits.key_length`);
- ``explicitHashKeyColumn`` (default ``explicitHashKey``, used when the column exists);
- ``aggregate`` (``false``): pack user records into KPL aggregates by shard;
- ``putDeadlineS`` (``60``): how long a task keeps putting refused entries again before it fails;
- ``deadLetterPath``: a directory where rows Kinesis cannot take (null data, a bad key, over 1 MiB) are written as
  JSON lines instead of failing the task.

Spark hands a Python data source its options with lower-cased names: they match case-insensitively. PURE apart
from the configuration types and Kinesis' limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from kinesis_spout.config import SpoutConfig
from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.writing.limits import MAX_PARTITION_KEY_LENGTH, key_length

__all__ = ["SINK_OPTIONS", "SinkOptions", "parse_sink_options"]

PARTITION_KEY_COLUMN = "partitionKeyColumn"
PARTITION_KEY = "partitionKey"
EXPLICIT_HASH_KEY_COLUMN = "explicitHashKeyColumn"
AGGREGATE = "aggregate"
PUT_DEADLINE_S = "putDeadlineS"
DEAD_LETTER_PATH = "deadLetterPath"
#: The sink's own options.
SINK_OPTIONS = (PARTITION_KEY_COLUMN, PARTITION_KEY, EXPLICIT_HASH_KEY_COLUMN, AGGREGATE, PUT_DEADLINE_S,
                DEAD_LETTER_PATH)
#: The source's options a sink takes: where the stream is and how to sign.
_CONNECTION = ("streamName", "region", "endpointUrl", "awsProfile", "awsAccessKeyId", "awsSecretAccessKey",
               "awsSessionToken", "awsRoleArn", "awsRoleSessionName", "awsExternalId", "awsRoleDurationS",
               "awsStsEndpointUrl")
#: Options Spark itself passes along to a sink; they mean nothing to it.
_SPARK_OWN = ("path", "checkpointLocation", "queryName")


@dataclass(frozen=True)
class SinkOptions:
    """What a sink writes where: ``config`` holds the stream and the connection (region, endpoint, credentials;
    ``app_name`` is ``sink``, nothing is stored under it). Picklable: the writer carries it to the executors."""

    config: SpoutConfig
    partition_key_column: str = "partitionKey"
    partition_key: str | None = None
    explicit_hash_key_column: str = "explicitHashKey"
    aggregate: bool = False
    put_deadline_s: float = 60.0
    dead_letter_path: str | None = None

    @property
    def stream_name(self) -> str:
        return self.config.stream_name


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """The sink's options; ConfigError naming the option and the fix. Called on the driver by ``writer()`` and
    ``streamWriter()``, before anything is written."""
    own = {n.lower(): n for n in SINK_OPTIONS}
    connection = {n.lower(): n for n in _CONNECTION}
    spark_own = {n.lower() for n in _SPARK_OWN}
    values: dict[str, str] = {}
    conn: dict[str, str] = {}
    for raw, value in options.items():
        low = str(raw).lower()
        if low in own:
            values[own[low]] = str(value)
        elif low in connection:
            conn[connection[low]] = str(value)
        elif low not in spark_own:
            known = ", ".join(sorted((*SINK_OPTIONS, *_CONNECTION), key=str.lower))
            raise ConfigError(f"option {raw!r} is not an option of the kinesis_spout sink (read options such as "
                              f"initialPosition or appName do not apply to writes); its options are: {known}")
    if "streamName" not in conn:
        raise ConfigError("option 'streamName' is required: the stream to write to, e.g. "
                          ".option('streamName', 'enriched')")
    config = SpoutConfig.from_options({**conn, "appName": "sink"})
    deadline = _number(PUT_DEADLINE_S, values.get(PUT_DEADLINE_S, "60"))
    constant = values.get(PARTITION_KEY)
    if constant is not None and not 1 <= key_length(constant) <= MAX_PARTITION_KEY_LENGTH:
        raise ConfigError(f"option {PARTITION_KEY!r} must be 1 to {MAX_PARTITION_KEY_LENGTH} UTF-16 code units long "
                          f"(Kinesis' limit on a partition key, counted as Java counts a string's length: a character "
                          f"beyond U+FFFF, such as an emoji, counts 2), got {key_length(constant)}; use a shorter key")
    if constant is not None and PARTITION_KEY_COLUMN in values:
        raise ConfigError(f"options {PARTITION_KEY!r} (one key for every row) and {PARTITION_KEY_COLUMN!r} (a key per "
                          f"row from a column) exclude each other: set one")
    return SinkOptions(config, partition_key_column=values.get(PARTITION_KEY_COLUMN, "partitionKey"),
                       partition_key=constant,
                       explicit_hash_key_column=values.get(EXPLICIT_HASH_KEY_COLUMN, "explicitHashKey"),
                       aggregate=_flag(AGGREGATE, values.get(AGGREGATE, "false")), put_deadline_s=deadline,
                       dead_letter_path=values.get(DEAD_LETTER_PATH) or None)


def _flag(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(f"option {name!r} must be true or false, got {raw!r}")
    return lowered in ("true", "1", "yes")


def _number(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"option {name!r} must be a number of seconds above 0 (how long a task puts refused "
                          f"records again before it fails), got {raw!r}")
    return value
