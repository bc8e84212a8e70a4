"""SpoutConfig: the frozen, validated configuration of a spout, and the one parser of string options.

Every option has a Python name (``checkpoint_interval_s``) and a string option name (``checkpointIntervalS``)
used by ``spark.readStream.option(...)`` and the command line; :meth:`SpoutConfig.from_options` is the only place
strings become values.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Union

from kinesis_spout.errors import ConfigError
from kinesis_spout.kinesis.credentials import AwsCredentials
from kinesis_spout.records import Record
from kinesis_spout.schemes import SCHEMES, RawScheme, RecordScheme
from kinesis_spout.tracker import RetryBackoff

if TYPE_CHECKING:
    from kinesis_spout.deadletters.base import DeadLetterDestination

log = logging.getLogger("kinesis_spout")

#: Called with the record and the reason when a record's retries ran out (or it cannot be decoded). It runs on the
#: spout's dead-letter thread; the record is done when it returns, and retried with backoff when it raises.
DeadLetterHandler = Callable[[Record, str], None]
#: What ``SpoutConfig.dead_letter`` takes: a handler, or a destination of :mod:`kinesis_spout.deadletters`.
DeadLetterTarget = Union[DeadLetterHandler, "DeadLetterDestination"]

#: Kinesis allows 5 GetRecords calls per second per shard; a reader never polls a shard faster than this.
MIN_POLL_INTERVAL_S = 0.2
#: Kinesis returns at most 10,000 records per GetRecords call.
MAX_RECORDS_PER_CALL_LIMIT = 10_000


class InitialPosition(str, enum.Enum):
    """Where a shard without a checkpoint starts."""

    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"


def log_dead_letter(record: Record, reason: str) -> None:
    """The default dead-letter handler: log the record's id and size at ERROR level."""
    log.error("dead letter %s (%d bytes, partition key %r): %s", record.message_id, len(record.data),
              record.partition_key, reason)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


#: ``static``: a spout reads the shards of its ``task_index`` of ``task_count``. ``leases``: the workers of an app
#: share the shards through ZooKeeper leases (see :mod:`kinesis_spout.coordination.leases`).
COORDINATION_MODES = ("static", "leases")


