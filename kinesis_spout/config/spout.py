"""SpoutConfig: the frozen, validated configuration of a spout, made of groups of settings.

PURE. Two spellings build the same value::

    SpoutConfig(stream_name="s", app_name="a", region="eu-west-1", retry_limit=0)
    SpoutConfig(stream_name="s", app_name="a", kinesis=KinesisSettings(region="eu-west-1"),
                tracking=TrackingSettings(retry_limit=0))

A flat keyword overrides the field of the group given next to it, which is what makes
``dataclasses.replace(config, retry_limit=0)`` change only that field. Every flat keyword is also a typed, read-only
attribute (``config.retry_limit``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from kinesis_spout.config.deadletters import DeadLetterSettings
from kinesis_spout.config.flat import FlatView
from kinesis_spout.config.groups import (
    InitialPosition,
    KinesisSettings,
    MetricsSettings,
    ReadingSettings,
    TrackingSettings,
    WorkerSettings,
)
from kinesis_spout.config.names import FLAT_FIELDS, GROUP_CLASSES, camel, fail, require_text
from kinesis_spout.config.options import parse_options, restate_error
from kinesis_spout.config.streams import stream_names
from kinesis_spout.config.streams import stream_positions as stream_positions_of
from kinesis_spout.config.zookeeper import ZooKeeperSettings
from kinesis_spout.errors import ConfigError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from kinesis_spout.config.flat import ConfigChanges, FlatSettings

__all__ = ["SpoutConfig"]

_GROUP_TYPES: dict[str, type[Any]] = {
    "kinesis": KinesisSettings,
    "reading": ReadingSettings,
    "tracking": TrackingSettings,
    "zk": ZooKeeperSettings,
    "dead_letters": DeadLetterSettings,
    "metrics": MetricsSettings,
    "worker": WorkerSettings,
}


@dataclass(frozen=True, init=False)
class SpoutConfig(FlatView):
    """Configuration of a :class:`~kinesis_spout.KinesisSpout`. Validated on construction (``ConfigError``).

    ``stream_name`` and ``app_name`` (neither may hold '/') name the checkpoints. ``stream_name`` may list several
    streams (``["clicks", "orders"]`` or ``"clicks,orders"``, kept as the sorted names joined by commas: see
    :attr:`stream_names`), read by a :class:`~kinesis_spout.MultiStreamSpout` or a ``SpoutPipeline``; then
    ``initial_position`` may be a mapping of stream to position (:attr:`stream_positions`, see
    :mod:`kinesis_spout.config.streams`) and :meth:`for_stream` gives each stream's own config. The rest is grouped:
    :class:`KinesisSettings` (``kinesis``), :class:`ReadingSettings` (``reading``), :class:`TrackingSettings`
    (``tracking``), :class:`ZooKeeperSettings` (``zk``), :class:`DeadLetterSettings` (``dead_letters``),
    :class:`MetricsSettings` (``metrics``) and :class:`WorkerSettings` (``worker``). Each setting can also be given
    and read by its flat name (``retry_limit``, ``zookeeper_tls``...; see :class:`FlatSettings`). Per-shard limits
    (``max_inflight_*``, ``prefetch_*``) apply to each shard the spout owns.
    """

    stream_name: str
    app_name: str
    stream_positions: tuple[tuple[str, InitialPosition], ...] = ()
    kinesis: KinesisSettings = field(default_factory=KinesisSettings)
    reading: ReadingSettings = field(default_factory=ReadingSettings)
    tracking: TrackingSettings = field(default_factory=TrackingSettings)
    zk: ZooKeeperSettings = field(default_factory=ZooKeeperSettings)
    dead_letters: DeadLetterSettings = field(default_factory=DeadLetterSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)

    def __init__(self, stream_name: str | Sequence[str], app_name: str, *, kinesis: KinesisSettings | None = None,
                 reading: ReadingSettings | None = None, tracking: TrackingSettings | None = None,
                 zk: ZooKeeperSettings | None = None, dead_letters: DeadLetterSettings | None = None,
                 metrics: MetricsSettings | None = None, worker: WorkerSettings | None = None,
                 stream_positions: Iterable[tuple[str, InitialPosition]] = (),
                 **flat: Unpack[FlatSettings]) -> None:
        """Build from groups and/or flat keywords; a group left out takes its defaults, a flat keyword overrides
        its group's field. ``ConfigError`` for a bad value, ``TypeError`` for an unknown keyword."""
        names = stream_names(stream_name)
        object.__setattr__(self, "stream_name", ",".join(names))
        object.__setattr__(self, "app_name", app_name)
        self.__post_init__()
        per_stream = dict(stream_positions)
        if isinstance(flat.get("initial_position"), Mapping):
            per_stream.update(flat.pop("initial_position"))  # type: ignore[arg-type]
        positions = stream_positions_of(per_stream, names)
        if len(names) == 1 and positions:  # one stream: its position is the position
            flat["initial_position"] = positions[0][1]
            positions = ()
        object.__setattr__(self, "stream_positions", positions)
        given: dict[str, Any] = {"kinesis": kinesis, "reading": reading, "tracking": tracking, "zk": zk,
                                 "dead_letters": dead_letters, "metrics": metrics, "worker": worker}
        changes: dict[str, dict[str, Any]] = {}
        for name, value in flat.items():
            target = FLAT_FIELDS.get(name)
            if target is None:
                raise TypeError(f"SpoutConfig() got an unexpected keyword argument {name!r}")
            for group, kind in _GROUP_TYPES.items():
                if isinstance(value, kind):
                    raise ConfigError(f"{name} takes one setting; a {kind.__name__} goes in {group}=, "
                                      f"e.g. SpoutConfig(..., {group}={kind.__name__}(...))")
            changes.setdefault(target[0], {})[target[1]] = value
        for group, kind in _GROUP_TYPES.items():
            value = given[group]
            if value is not None and not isinstance(value, kind):
                raise ConfigError(f"{group} must be a {GROUP_CLASSES[group]} (or give its settings by their flat "
                                  f"names), got {value!r}")
            if group in changes:
                value = kind(**changes[group]) if value is None else dataclasses.replace(value, **changes[group])
            elif value is None:
                value = kind()
            object.__setattr__(self, group, value)

    def __post_init__(self) -> None:
        """Checks ``stream_name`` and ``app_name`` (each group checks itself). Called by ``__init__`` first."""
        for name in ("stream_name", "app_name"):
            require_text("", name, getattr(self, name))
            if name == "stream_name":
                continue  # checked name by name (kinesis_spout.config.streams)
            if "/" in getattr(self, name):
                raise fail("", name, f"must not contain '/', got {getattr(self, name)!r}")

    def replace(self, **changes: Unpack[ConfigChanges]) -> SpoutConfig:
        """A copy with ``changes`` (flat keywords, ``stream_name``/``app_name``, or whole groups), validated again:
        ``config.replace(message_timeout_s=None)``. The same as ``dataclasses.replace(config, ...)``, which works
        too, but typed for the flat keywords."""
        kwargs: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return type(self)(**{**kwargs, **changes})

    @property
    def stream_names(self) -> tuple[str, ...]:
        """The streams read, sorted: one, or several for a :class:`~kinesis_spout.MultiStreamSpout`."""
        return tuple(self.stream_name.split(","))

    def for_stream(self, stream: str) -> SpoutConfig:
        """The config of one of :attr:`stream_names`: that stream alone, at its own initial position (from
        :attr:`stream_positions`, else this config's). Who calls: ``MultiStreamSpout`` and the Spark source, for
        each stream they read. ``ConfigError`` for a stream not listed."""
        if stream not in self.stream_names:
            raise ConfigError(f"stream {stream!r} is not one of this config's streams ({self.stream_name})")
        position = dict(self.stream_positions).get(stream)
        if position is None or len(self.stream_names) == 1:
            return self.replace(stream_name=stream, stream_positions=())
        return self.replace(stream_name=stream, stream_positions=(), initial_position=position,
                            initial_timestamp=None)

    @property
    def checkpoint_path(self) -> str:
        """The ZooKeeper path under which this app's checkpoints of this stream live (of several streams: the node
        named by them all, which holds only what the app keeps for the set, such as a pipeline's batch ids; each
        stream's checkpoints are under :meth:`for_stream`'s path)."""
        base = "" if self.zk.prefix == "/" else self.zk.prefix
        return f"{base}/{self.app_name}/{self.stream_name}/checkpoints"

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, also_known: Iterable[str] = (),
                     **overrides: Any) -> SpoutConfig:
        """Build a config from string options (camelCase names, see :data:`OPTION_NAMES`).

        Unknown option names are an error that lists the known ones (with ``also_known``: options the caller
        takes out before, such as the Spark source's own). A bad value is an error that names the option as it
        was given. ``overrides`` are Python values for settings that have no string form (``dead_letter``, custom
        ``scheme``), by flat name or as groups.
        """
        values = parse_options(options, also_known=also_known)
        for key in ("stream_name", "app_name"):
            if key not in values and key not in overrides:
                raise ConfigError(f"option {camel(key)!r} is required")
        try:
            return cls(**{**values, **overrides})
        except ConfigError as exc:  # the field's check speaks of the field: name the option the user typed
            restated = restate_error(exc, options)
            if restated is None:
                raise
            raise restated from exc
