"""The one parser of string options (``spark.readStream.option(...)``, the command line): option names, and the
conversion of their text to the values of ``SpoutConfig``'s flat keywords.

PURE. Every setting with a string form has an option name, the camelCase of its flat keyword
(``checkpoint_interval_s`` -> ``checkpointIntervalS``); snake_case is accepted too. ``retry_backoff`` and
``credentials`` are built from several options (``retryBackoff*``, ``aws*``).
"""

from __future__ import annotations

import difflib
from datetime import datetime
from typing import Any, Iterable, Mapping

from kinesis_spout.config.credentials import AwsCredentials
from kinesis_spout.config.groups import parse_position
from kinesis_spout.config.names import OWN_FIELDS, SETTINGS, camel
from kinesis_spout.config.streams import parse_position_map
from kinesis_spout.errors import ConfigError
from kinesis_spout.schemes import SCHEMES
from kinesis_spout.tracker import RetryBackoff

__all__ = ["OPTION_NAMES", "parse_options", "restate_error"]

#: Flat keyword -> how its string option is read (see :data:`kinesis_spout.config.names.OPTION_KINDS`).
_KIND: dict[str, str] = {**{name: "text" for name in OWN_FIELDS}, **{s.flat: s.option for s in SETTINGS}}
#: String option name -> flat ``SpoutConfig`` keyword (``retry_backoff.*`` and ``credentials.*`` for the fields of
#: the backoff and of the :class:`AwsCredentials`).
OPTION_NAMES: dict[str, str] = {camel(n): n for n, kind in _KIND.items() if kind not in ("parts", "python")}
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

#: How the options of the fields of a ``parts`` setting are read (the others: as text).
_PART_KIND = {"credentials.role_duration_s": "int"}


def _name(option: str) -> str | None:
    return OPTION_NAMES.get(option) or OPTION_NAMES.get(camel(option))


def parse_options(options: Mapping[str, str], *, also_known: Iterable[str] = ()) -> dict[str, Any]:
    """The flat keywords of ``options``, converted. Called by ``SpoutConfig.from_options`` only.

    Unknown option names are an error that lists the known ones (and ``also_known``); a bad value is an error that
    names the option as it was given.
    """
    values: dict[str, Any] = {}
    backoff: dict[str, float] = {}
    aws: dict[str, Any] = {}
    for option, raw in options.items():
        name = _name(option)
        if name is None:
            raise ConfigError(unknown_option(option, {*OPTION_NAMES, *also_known}))
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
            names = ", ".join(repr(o) for o in options if (_name(o) or "").startswith("retry_backoff."))
            raise ConfigError(f"option {names}: {exc}") from exc
    if aws:
        try:
            values["credentials"] = AwsCredentials(**aws)
        except ConfigError as exc:  # name the options as typed: AwsCredentials speaks of its fields
            text = str(exc)
            typed = {_name(o): o for o in options}
            for option, target in OPTION_NAMES.items():
                if target.startswith("credentials."):
                    text = text.replace(target, f"option {typed.get(target, option)!r}")
            raise ConfigError(text) from exc
    return values


def unknown_option(option: str, known: Iterable[str]) -> str:
    """The error text for an unknown option name: the nearest known name first (compared without case and
    underscores: Spark lower-cases the names), then all of them. Who calls: ``parse_options``."""
    def squash(name: str) -> str:
        return name.lower().replace("_", "").replace("-", "")

    names = sorted(set(known), key=str.lower)
    by_squashed = {squash(name): name for name in names}
    close = difflib.get_close_matches(squash(option), list(by_squashed), n=1, cutoff=0.6)
    listing = ", ".join(names)
    if not close:
        return f"unknown option {option!r}; known options: {listing}"
    return f"unknown option {option!r}: did you mean {by_squashed[close[0]]!r}? Known options: {listing}"


def restate_error(exc: ConfigError, options: Mapping[str, str]) -> ConfigError | None:
    """``exc`` (a check of ``SpoutConfig`` speaking of a flat keyword) restated to start with the option the user
    typed, or None when it speaks of no option given."""
    text = str(exc)
    given: dict[str, str] = {}
    for option in options:
        given.setdefault((_name(option) or "").split(".", 1)[0], option)
    for field_name, option in given.items():
        spoken = "RetryBackoff" if field_name == "retry_backoff" else field_name
        if field_name and (text.startswith(f"{spoken} ") or text.startswith(f"{spoken}.")):
            return ConfigError(f"option {option!r}: {text}")
    return None


def _convert(name: str, option: str, raw: str) -> Any:
    if not isinstance(raw, str):
        return raw
    kind = _PART_KIND.get(name, "text") if "." in name else _KIND[name]
    if kind == "int":
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"option {option!r} must be a whole number, got {raw!r}") from None
    if kind == "float":
        return _to_float(option, raw)
    if kind == "float_or_off":  # message_timeout_s, max_empty_record_backoff_s, the dead-letter storm ratio
        return None if raw.strip().lower() in ("", "none", "off") else _to_float(option, raw)
    if kind == "int_or_off":  # the dead-letter storm rules: 'off' (or 0) disables one
        if raw.strip().lower() in ("", "none", "off"):
            return None
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"option {option!r} must be a whole number, or 'off' to disable the rule, "
                              f"got {raw!r}") from None
    if kind == "port":
        if raw.strip().lower() in ("", "none", "off"):
            return None
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"option {option!r} must be a port number (0 for any free port) or 'none', "
                              f"got {raw!r}") from None
    if kind == "bool":
        lowered = raw.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"option {option!r} must be true or false, got {raw!r}")
        return lowered in ("true", "1", "yes")
    if kind == "position":
        if raw.lstrip().startswith("{"):  # one position per stream (kinesis_spout.config.streams)
            return parse_position_map(option, raw)
        try:
            return parse_position(raw)
        except ConfigError as exc:
            raise ConfigError(f"option {option!r}: {exc}") from None
    if kind == "time":
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"option {option!r} must be an ISO-8601 time such as 2026-01-31T12:00:00Z, "
                              f"got {raw!r}") from None
    if kind == "choice":
        return raw.strip().lower()
    if kind == "text_or_none" and not raw.strip():
        return None
    if kind == "scheme":
        scheme = SCHEMES.get(raw.strip().lower())
        if scheme is None:
            raise ConfigError(f"option {option!r} must be one of {', '.join(SCHEMES)}, got {raw!r}")
        return scheme()
    return raw


def _to_float(option: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"option {option!r} must be a number, got {raw!r}") from None
