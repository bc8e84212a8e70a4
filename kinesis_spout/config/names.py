"""The names of every setting, and the checks the groups share: one table from each flat ``SpoutConfig`` keyword
(``zookeeper_session_timeout_s``) to its group and field (``zk`` / ``ZooKeeperSettings.session_timeout_s``), and
from there to its string option (``zookeeperSessionTimeoutS``).

PURE: standard library and :mod:`kinesis_spout.errors` only. A failed check raises a ``ConfigError`` that starts
with the flat keyword (the name most code and every string option use) and ends with the group field and the
option, so the same message helps whichever spelling the caller used; the text between says what is allowed.
"""

from __future__ import annotations

from typing import Any

from kinesis_spout.errors import ConfigError

__all__ = ["FLAT_FIELDS", "GROUP_CLASSES", "camel", "fail", "flat_name", "option_of", "require_bool",
           "require_float", "require_int", "require_text", "where"]

#: ``SpoutConfig`` attribute of each group -> the group's class name (for messages).
GROUP_CLASSES: dict[str, str] = {
    "kinesis": "KinesisSettings",
    "reading": "ReadingSettings",
    "tracking": "TrackingSettings",
    "zk": "ZooKeeperSettings",
    "dead_letters": "DeadLetterSettings",
    "metrics": "MetricsSettings",
    "worker": "WorkerSettings",
}

#: Flat ``SpoutConfig`` keyword -> (group attribute, field of the group). ``stream_name`` and ``app_name`` are
#: ``SpoutConfig``'s own fields, in no group.
FLAT_FIELDS: dict[str, tuple[str, str]] = {
    "zookeeper": ("zk", "hosts"),
    "zookeeper_prefix": ("zk", "prefix"),
    "zookeeper_session_timeout_s": ("zk", "session_timeout_s"),
    "zookeeper_deadline_s": ("zk", "deadline_s"),
    "zookeeper_auth": ("zk", "auth"),
    "zookeeper_world_readable": ("zk", "world_readable"),
    "zookeeper_tls": ("zk", "tls"),
    "zookeeper_tls_ca_file": ("zk", "tls_ca_file"),
    "zookeeper_tls_cert_file": ("zk", "tls_cert_file"),
    "zookeeper_tls_key_file": ("zk", "tls_key_file"),
    "region": ("kinesis", "region"),
    "endpoint_url": ("kinesis", "endpoint_url"),
    "credentials": ("kinesis", "credentials"),
    "initial_position": ("reading", "initial_position"),
    "initial_timestamp": ("reading", "initial_timestamp"),
    "max_records_per_call": ("reading", "max_records_per_call"),
    "empty_record_backoff_s": ("reading", "empty_record_backoff_s"),
    "max_empty_record_backoff_s": ("reading", "max_empty_record_backoff_s"),
    "shard_sync_interval_s": ("reading", "shard_sync_interval_s"),
    "checkpoint_interval_s": ("tracking", "checkpoint_interval_s"),
    "retry_limit": ("tracking", "retry_limit"),
    "retry_backoff": ("tracking", "retry_backoff"),
    "message_timeout_s": ("tracking", "message_timeout_s"),
    "max_inflight_records": ("tracking", "max_inflight_records"),
    "max_inflight_bytes": ("tracking", "max_inflight_bytes"),
    "prefetch_records": ("reading", "prefetch_records"),
    "prefetch_bytes": ("reading", "prefetch_bytes"),
    "reader_threads": ("reading", "reader_threads"),
    "reliable": ("tracking", "reliable"),
    "deaggregate": ("reading", "deaggregate"),
    "drop_foreign_user_records": ("reading", "drop_foreign_user_records"),
    "scheme": ("reading", "scheme"),
    "dead_letter": ("dead_letters", "target"),
    "dead_letter_deadline_s": ("dead_letters", "deadline_s"),
    "metrics_port": ("metrics", "port"),
    "task_index": ("worker", "task_index"),
    "task_count": ("worker", "task_count"),
    "coordination": ("worker", "coordination"),
    "worker_id": ("worker", "worker_id"),
    "max_dead_letters_in_a_row": ("dead_letters", "max_in_a_row"),
    "max_dead_letter_ratio": ("dead_letters", "max_ratio"),
    "dead_letter_window": ("dead_letters", "window"),
    "min_dead_letters_in_window": ("dead_letters", "min_in_window"),
    "retrieval": ("reading", "retrieval"),
    "consumer_name": ("reading", "consumer_name"),
    "subscription_renewal_s": ("reading", "subscription_renewal_s"),
}

_FLAT_OF: dict[tuple[str, str], str] = {target: flat for flat, target in FLAT_FIELDS.items()}


def camel(name: str) -> str:
    """The string option name of a flat keyword: ``checkpoint_interval_s`` -> ``checkpointIntervalS``."""
    head, *rest = name.replace(".", "_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def flat_name(group: str, field: str) -> str:
    """The flat ``SpoutConfig`` keyword of a group's field (``field`` itself for ``SpoutConfig``'s own fields)."""
    return _FLAT_OF.get((group, field), field)


def option_of(flat: str) -> str:
    """How the setting is spelled as string options, for messages."""
    if flat == "credentials":
        return "options awsProfile, awsAccessKeyId, awsRoleArn... (see OPTION_NAMES)"
    if flat == "retry_backoff":
        return "options retryBackoffInitialS, retryBackoffMultiplier, retryBackoffMaxS"
    if flat == "dead_letter":
        return "Python only, no string option"
    return f"option {camel(flat)!r}"


def where(group: str, field: str) -> str:
    """``"ZooKeeperSettings.session_timeout_s, option 'zookeeperSessionTimeoutS'"``: the other spellings."""
    return f"{GROUP_CLASSES.get(group, 'SpoutConfig')}.{field}, {option_of(flat_name(group, field))}"


def fail(group: str, field: str, problem: str) -> ConfigError:
    """The error for a bad value: ``"<flat keyword> <problem> (<group field>, <option>)"``."""
    return ConfigError(f"{flat_name(group, field)} {problem} ({where(group, field)})")


def require_text(group: str, field: str, value: Any) -> None:
    """Refuse anything but a non-empty string. Called by the groups' ``__post_init__``."""
    if not isinstance(value, str) or not value.strip():
        raise fail(group, field, f"must be a non-empty string, got {value!r}")


def require_bool(group: str, field: str, value: Any) -> None:
    """Refuse anything but True or False (1 and 0 included). Called by the groups' ``__post_init__``."""
    if not isinstance(value, bool):
        raise fail(group, field, f"must be True or False, got {value!r}")


def require_int(group: str, field: str, value: Any, low: int, high: int) -> None:
    """Refuse anything but a whole number (not a bool) in ``[low, high]``. Called by the groups' ``__post_init__``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise fail(group, field, f"must be a whole number from {low:,} to {high:,}, got {value!r}")


def require_float(group: str, field: str, value: Any, low: float, high: float) -> None:
    """Refuse anything but a number (not a bool) in ``[low, high]``. Called by the groups' ``__post_init__``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise fail(group, field, f"must be a number from {low:g} to {high:g}, got {value!r}")
