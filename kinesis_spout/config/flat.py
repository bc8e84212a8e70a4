"""The flat spelling of :class:`~kinesis_spout.config.SpoutConfig`: every keyword it took before its settings were
grouped, and a typed, read-only property for each, reading the group that holds it.

PURE. ``SpoutConfig(stream_name=..., app_name=..., retry_limit=0)`` and ``config.retry_limit`` keep working; the
table of which group holds which keyword is :data:`kinesis_spout.config.names.SETTINGS`. ``FlatSettings`` and
``FlatView`` are rendered from that table by ``scripts/docs_reference.py --write``: edit the table, not them.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Mapping, Sequence, TypedDict

from kinesis_spout.config.credentials import AwsCredentials
from kinesis_spout.config.deadletters import DeadLetterTarget
from kinesis_spout.config.groups import InitialPosition
from kinesis_spout.schemes import RecordScheme
from kinesis_spout.tracker import RetryBackoff

if TYPE_CHECKING:
    from kinesis_spout.config.deadletters import DeadLetterSettings
    from kinesis_spout.config.groups import (
        KinesisSettings,
        MetricsSettings,
        ReadingSettings,
        TrackingSettings,
        WorkerSettings,
    )
    from kinesis_spout.config.zookeeper import ZooKeeperSettings

__all__ = ["ConfigChanges", "FlatSettings", "FlatView"]


# BEGIN GENERATED: typed-dict (scripts/docs_reference.py --write renders it from the code)
class FlatSettings(TypedDict, total=False):
    """The flat keywords of ``SpoutConfig(...)``, each optional (a keyword left out keeps its group's value)."""

    zookeeper: str
    zookeeper_prefix: str
    zookeeper_session_timeout_s: float
    zookeeper_deadline_s: float
    zookeeper_auth: str | None
    zookeeper_world_readable: bool
    zookeeper_tls: bool
    zookeeper_tls_ca_file: str | None
    zookeeper_tls_cert_file: str | None
    zookeeper_tls_key_file: str | None
    region: str | None
    endpoint_url: str | None
    credentials: AwsCredentials | None
    initial_position: InitialPosition | Mapping[str, InitialPosition]
    initial_timestamp: datetime | None
    max_records_per_call: int
    empty_record_backoff_s: float
    max_empty_record_backoff_s: float | None
    shard_sync_interval_s: float
    checkpoint_interval_s: float
    retry_limit: int
    retry_backoff: RetryBackoff
    message_timeout_s: float | None
    max_inflight_records: int
    max_inflight_bytes: int
    prefetch_records: int
    prefetch_bytes: int
    reader_threads: int
    reliable: bool
    deaggregate: bool
    drop_foreign_user_records: bool
    scheme: RecordScheme
    dead_letter: DeadLetterTarget
    dead_letter_deadline_s: float
    metrics_port: int | None
    task_index: int
    task_count: int
    coordination: str
    worker_id: str
    lease_settle_s: float
    max_dead_letters_in_a_row: int | None
    max_dead_letter_ratio: float | None
    dead_letter_window: int | None
    min_dead_letters_in_window: int | None
    retrieval: str
    consumer_name: str | None
    subscription_renewal_s: float
# END GENERATED: typed-dict


class ConfigChanges(FlatSettings, total=False):
    """What ``SpoutConfig.replace`` takes: any flat keyword, the two names, or whole groups."""

    stream_name: str | Sequence[str]
    app_name: str
    stream_positions: tuple[tuple[str, InitialPosition], ...]
    kinesis: KinesisSettings
    reading: ReadingSettings
    tracking: TrackingSettings
    zk: ZooKeeperSettings
    dead_letters: DeadLetterSettings
    metrics: MetricsSettings
    worker: WorkerSettings

# BEGIN GENERATED: flat-view (scripts/docs_reference.py --write renders it from the code)
class FlatView:
    """The flat attributes of ``SpoutConfig``, read from its groups. Read-only (the config is frozen).

    Each is read from its group on first use and then kept in the instance (``cached_property``): the config and
    its groups are frozen, so the copy never goes stale, and a flat read in a per-record path costs what a plain
    attribute does."""

    kinesis: KinesisSettings
    reading: ReadingSettings
    tracking: TrackingSettings
    zk: ZooKeeperSettings
    dead_letters: DeadLetterSettings
    metrics: MetricsSettings
    worker: WorkerSettings

    @cached_property
    def zookeeper(self) -> str:
        """``zk.hosts`` (ZooKeeperSettings)."""
        return self.zk.hosts

    @cached_property
    def zookeeper_prefix(self) -> str:
        """``zk.prefix`` (ZooKeeperSettings)."""
        return self.zk.prefix

    @cached_property
    def zookeeper_session_timeout_s(self) -> float:
        """``zk.session_timeout_s`` (ZooKeeperSettings)."""
        return self.zk.session_timeout_s

    @cached_property
    def zookeeper_deadline_s(self) -> float:
        """``zk.deadline_s`` (ZooKeeperSettings)."""
        return self.zk.deadline_s

    @cached_property
    def zookeeper_auth(self) -> str | None:
        """``zk.auth`` (ZooKeeperSettings)."""
        return self.zk.auth

    @cached_property
    def zookeeper_world_readable(self) -> bool:
        """``zk.world_readable`` (ZooKeeperSettings)."""
        return self.zk.world_readable

    @cached_property
    def zookeeper_tls(self) -> bool:
        """``zk.tls`` (ZooKeeperSettings)."""
        return self.zk.tls

    @cached_property
    def zookeeper_tls_ca_file(self) -> str | None:
        """``zk.tls_ca_file`` (ZooKeeperSettings)."""
        return self.zk.tls_ca_file

    @cached_property
    def zookeeper_tls_cert_file(self) -> str | None:
        """``zk.tls_cert_file`` (ZooKeeperSettings)."""
        return self.zk.tls_cert_file

    @cached_property
    def zookeeper_tls_key_file(self) -> str | None:
        """``zk.tls_key_file`` (ZooKeeperSettings)."""
        return self.zk.tls_key_file

    @cached_property
    def region(self) -> str | None:
        """``kinesis.region`` (KinesisSettings)."""
        return self.kinesis.region

    @cached_property
    def endpoint_url(self) -> str | None:
        """``kinesis.endpoint_url`` (KinesisSettings)."""
        return self.kinesis.endpoint_url

    @cached_property
    def credentials(self) -> AwsCredentials | None:
        """``kinesis.credentials`` (KinesisSettings)."""
        return self.kinesis.credentials

    @cached_property
    def initial_position(self) -> InitialPosition:
        """``reading.initial_position`` (ReadingSettings)."""
        return self.reading.initial_position

    @cached_property
    def initial_timestamp(self) -> datetime | None:
        """``reading.initial_timestamp`` (ReadingSettings)."""
        return self.reading.initial_timestamp

    @cached_property
    def max_records_per_call(self) -> int:
        """``reading.max_records_per_call`` (ReadingSettings)."""
        return self.reading.max_records_per_call

    @cached_property
    def empty_record_backoff_s(self) -> float:
        """``reading.empty_record_backoff_s`` (ReadingSettings)."""
        return self.reading.empty_record_backoff_s

    @cached_property
    def max_empty_record_backoff_s(self) -> float | None:
        """``reading.max_empty_record_backoff_s`` (ReadingSettings)."""
        return self.reading.max_empty_record_backoff_s

    @cached_property
    def shard_sync_interval_s(self) -> float:
        """``reading.shard_sync_interval_s`` (ReadingSettings)."""
        return self.reading.shard_sync_interval_s

    @cached_property
    def checkpoint_interval_s(self) -> float:
        """``tracking.checkpoint_interval_s`` (TrackingSettings)."""
        return self.tracking.checkpoint_interval_s

    @cached_property
    def retry_limit(self) -> int:
        """``tracking.retry_limit`` (TrackingSettings)."""
        return self.tracking.retry_limit

    @cached_property
    def retry_backoff(self) -> RetryBackoff:
        """``tracking.retry_backoff`` (TrackingSettings)."""
        return self.tracking.retry_backoff

    @cached_property
    def message_timeout_s(self) -> float | None:
        """``tracking.message_timeout_s`` (TrackingSettings)."""
        return self.tracking.message_timeout_s

    @cached_property
    def max_inflight_records(self) -> int:
        """``tracking.max_inflight_records`` (TrackingSettings)."""
        return self.tracking.max_inflight_records

    @cached_property
    def max_inflight_bytes(self) -> int:
        """``tracking.max_inflight_bytes`` (TrackingSettings)."""
        return self.tracking.max_inflight_bytes

    @cached_property
    def prefetch_records(self) -> int:
        """``reading.prefetch_records`` (ReadingSettings)."""
        return self.reading.prefetch_records

    @cached_property
    def prefetch_bytes(self) -> int:
        """``reading.prefetch_bytes`` (ReadingSettings)."""
        return self.reading.prefetch_bytes

    @cached_property
    def reader_threads(self) -> int:
        """``reading.reader_threads`` (ReadingSettings)."""
        return self.reading.reader_threads

    @cached_property
    def reliable(self) -> bool:
        """``tracking.reliable`` (TrackingSettings)."""
        return self.tracking.reliable

    @cached_property
    def deaggregate(self) -> bool:
        """``reading.deaggregate`` (ReadingSettings)."""
        return self.reading.deaggregate

    @cached_property
    def drop_foreign_user_records(self) -> bool:
        """``reading.drop_foreign_user_records`` (ReadingSettings)."""
        return self.reading.drop_foreign_user_records

    @cached_property
    def scheme(self) -> RecordScheme:
        """``reading.scheme`` (ReadingSettings)."""
        return self.reading.scheme

    @cached_property
    def dead_letter(self) -> DeadLetterTarget:
        """``dead_letters.target`` (DeadLetterSettings)."""
        return self.dead_letters.target

    @cached_property
    def dead_letter_deadline_s(self) -> float:
        """``dead_letters.deadline_s`` (DeadLetterSettings)."""
        return self.dead_letters.deadline_s

    @cached_property
    def metrics_port(self) -> int | None:
        """``metrics.port`` (MetricsSettings)."""
        return self.metrics.port

    @cached_property
    def task_index(self) -> int:
        """``worker.task_index`` (WorkerSettings)."""
        return self.worker.task_index

    @cached_property
    def task_count(self) -> int:
        """``worker.task_count`` (WorkerSettings)."""
        return self.worker.task_count

    @cached_property
    def coordination(self) -> str:
        """``worker.coordination`` (WorkerSettings)."""
        return self.worker.coordination

    @cached_property
    def worker_id(self) -> str:
        """``worker.worker_id`` (WorkerSettings)."""
        return self.worker.worker_id

    @cached_property
    def lease_settle_s(self) -> float:
        """``worker.lease_settle_s`` (WorkerSettings)."""
        return self.worker.lease_settle_s

    @cached_property
    def max_dead_letters_in_a_row(self) -> int | None:
        """``dead_letters.max_in_a_row`` (DeadLetterSettings)."""
        return self.dead_letters.max_in_a_row

    @cached_property
    def max_dead_letter_ratio(self) -> float | None:
        """``dead_letters.max_ratio`` (DeadLetterSettings)."""
        return self.dead_letters.max_ratio

    @cached_property
    def dead_letter_window(self) -> int | None:
        """``dead_letters.window`` (DeadLetterSettings)."""
        return self.dead_letters.window

    @cached_property
    def min_dead_letters_in_window(self) -> int | None:
        """``dead_letters.min_in_window`` (DeadLetterSettings)."""
        return self.dead_letters.min_in_window

    @cached_property
    def retrieval(self) -> str:
        """``reading.retrieval`` (ReadingSettings)."""
        return self.reading.retrieval

    @cached_property
    def consumer_name(self) -> str | None:
        """``reading.consumer_name`` (ReadingSettings)."""
        return self.reading.consumer_name

    @cached_property
    def subscription_renewal_s(self) -> float:
        """``reading.subscription_renewal_s`` (ReadingSettings)."""
        return self.reading.subscription_renewal_s
# END GENERATED: flat-view
