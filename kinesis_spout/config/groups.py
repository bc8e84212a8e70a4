"""The groups of settings of a spout: where it reads (Kinesis), how it reads, how it tracks records, its metrics and
its place among the workers. Each is a frozen dataclass that validates itself on construction (``ConfigError``
naming the flat keyword, the group field and the string option, and what is allowed).

PURE: standard library and core modules only. :class:`~kinesis_spout.config.SpoutConfig` holds one of each.
"""

from __future__ import annotations

import enum
import os
import re
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone

from kinesis_spout.config.credentials import AwsCredentials
from kinesis_spout.config.names import fail, require_bool, require_float, require_int, require_text
from kinesis_spout.schemes import RawScheme, RecordScheme
from kinesis_spout.tracker import RetryBackoff

__all__ = ["COORDINATION_MODES", "MAX_RECORDS_PER_CALL_LIMIT", "MIN_POLL_INTERVAL_S", "InitialPosition",
           "KinesisSettings", "MetricsSettings", "ReadingSettings", "TrackingSettings", "WorkerSettings",
           "default_worker_id", "parse_position"]

#: Kinesis allows 5 GetRecords calls per second per shard; a reader never polls a shard faster than this.
MIN_POLL_INTERVAL_S = 0.2
#: How records reach the spout (``ReadingSettings.retrieval``).
RETRIEVALS = ("polling", "fanout")
#: Kinesis returns at most 10,000 records per GetRecords call.
MAX_RECORDS_PER_CALL_LIMIT = 10_000
#: ``static``: a spout reads the shards of its ``task_index`` of ``task_count``. ``leases``: the workers of an app
#: share the shards through ZooKeeper leases (see :mod:`kinesis_spout.coordination.leases`). ``auto`` (the default):
#: leases when the checkpoints are in ZooKeeper, static otherwise (see :meth:`WorkerSettings.mode`).
COORDINATION_MODES = ("auto", "static", "leases")


class InitialPosition(str, enum.Enum):
    """Where a shard without a checkpoint starts."""

    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"


def parse_position(raw: str) -> InitialPosition:
    """``"trim-horizon"``, ``"LATEST"``... as an :class:`InitialPosition`; ``ConfigError`` listing the allowed ones."""
    try:
        return InitialPosition(raw.strip().upper().replace("-", "_"))
    except ValueError:
        allowed = ", ".join(p.value for p in InitialPosition)
        raise fail("reading", "initial_position", f"must be one of {allowed}, got {raw!r}") from None


def default_worker_id() -> str:
    """``host:pid`` of this process: the default ``worker_id``, unique per live worker (two spouts of one app and
    stream in one process with leases need a ``worker_id`` each)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def check_endpoint_url(url: object) -> None:
    """Refuse an ``endpoint_url`` that boto3 would refuse only at ``open()`` (with a bare ``ValueError``): one
    without ``http://`` or ``https://``, or without a host. The error names the setting and the URL to write.
    Who calls: :class:`KinesisSettings` on construction."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.strip():
        raise fail("kinesis", "endpoint_url", f"must be a URL such as 'http://localhost:4567', or None for AWS, "
                                              f"got {url!r}")
    env = "the examples and the kinesis-spout command read it from $KINESIS_SPOUT_ENDPOINT_URL"
    parts = urlsplit(url.strip())
    if "://" not in url:
        host = url.strip().split("/", 1)[0].split(":", 1)[0]
        scheme = "https" if host.endswith((".amazonaws.com", ".amazonaws.com.cn")) else "http"
        raise fail("kinesis", "endpoint_url", f"{url!r} has no scheme: write {f'{scheme}://{url.strip()}'!r} "
                                              f"(boto3 needs http:// or https://; {env})")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise fail("kinesis", "endpoint_url", f"{url!r} must be an http:// or https:// URL with a host, such as "
                                              f"'http://localhost:4567' ({env})")


@dataclass(frozen=True)
class KinesisSettings:
    """Where the stream is (``SpoutConfig.kinesis``): ``region`` (None: the AWS default chain, else us-east-1),
    ``endpoint_url`` (emulators, VPC endpoints; None: AWS) and ``credentials`` (an
    :class:`~kinesis_spout.AwsCredentials` giving this spout's clients their own identity; None: boto's default
    chain; secrets never show in ``repr()`` or errors)."""

    region: str | None = None
    endpoint_url: str | None = None
    credentials: AwsCredentials | None = None

    def __post_init__(self) -> None:
        if self.endpoint_url is not None:
            check_endpoint_url(self.endpoint_url)
        if self.credentials is not None and not isinstance(self.credentials, AwsCredentials):
            raise fail("kinesis", "credentials", f"must be a kinesis_spout.AwsCredentials or None, got "
                                                 f"{type(self.credentials).__name__}")


