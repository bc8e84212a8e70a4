"""The names of every setting, and the checks the groups share: one table from each flat ``SpoutConfig`` keyword
(``zookeeper_session_timeout_s``) to its group and field (``zk`` / ``ZooKeeperSettings.session_timeout_s``), and
from there to its string option (``zookeeperSessionTimeoutS``).

PURE: standard library and :mod:`kinesis_spout.errors` only. A failed check raises a ``ConfigError`` that starts
with the flat keyword (the name most code and every string option use) and ends with the group field and the
option, so the same message helps whichever spelling the caller used; the text between says what is allowed.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kinesis_spout.errors import ConfigError

__all__ = ["DERIVED_FIELDS", "FLAT_FIELDS", "GROUP_CLASSES", "OPTION_KINDS", "OWN_FIELDS", "SETTINGS", "Setting",
           "camel", "fail", "flat_name", "option_of", "require_bool", "require_float", "require_int", "require_text",
           "where"]

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


class Setting(NamedTuple):
    """One setting: its flat ``SpoutConfig`` keyword, the group attribute and field that hold it, and how its string
    option is read (``option``, one of :data:`OPTION_KINDS`; its option name is the camelCase of ``flat``)."""

    flat: str
    group: str
    field: str
    option: str


#: How a setting's string option becomes a value (see :func:`kinesis_spout.config.options.parse_options`): ``text``
#: as given; ``int``, ``float``, ``bool``; ``float_or_off`` and ``int_or_off`` also take ``off``/``none``/empty for
#: None; ``port`` a port number or ``none``; ``position`` an :class:`InitialPosition`; ``time`` ISO-8601; ``choice``
#: lower-cased; ``text_or_none`` empty for None; ``scheme`` a name of ``SCHEMES``; ``parts`` built from the options
#: of its fields (``retryBackoff*``, ``aws*``); ``python`` has no string form.
OPTION_KINDS = ("text", "int", "float", "bool", "float_or_off", "int_or_off", "port", "position", "time", "choice",
                "text_or_none", "scheme", "parts", "python")

#: Every grouped setting, once: the one table the flat keywords (:data:`FLAT_FIELDS`), the typed flat spelling
#: (:mod:`kinesis_spout.config.flat`, rendered from this table by ``scripts/docs_reference.py --write``) and the
#: string options (:data:`kinesis_spout.config.options.OPTION_NAMES`) are made from. A new setting is a field of its
#: group, one row here, and its use. ``stream_name`` and ``app_name`` are ``SpoutConfig``'s own fields
#: (:data:`OWN_FIELDS`), in no group.
SETTINGS: tuple[Setting, ...] = (
    Setting("zookeeper", "zk", "hosts", "text"),
    Setting("zookeeper_prefix", "zk", "prefix", "text"),
    Setting("zookeeper_session_timeout_s", "zk", "session_timeout_s", "float"),
    Setting("zookeeper_deadline_s", "zk", "deadline_s", "float"),
    Setting("zookeeper_auth", "zk", "auth", "text"),
    Setting("zookeeper_world_readable", "zk", "world_readable", "bool"),
    Setting("zookeeper_tls", "zk", "tls", "bool"),
    Setting("zookeeper_tls_ca_file", "zk", "tls_ca_file", "text"),
    Setting("zookeeper_tls_cert_file", "zk", "tls_cert_file", "text"),
    Setting("zookeeper_tls_key_file", "zk", "tls_key_file", "text"),
    Setting("region", "kinesis", "region", "text"),
    Setting("endpoint_url", "kinesis", "endpoint_url", "text"),
    Setting("credentials", "kinesis", "credentials", "parts"),
    Setting("initial_position", "reading", "initial_position", "position"),
    Setting("initial_timestamp", "reading", "initial_timestamp", "time"),
    Setting("max_records_per_call", "reading", "max_records_per_call", "int"),
    Setting("empty_record_backoff_s", "reading", "empty_record_backoff_s", "float"),
    Setting("max_empty_record_backoff_s", "reading", "max_empty_record_backoff_s", "float_or_off"),
    Setting("shard_sync_interval_s", "reading", "shard_sync_interval_s", "float"),
    Setting("checkpoint_interval_s", "tracking", "checkpoint_interval_s", "float"),
    Setting("retry_limit", "tracking", "retry_limit", "int"),
    Setting("retry_backoff", "tracking", "retry_backoff", "parts"),
    Setting("message_timeout_s", "tracking", "message_timeout_s", "float_or_off"),
    Setting("max_inflight_records", "tracking", "max_inflight_records", "int"),
    Setting("max_inflight_bytes", "tracking", "max_inflight_bytes", "int"),
    Setting("prefetch_records", "reading", "prefetch_records", "int"),
    Setting("prefetch_bytes", "reading", "prefetch_bytes", "int"),
    Setting("reader_threads", "reading", "reader_threads", "int"),
    Setting("reliable", "tracking", "reliable", "bool"),
    Setting("deaggregate", "reading", "deaggregate", "bool"),
    Setting("drop_foreign_user_records", "reading", "drop_foreign_user_records", "bool"),
    Setting("scheme", "reading", "scheme", "scheme"),
    Setting("dead_letter", "dead_letters", "target", "python"),
    Setting("dead_letter_deadline_s", "dead_letters", "deadline_s", "float"),
    Setting("metrics_port", "metrics", "port", "port"),
    Setting("task_index", "worker", "task_index", "int"),
    Setting("task_count", "worker", "task_count", "int"),
    Setting("coordination", "worker", "coordination", "text"),
    Setting("worker_id", "worker", "worker_id", "text"),
    Setting("lease_settle_s", "worker", "lease_settle_s", "float"),
    Setting("max_dead_letters_in_a_row", "dead_letters", "max_in_a_row", "int_or_off"),
    Setting("max_dead_letter_ratio", "dead_letters", "max_ratio", "float_or_off"),
    Setting("dead_letter_window", "dead_letters", "window", "int_or_off"),
    Setting("min_dead_letters_in_window", "dead_letters", "min_in_window", "int_or_off"),
    Setting("retrieval", "reading", "retrieval", "choice"),
    Setting("consumer_name", "reading", "consumer_name", "text_or_none"),
    Setting("subscription_renewal_s", "reading", "subscription_renewal_s", "float"),
)

#: ``SpoutConfig``'s own fields, in no group (text options).
OWN_FIELDS = ("stream_name", "app_name")

#: ``SpoutConfig``'s fields made from another keyword, with no option of their own: ``stream_positions`` from an
#: ``initial_position`` that maps streams to positions.
DERIVED_FIELDS = ("stream_positions",)

#: Flat ``SpoutConfig`` keyword -> (group attribute, field of the group), from :data:`SETTINGS`.
FLAT_FIELDS: dict[str, tuple[str, str]] = {s.flat: (s.group, s.field) for s in SETTINGS}

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