@dataclass(frozen=True)
class SpoutConfig:
    """Configuration of a :class:`~kinesis_spout.KinesisSpout`. Validated on construction (``ConfigError``).

    Per-shard limits (``max_inflight_*``, ``prefetch_*``) apply to each shard the spout owns.

    ``dead_letter`` is a handler ``(record, reason) -> None`` or a destination of :mod:`kinesis_spout.deadletters`;
    a dead-lettered record is done only once its dead letter was written, failed writes are retried with backoff,
    and once they kept failing for ``dead_letter_deadline_s`` the spout raises a ``DeadLetterError``.
    ``credentials`` (optional, :class:`~kinesis_spout.AwsCredentials`) give this spout's Kinesis clients their own
    AWS identity (profile, static keys, a role to assume); None: boto's default chain. Secrets never show in
    ``repr()`` or errors.
    ``metrics_port`` (optional) serves Prometheus metrics on that port from ``open()`` (0: any free port); it
    needs the ``metrics`` extra (prometheus-client).
    """

    stream_name: str
    app_name: str
    zookeeper: str = "127.0.0.1:2181"
    zookeeper_prefix: str = "/kinesis_spout"
    zookeeper_session_timeout_s: float = 10.0
    zookeeper_deadline_s: float = 60.0
    zookeeper_auth: str | None = field(default=None, repr=False)
    zookeeper_world_readable: bool = True
    zookeeper_tls: bool = False
    zookeeper_tls_ca_file: str | None = None
    zookeeper_tls_cert_file: str | None = None
    zookeeper_tls_key_file: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    credentials: AwsCredentials | None = None
    initial_position: InitialPosition = InitialPosition.LATEST
    initial_timestamp: datetime | None = None
    max_records_per_call: int = 10_000
    empty_record_backoff_s: float = 1.0
    max_empty_record_backoff_s: float | None = None
    shard_sync_interval_s: float = 10.0
    checkpoint_interval_s: float = 1.0
    retry_limit: int = 3
    retry_backoff: RetryBackoff = field(default_factory=RetryBackoff)
    message_timeout_s: float | None = 30.0
    max_inflight_records: int = 10_000
    max_inflight_bytes: int = 64 << 20
    prefetch_records: int = 20_000
    prefetch_bytes: int = 32 << 20
    reader_threads: int = 8
    reliable: bool = True
    deaggregate: bool = True
    # drop the user records of an aggregate whose hash keys lie outside the shard's range (a KPL with a stale shard
    # map put them there, and puts them again in their own shards), as KCL does. False for producers that aggregate
    # user records of several shards into one Kinesis record and put them nowhere else. Keep it the same for the
    # life of an app: changed between runs, the foreign user records around the stored checkpoint may be lost (a
    # checkpoint taken after the last kept user record finishes its aggregate) or delivered again, and a Spark replay
    # of a batch read under the other setting yields other rows than the original batch
    drop_foreign_user_records: bool = True
    scheme: RecordScheme = field(default_factory=RawScheme)
    dead_letter: DeadLetterTarget = log_dead_letter
    dead_letter_deadline_s: float = 60.0
    metrics_port: int | None = None
    task_index: int = 0
    task_count: int = 1
    coordination: str = "static"
    worker_id: str = field(default_factory=default_worker_id)

    def __post_init__(self) -> None:
        _require_text("stream_name", self.stream_name)
        _require_text("app_name", self.app_name)
        for name in ("stream_name", "app_name"):
            if "/" in getattr(self, name):
                raise ConfigError(f"{name} must not contain '/', got {getattr(self, name)!r}")
        _require_text("zookeeper", self.zookeeper)
        if not self.zookeeper_prefix.startswith("/") or self.zookeeper_prefix.endswith("/") and \
                self.zookeeper_prefix != "/":
            raise ConfigError(f"zookeeper_prefix must be an absolute path without a trailing '/', "
                              f"e.g. '/kinesis_spout', got {self.zookeeper_prefix!r}")
        if isinstance(self.initial_position, str) and not isinstance(self.initial_position, InitialPosition):
            object.__setattr__(self, "initial_position", _parse_position(self.initial_position))
        if not isinstance(self.initial_position, InitialPosition):
            raise ConfigError(f"initial_position must be an InitialPosition, got {self.initial_position!r}")
        if self.initial_position is InitialPosition.AT_TIMESTAMP:
            if not isinstance(self.initial_timestamp, datetime):
                raise ConfigError("initial_position AT_TIMESTAMP needs initial_timestamp (a datetime)")
            if self.initial_timestamp.tzinfo is None:
                object.__setattr__(self, "initial_timestamp", self.initial_timestamp.replace(tzinfo=timezone.utc))
        elif self.initial_timestamp is not None:
            raise ConfigError("initial_timestamp is only used with initial_position AT_TIMESTAMP; "
                              f"initial_position is {self.initial_position.value}")
        _require_int("max_records_per_call", self.max_records_per_call, 1, MAX_RECORDS_PER_CALL_LIMIT)
        _require_float("zookeeper_session_timeout_s", self.zookeeper_session_timeout_s, 1.0, 3600.0)
        _require_float("zookeeper_deadline_s", self.zookeeper_deadline_s, 1.0, 86400.0)
        if self.zookeeper_auth is not None:
            user, sep, password = self.zookeeper_auth.partition(":") if isinstance(self.zookeeper_auth, str) \
                else ("", "", "")
            if not sep or not user.strip() or not password:  # never echo the value: it holds a password
                raise ConfigError("zookeeper_auth must be 'user:password' (ZooKeeper digest auth) with a "
                                  "non-empty user and password; the value given is not shown")
        for name in ("zookeeper_world_readable", "zookeeper_tls"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name in ("zookeeper_tls_ca_file", "zookeeper_tls_cert_file", "zookeeper_tls_key_file"):
            value = getattr(self, name)
            if value is None:
                continue
            if not self.zookeeper_tls:
                raise ConfigError(f"{name} is set but zookeeper_tls is False; set zookeeper_tls=True to use TLS")
            if not isinstance(value, str) or not os.path.isfile(value):
                raise ConfigError(f"{name} must name a readable PEM file, got {value!r}")
        if (self.zookeeper_tls_cert_file is None) != (self.zookeeper_tls_key_file is None):
            raise ConfigError("zookeeper_tls_cert_file and zookeeper_tls_key_file go together (a client "
                              "certificate and its key); set both or neither")
        _require_float("empty_record_backoff_s", self.empty_record_backoff_s, MIN_POLL_INTERVAL_S, 3600.0)
        if self.max_empty_record_backoff_s is not None:
            _require_float("max_empty_record_backoff_s", self.max_empty_record_backoff_s,
                           self.empty_record_backoff_s, 3600.0)
        _require_float("checkpoint_interval_s", self.checkpoint_interval_s, 0.0, 3600.0)
        _require_float("shard_sync_interval_s", self.shard_sync_interval_s, 0.2, 86400.0)
        _require_int("retry_limit", self.retry_limit, 0, 1_000_000)
        if not isinstance(self.retry_backoff, RetryBackoff):
            raise ConfigError(f"retry_backoff must be a RetryBackoff, got {self.retry_backoff!r}")
        _require_float("retry_backoff.initial_s", self.retry_backoff.initial_s, 0.0, 3600.0)
        _require_float("retry_backoff.multiplier", self.retry_backoff.multiplier, 1.0, 100.0)
        _require_float("retry_backoff.max_s", self.retry_backoff.max_s, self.retry_backoff.initial_s, 86400.0)
        if self.message_timeout_s is not None:
            _require_float("message_timeout_s", self.message_timeout_s, 0.001, 86400.0)
        _require_int("max_inflight_records", self.max_inflight_records, 1, 100_000_000)
        _require_int("max_inflight_bytes", self.max_inflight_bytes, 1, 1 << 40)
        _require_int("prefetch_records", self.prefetch_records, 1, 10_000_000)
        _require_int("prefetch_bytes", self.prefetch_bytes, 1, 1 << 40)
        _require_int("reader_threads", self.reader_threads, 0, 1024)
        for name in ("reliable", "deaggregate", "drop_foreign_user_records"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not callable(self.scheme) or not isinstance(getattr(self.scheme, "fields", None), tuple):
            raise ConfigError(f"scheme must be a callable with a 'fields' tuple (see kinesis_spout.schemes), "
                              f"got {self.scheme!r}")
        if not callable(self.dead_letter) and not callable(getattr(self.dead_letter, "open_writer", None)):
            raise ConfigError(f"dead_letter must be a callable (record, reason) -> None or a destination such as "
                              f"kinesis_spout.deadletters.KinesisDeadLetters, got {self.dead_letter!r}")
        _require_float("dead_letter_deadline_s", self.dead_letter_deadline_s, 1.0, 86400.0)
        if self.credentials is not None and not isinstance(self.credentials, AwsCredentials):
            raise ConfigError(f"credentials must be a kinesis_spout.AwsCredentials or None, got "
                              f"{type(self.credentials).__name__}")
        if self.metrics_port is not None:
            _require_int("metrics_port", self.metrics_port, 0, 65535)
        _require_int("task_count", self.task_count, 1, 100_000)
        _require_int("task_index", self.task_index, 0, self.task_count - 1)
        if self.coordination not in COORDINATION_MODES:
            raise ConfigError(f"coordination must be one of {', '.join(COORDINATION_MODES)}, got "
                              f"{self.coordination!r}")
        if self.coordination == "leases" and self.task_count != 1:
            raise ConfigError("coordination 'leases' shares the shards among however many workers run; it does not "
                              "go with task_count > 1 (Storm's static split): set one or the other")
        _require_text("worker_id", self.worker_id)

    @property
    def checkpoint_path(self) -> str:
        """The ZooKeeper path under which this app's checkpoints of this stream live."""
        base = "" if self.zookeeper_prefix == "/" else self.zookeeper_prefix
        return f"{base}/{self.app_name}/{self.stream_name}/checkpoints"

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, also_known: Iterable[str] = (),
                     **overrides: Any) -> "SpoutConfig":
        """Build a config from string options (camelCase names, see :data:`OPTION_NAMES`).

        Unknown option names are an error that lists the known ones (with ``also_known``: options the caller
        takes out before, such as the Spark source's own). A bad value is an error that names the option as it
        was given. ``overrides`` are Python values for fields that have no string form (``dead_letter``, custom
        ``scheme``).
        """
        values: dict[str, Any] = {}
        backoff: dict[str, float] = {}
        aws: dict[str, Any] = {}
        given: dict[str, str] = {}
        for option, raw in options.items():
            name = OPTION_NAMES.get(option) or OPTION_NAMES.get(_camel(option))
            if name is None:
                known = sorted({*OPTION_NAMES, *also_known}, key=str.lower)
                raise ConfigError(f"unknown option {option!r}; known options: {', '.join(known)}")
            given.setdefault(name.split(".", 1)[0], option)
            if name.startswith("retry_backoff."):
                backoff[name.split(".", 1)[1]] = _to_float(option, raw)
            elif name.startswith("credentials."):
                aws[name.split(".", 1)[1]] = _convert(name, option, raw)
            else:
                values[name] = _convert(name, option, raw)
        if backoff:
            try:
                values["retry_backoff"] = RetryBackoff(**backoff)
            except ConfigError as exc:
                names = ", ".join(repr(o) for o in options if (OPTION_NAMES.get(o) or OPTION_NAMES.get(_camel(o))
                                                              or "").startswith("retry_backoff."))
                raise ConfigError(f"option {names}: {exc}") from exc
        if aws:
            try:
                values["credentials"] = AwsCredentials(**aws)
            except ConfigError as exc:  # name the options as typed: AwsCredentials speaks of its fields
                text = str(exc)
                typed = {OPTION_NAMES.get(o) or OPTION_NAMES.get(_camel(o)): o for o in options}
                for option, target in OPTION_NAMES.items():
                    if target.startswith("credentials."):
                        text = text.replace(target, f"option {typed.get(target, option)!r}")
                raise ConfigError(text) from exc
        for key in ("stream_name", "app_name"):
            if key not in values and key not in overrides:
                raise ConfigError(f"option {_camel(key)!r} is required")
        try:
            return cls(**{**values, **overrides})
        except ConfigError as exc:  # the field's check speaks of the field: name the option the user typed
            text = str(exc)
            for field_name, option in given.items():
                spoken = "RetryBackoff" if field_name == "retry_backoff" else field_name
                if text.startswith(f"{spoken} ") or text.startswith(f"{spoken}."):
                    raise ConfigError(f"option {option!r}: {text}") from exc
            raise


def _camel(name: str) -> str:
    head, *rest = name.replace(".", "_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_STRING_FIELDS = [f.name for f in fields(SpoutConfig)
                  if f.name not in ("retry_backoff", "dead_letter", "credentials")]
#: String option name -> SpoutConfig field (``retry_backoff.*`` for the backoff's own fields).
OPTION_NAMES: dict[str, str] = {_camel(n): n for n in _STRING_FIELDS}
OPTION_NAMES.update({"retryBackoffInitialS": "retry_backoff.initial_s",
                     "retryBackoffMultiplier": "retry_backoff.multiplier",
                     "retryBackoffMaxS": "retry_backoff.max_s"})
#: the fields of :class:`AwsCredentials`, as ``aws*`` options (``awsProfile``, ``awsRoleArn``...)
OPTION_NAMES.update({"awsProfile": "credentials.profile",
                     "awsAccessKeyId": "credentials.access_key_id",
                     "awsSecretAccessKey": "credentials.secret_access_key",
                     "awsSessionToken": "credentials.session_token",
                     "awsRoleArn": "credentials.role_arn",
                     "awsRoleSessionName": "credentials.role_session_name",
                     "awsExternalId": "credentials.external_id",
                     "awsRoleDurationS": "credentials.role_duration_s",
                     "awsStsEndpointUrl": "credentials.sts_endpoint_url"})

_INT_FIELDS = {"credentials.role_duration_s", "max_records_per_call", "retry_limit", "max_inflight_records",
               "max_inflight_bytes", "prefetch_records", "reader_threads", "prefetch_bytes", "task_index", "task_count"}
_FLOAT_FIELDS = {"zookeeper_session_timeout_s", "zookeeper_deadline_s", "empty_record_backoff_s",
                 "checkpoint_interval_s", "shard_sync_interval_s", "dead_letter_deadline_s"}
_BOOL_FIELDS = {"reliable", "zookeeper_world_readable", "zookeeper_tls", "deaggregate",
                "drop_foreign_user_records"}


def _convert(name: str, option: str, raw: str) -> Any:
    if not isinstance(raw, str):
        return raw
    if name in _INT_FIELDS:
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"option {option!r} must be a whole number, got {raw!r}") from None
    if name in _FLOAT_FIELDS:
        return _to_float(option, raw)
    if name in ("message_timeout_s", "max_empty_record_backoff_s"):
        return None if raw.strip().lower() in ("", "none", "off") else _to_float(option, raw)
    if name == "metrics_port":
        if raw.strip().lower() in ("", "none", "off"):
            return None
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"option {option!r} must be a port number (0 for any free port) or 'none', "
                              f"got {raw!r}") from None
    if name in _BOOL_FIELDS:
        lowered = raw.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"option {option!r} must be true or false, got {raw!r}")
        return lowered in ("true", "1", "yes")
    if name == "initial_position":
        try:
            return _parse_position(raw)
        except ConfigError as exc:
            raise ConfigError(f"option {option!r}: {exc}") from None
    if name == "initial_timestamp":
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"option {option!r} must be an ISO-8601 time such as 2026-01-31T12:00:00Z, "
                              f"got {raw!r}") from None
    if name == "scheme":
        scheme = SCHEMES.get(raw.strip().lower())
        if scheme is None:
            raise ConfigError(f"option {option!r} must be one of {', '.join(SCHEMES)}, got {raw!r}")
        return scheme()
    return raw


def _parse_position(raw: str) -> InitialPosition:
    try:
        return InitialPosition(raw.strip().upper().replace("-", "_"))
    except ValueError:
        allowed = ", ".join(p.value for p in InitialPosition)
        raise ConfigError(f"initial_position must be one of {allowed}, got {raw!r}") from None


def _to_float(option: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"option {option!r} must be a number, got {raw!r}") from None


def _require_text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")


def _require_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name} must be a whole number from {low:,} to {high:,}, got {value!r}")


def _require_float(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"{name} must be a number from {low:g} to {high:g}, got {value!r}")