@dataclass(frozen=True)
class ReadingSettings:
    """How shards are read (``SpoutConfig.reading``): where a shard without a checkpoint starts, GetRecords sizes
    and pacing, the read-ahead buffer (per shard), the reader pool, and how records are decoded.

    ``drop_foreign_user_records`` drops the user records of an aggregate whose hash keys lie outside the shard's
    range (a KPL with a stale shard map put them there, and puts them again in their own shards), as KCL does.
    False for producers that aggregate user records of several shards into one Kinesis record and put them nowhere
    else. Keep it the same for the life of an app: changed between runs, the foreign user records around the stored
    checkpoint may be lost (a checkpoint taken after the last kept user record finishes its aggregate) or delivered
    again, and a Spark replay of a batch read under the other setting yields other rows than the original batch.
    """

    initial_position: InitialPosition = InitialPosition.LATEST
    initial_timestamp: datetime | None = None
    max_records_per_call: int = 10_000
    empty_record_backoff_s: float = 1.0
    # an idle shard's pause doubles up to this (None: off; below empty_record_backoff_s: no growth). 2 s halves the
    # calls of an idle shard at the default pause, and a shard that wakes up waits 2 s at most for its first read:
    # chosen with python -m benchmarks.idle_polling (docs/guides/spout.md)
    max_empty_record_backoff_s: float | None = 2.0
    shard_sync_interval_s: float = 10.0
    prefetch_records: int = 20_000
    prefetch_bytes: int = 32 << 20
    reader_threads: int = 8
    deaggregate: bool = True
    drop_foreign_user_records: bool = True
    scheme: RecordScheme = field(default_factory=RawScheme)
    # how records reach the spout: "polling" (GetRecords) or "fanout" (an enhanced fan-out consumer named
    # consumer_name, app_name when None, subscribed to each shard and renewed every subscription_renewal_s)
    retrieval: str = "polling"
    consumer_name: str | None = None
    subscription_renewal_s: float = 300.0

    def __post_init__(self) -> None:
        if isinstance(self.initial_position, str) and not isinstance(self.initial_position, InitialPosition):
            object.__setattr__(self, "initial_position", parse_position(self.initial_position))
        if not isinstance(self.initial_position, InitialPosition):
            raise fail("reading", "initial_position", f"must be an InitialPosition, got {self.initial_position!r}")
        if self.initial_position is InitialPosition.AT_TIMESTAMP:
            if not isinstance(self.initial_timestamp, datetime):
                raise fail("reading", "initial_position", "AT_TIMESTAMP needs initial_timestamp (a datetime)")
            if self.initial_timestamp.tzinfo is None:
                object.__setattr__(self, "initial_timestamp", self.initial_timestamp.replace(tzinfo=timezone.utc))
        elif self.initial_timestamp is not None:
            raise fail("reading", "initial_timestamp", "is only used with initial_position AT_TIMESTAMP; "
                                                       f"initial_position is {self.initial_position.value}")
        require_int("reading", "max_records_per_call", self.max_records_per_call, 1, MAX_RECORDS_PER_CALL_LIMIT)
        require_float("reading", "empty_record_backoff_s", self.empty_record_backoff_s, MIN_POLL_INTERVAL_S, 3600.0)
        if self.max_empty_record_backoff_s is not None:  # None: off; below empty_record_backoff_s: no growth
            require_float("reading", "max_empty_record_backoff_s", self.max_empty_record_backoff_s,
                          MIN_POLL_INTERVAL_S, 3600.0)
        require_float("reading", "shard_sync_interval_s", self.shard_sync_interval_s, 0.2, 86400.0)
        require_int("reading", "prefetch_records", self.prefetch_records, 1, 10_000_000)
        require_int("reading", "prefetch_bytes", self.prefetch_bytes, 1, 1 << 40)
        require_int("reading", "reader_threads", self.reader_threads, 0, 1024)
        require_bool("reading", "deaggregate", self.deaggregate)
        require_bool("reading", "drop_foreign_user_records", self.drop_foreign_user_records)
        if self.retrieval not in RETRIEVALS:
            raise fail("reading", "retrieval", f"must be one of {', '.join(repr(r) for r in RETRIEVALS)} ('polling' "
                                               f"reads with GetRecords, 'fanout' through an enhanced fan-out "
                                               f"consumer), got {self.retrieval!r}")
        if self.consumer_name is not None:
            require_text("reading", "consumer_name", self.consumer_name)
            if not re.fullmatch(r"[a-zA-Z0-9_.-]{1,128}", self.consumer_name):
                raise fail("reading", "consumer_name", "must be 1 to 128 letters, digits, '_', '.' or '-' (a Kinesis "
                                                       f"consumer name), got {self.consumer_name!r}")
        require_float("reading", "subscription_renewal_s", self.subscription_renewal_s, 0.5, 300.0)
        if not callable(self.scheme) or not isinstance(getattr(self.scheme, "fields", None), tuple):
            raise fail("reading", "scheme", f"must be a callable with a 'fields' tuple (see kinesis_spout.schemes), "
                                            f"got {self.scheme!r}")


