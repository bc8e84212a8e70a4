"""Several streams in one configuration: the stream list and the per-stream initial positions, checked once here.

PURE. ``SpoutConfig(stream_name=...)`` takes one name, a comma-separated list (``"clicks,orders"``, the form of the
``streamName`` option, like Kafka's ``subscribe``) or a list of names; :func:`stream_names` turns any of them into
the names, in sorted order, refusing an empty list, an empty or duplicate name and a name holding '/'.
``initial_position`` may be a mapping ``{stream: position}`` (the option: a JSON object,
``{"orders": "TRIM_HORIZON"}``): :func:`stream_positions` checks it against the streams. Who calls:
``SpoutConfig.__init__`` (both), and the option parser for the JSON text (:func:`parse_position_map`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from kinesis_spout.config.groups import InitialPosition, parse_position
from kinesis_spout.config.names import fail
from kinesis_spout.errors import ConfigError

__all__ = ["STREAM_FIX", "parse_position_map", "stream_names", "stream_positions"]

#: What a message about the stream list says to do.
STREAM_FIX = ("give streamName one stream name, or several separated by commas (streamName='clicks,orders'); "
              "in Python, stream_name='clicks' or stream_name=['clicks', 'orders']")


def stream_names(value: Any) -> tuple[str, ...]:
    """The stream names of ``value`` (a name, a comma-separated list, or a list/tuple of names), sorted.

    ``ConfigError`` (naming ``stream_name`` / the option ``streamName`` and the fix) for no name at all, an empty
    name in the list, a name given twice, a name with '/' (names are ZooKeeper path parts), or a value that is not
    text."""
    if isinstance(value, str):
        parts = value.split(",") if "," in value else [value]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        raise _bad(f"must be a non-empty string or a list of them, got {value!r}; {STREAM_FIX}")
    names = [p.strip() for p in parts]
    if not names or not any(names):
        raise _bad(f"must be a non-empty string naming at least one stream, got {value!r}; {STREAM_FIX}")
    if not all(names):
        raise _bad(f"must not hold an empty name, got {value!r}; {STREAM_FIX}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _bad(f"must name each stream once, got {', '.join(repr(n) for n in twice)} more than once in "
                   f"{value!r}; list each stream once")
    for name in names:
        if "/" in name:
            raise _bad(f"must not contain '/', got {name!r}")
    return tuple(sorted(names))


def _bad(problem: str) -> ConfigError:
    return fail("", "stream_name", problem)


def parse_position_map(option: str, raw: str) -> dict[str, str]:
    """The text of an ``initialPosition`` option that starts with '{': a JSON object ``{stream: position}``.
    Who calls: the option parser. ``ConfigError`` naming ``option`` when it is not such an object."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"option {option!r} must be a position (TRIM_HORIZON, LATEST, AT_TIMESTAMP) or a JSON "
                          f"object of stream name to position such as {{\"orders\": \"TRIM_HORIZON\"}}, got {raw!r} "
                          f"({exc})") from None
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise ConfigError(f"option {option!r} must be a JSON object of stream name to position such as "
                          f"{{\"orders\": \"TRIM_HORIZON\"}}, got {raw!r}")
    return {str(k): v for k, v in doc.items()}  # the positions are checked by stream_positions


def stream_positions(positions: Mapping[str, Any], names: tuple[str, ...]) -> tuple[tuple[str, InitialPosition], ...]:
    """The per-stream initial positions of ``positions`` (stream -> position or its text), checked against the
    configured stream ``names``: every key must be one of them, and a position is TRIM_HORIZON or LATEST
    (AT_TIMESTAMP has one ``initial_timestamp``: give it to every stream with ``initial_position='AT_TIMESTAMP'``).
    Streams left out start at the default position, LATEST. Sorted by stream name."""
    out: dict[str, InitialPosition] = {}
    for stream, raw in positions.items():
        if stream not in names:
            raise ConfigError(f"initial_position names stream {stream!r}, which is not in stream_name "
                              f"({', '.join(names)}) (option 'initialPosition'): name only the streams read")
        position = raw if isinstance(raw, InitialPosition) else parse_position(str(raw))
        if position is InitialPosition.AT_TIMESTAMP:
            raise ConfigError(f"initial_position of stream {stream!r} is AT_TIMESTAMP, which a per-stream map does "
                              f"not take (option 'initialPosition'): start every stream there with "
                              f"initialPosition=AT_TIMESTAMP and initialTimestamp, or give TRIM_HORIZON or LATEST")
        out[stream] = position
    return tuple(sorted(out.items()))