@dataclass(frozen=True)
class TrackingSettings:
    """How emitted records are tracked (``SpoutConfig.tracking``), per shard: acks (``reliable``; False acks every
    record on emit), retries of failed or timed-out records, in-flight limits, and how often the safe checkpoint is
    written (``checkpoint_interval_s``; 0: at every advance)."""

    reliable: bool = True
    retry_limit: int = 3
    retry_backoff: RetryBackoff = field(default_factory=RetryBackoff)
    message_timeout_s: float | None = 30.0
    max_inflight_records: int = 10_000
    max_inflight_bytes: int = 64 << 20
    checkpoint_interval_s: float = 1.0

    def __post_init__(self) -> None:
        require_float("tracking", "checkpoint_interval_s", self.checkpoint_interval_s, 0.0, 3600.0)
        require_int("tracking", "retry_limit", self.retry_limit, 0, 1_000_000)
        backoff = self.retry_backoff
        if not isinstance(backoff, RetryBackoff):
            raise fail("tracking", "retry_backoff", f"must be a RetryBackoff, got {backoff!r}")
        require_float("tracking", "retry_backoff.initial_s", backoff.initial_s, 0.0, 3600.0)
        require_float("tracking", "retry_backoff.multiplier", backoff.multiplier, 1.0, 100.0)
        require_float("tracking", "retry_backoff.max_s", backoff.max_s, backoff.initial_s, 86400.0)
        if self.message_timeout_s is not None:
            require_float("tracking", "message_timeout_s", self.message_timeout_s, 0.001, 86400.0)
        require_int("tracking", "max_inflight_records", self.max_inflight_records, 1, 100_000_000)
        require_int("tracking", "max_inflight_bytes", self.max_inflight_bytes, 1, 1 << 40)
        require_bool("tracking", "reliable", self.reliable)


@dataclass(frozen=True)
class MetricsSettings:
    """Metrics (``SpoutConfig.metrics``): ``port`` serves Prometheus metrics on that port from ``open()`` (0: any
    free port; None: off); it needs the ``metrics`` extra (prometheus-client)."""

    port: int | None = None

    def __post_init__(self) -> None:
        if self.port is not None:
            require_int("metrics", "port", self.port, 0, 65535)


@dataclass(frozen=True)
class WorkerSettings:
    """This worker among the app's (``SpoutConfig.worker``): ZooKeeper leases (``coordination="leases"``: the
    workers running the same configuration share the shards) or Storm's static split (``"static"``: this worker
    reads the shards of its ``task_index`` of ``task_count``); ``"auto"``, the default, is leases where the
    checkpoints are in ZooKeeper and static otherwise (:meth:`mode`). ``worker_id`` is recorded as the owner of
    checkpoints and leases (unique per live worker). ``lease_settle_s`` (leases): a worker that just joined takes at
    most 16 leases until the app's live workers have not changed for this long (at most 10 s after it joined), so
    that workers started together each take their own share instead of the first to look taking the shares of
    those not registered yet and giving them back; 0 takes its share at once."""

    coordination: str = "auto"
    task_index: int = 0
    task_count: int = 1
    worker_id: str = field(default_factory=default_worker_id)
    lease_settle_s: float = 2.0

    def __post_init__(self) -> None:
        require_int("worker", "task_count", self.task_count, 1, 100_000)
        require_int("worker", "task_index", self.task_index, 0, self.task_count - 1)
        if self.coordination not in COORDINATION_MODES:
            raise fail("worker", "coordination", f"must be one of {', '.join(COORDINATION_MODES)}, got "
                                                 f"{self.coordination!r}")
        if self.coordination == "leases" and self.task_count != 1:
            raise fail("worker", "coordination", "'leases' shares the shards among however many workers run; it "
                                                 "does not go with task_count > 1 (Storm's static split): set one "
                                                 "or the other")
        require_text("worker", "worker_id", self.worker_id)
        require_float("worker", "lease_settle_s", self.lease_settle_s, 0.0, 60.0)

    def mode(self, zookeeper_store: bool) -> str:
        """The coordination this worker uses, ``"static"`` or ``"leases"``, given whether its checkpoint store is
        in ZooKeeper (where lease workers meet). ``"auto"`` is leases with a ZooKeeper store and ``task_count`` 1,
        static otherwise: an in-memory store has no other worker to share with, and ``task_count`` > 1 asks for
        Storm's static split."""
        if self.coordination != "auto":
            return self.coordination
        return "leases" if zookeeper_store and self.task_count == 1 else "static"
