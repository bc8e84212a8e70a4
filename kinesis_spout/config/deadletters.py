"""Where dead letters go, as configured: a handler or a destination, and how long failing writes are tolerated.

PURE: the configuration holds the target as a plain object; :mod:`kinesis_spout.deadletters` (I/O) opens its
writer and checks what it got. :class:`DeadLetterDestination` is the contract a destination follows, declared here
so that the configuration needs nothing from the I/O layer. Nothing here imports the ``SpoutConfig`` that holds
these settings (it would close an import cycle through the flat view): a destination is handed the spout's
``SpoutConfig``, typed ``Any`` so that destinations typed with ``SpoutConfig`` match the contract, and
:meth:`LocalDeadLetters.path` reads only the two names of :class:`SpoutNames`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Union, runtime_checkable

from kinesis_spout.config.names import fail, require_float, require_int
from kinesis_spout.records import Record

__all__ = ["DEAD_LETTER_DIR_ENV", "DEFAULT_DEAD_LETTER_DIR", "DeadLetterDestination", "DeadLetterHandler",
           "DeadLetterSettings", "DeadLetterTarget", "LocalDeadLetters", "SpoutNames", "log_dead_letter"]

log = logging.getLogger(__name__)

#: Called with the record and the reason when a record's retries ran out (or it cannot be decoded). It runs on the
#: spout's dead-letter thread; the record is done when it returns, and retried with backoff when it raises.
DeadLetterHandler = Callable[[Record, str], None]


@runtime_checkable
class DeadLetterDestination(Protocol):
    """A dead-letter destination as configured (``SpoutConfig(dead_letter=...)``): immutable settings that make a
    fresh writer for each spout. ``open_writer`` does no I/O (the writer connects or opens its file on its first
    write) and returns a :class:`kinesis_spout.deadletters.DeadLetterWriter`; the spout checks that it did.
    ``config`` is the spout's :class:`~kinesis_spout.config.SpoutConfig` (typed ``Any`` here: see the module)."""

    def open_writer(self, config: Any) -> Any: ...


class SpoutNames(Protocol):
    """What names a spout's dead-letter file: its app and stream (a :class:`~kinesis_spout.config.SpoutConfig` has
    both). Read by :meth:`LocalDeadLetters.path`."""

    @property
    def app_name(self) -> str: ...

    @property
    def stream_name(self) -> str: ...


#: The environment variable that moves the default dead-letter folder.
DEAD_LETTER_DIR_ENV = "KINESIS_SPOUT_DEAD_LETTER_DIR"
#: The default dead-letter folder, relative to the working directory of the process that opens the spout.
DEFAULT_DEAD_LETTER_DIR = "kinesis-spout-dead-letters"


def log_dead_letter(record: Record, reason: str) -> None:
    """A dead-letter handler that only logs the record's id and size at ERROR level (the data is not kept: pass
    it as ``dead_letter`` only where losing the data of dead letters is acceptable)."""
    log.error("dead letter %s (%d bytes, partition key %r): %s", record.message_id, len(record.data),
              record.partition_key, reason)


@dataclass(frozen=True)
class LocalDeadLetters:
    """The default destination: each dead letter kept whole (data, position, reason, attempts, time, stream, app)
    as a JSON Lines envelope in ``<folder>/<app_name>/<stream_name>.jsonl``, fsynced before its record is done.

    ``folder`` defaults to ``$KINESIS_SPOUT_DEAD_LETTER_DIR``, else ``./kinesis-spout-dead-letters`` (both read when
    the spout opens; a relative folder is taken from the working directory then). Where the file cannot be written
    (a read-only folder), each letter is logged whole instead (its data in base64) and a WARNING says which folder
    failed and how to choose another. The writer, :class:`kinesis_spout.deadletters.local.LocalDeadLetterWriter`, is
    made by :func:`kinesis_spout.deadletters.open_writer` (the I/O layer), not here.
    """

    folder: str | None = None

    def path(self, config: SpoutNames) -> str:
        """The file of ``config``'s letters (an absolute path). Reads the environment and the working directory."""
        folder = self.folder or os.environ.get(DEAD_LETTER_DIR_ENV) or DEFAULT_DEAD_LETTER_DIR
        return os.path.abspath(os.path.join(folder, _safe(config.app_name), _safe(config.stream_name) + ".jsonl"))


#: What ``SpoutConfig.dead_letter`` takes: a handler, or a destination of :mod:`kinesis_spout.deadletters` (the
#: default, :class:`LocalDeadLetters`, included).
DeadLetterTarget = Union[DeadLetterHandler, DeadLetterDestination, LocalDeadLetters]


def _safe(name: str) -> str:
    """A name usable as one path component: separators and leading dots replaced."""
    cleaned = "".join("_" if c in "/\\:\0" else c for c in name).lstrip(".")
    return cleaned or "_"


@dataclass(frozen=True)
class DeadLetterSettings:
    """Dead letters (``SpoutConfig.dead_letters``; flat keywords ``dead_letter``, ``dead_letter_deadline_s``,
    ``max_dead_letters_in_a_row``, ``max_dead_letter_ratio``, ``dead_letter_window``, ``min_dead_letters_in_window``).

    ``target`` is a handler ``(record, reason) -> None`` or a destination of :mod:`kinesis_spout.deadletters`
    (default: :class:`LocalDeadLetters`, a JSON Lines file per app and stream); a dead-lettered record is done only
    once its dead letter was written, failed writes are retried with backoff, and once they kept failing for
    ``deadline_s`` the spout raises a ``DeadLetterError``.

    Storms stop the spout (``DeadLetterStormError``): ``max_in_a_row`` (default 100) dead letters in a row (in the
    order records are read: a record its scheme decodes ends the run), or more than ``max_ratio`` (default 0.5) of
    the last ``window`` (default 1,000) records read dead-lettered while the window holds at least
    ``min_in_window`` (default 100) dead letters. 0 (or None) disables a rule. The letters of records refused by
    the scheme as they are read are held (not written, their records not checkpointed past) until a decoded record
    ends their run, ``flush_checkpoints()``/``close()`` is called, or ``checkpoint_interval_s`` (at least 1 s) has
    passed since the first was held, so a storm leaves the checkpoint before the first of its letters still held,
    and a run at the end of a quiet or closed shard is written within that bound.
    """

    target: DeadLetterTarget = LocalDeadLetters()
    deadline_s: float = 60.0
    max_in_a_row: int | None = 100
    max_ratio: float | None = 0.5
    window: int | None = 1000
    min_in_window: int | None = 100

    def __post_init__(self) -> None:
        if not callable(self.target) and not callable(getattr(self.target, "open_writer", None)) and \
                not isinstance(self.target, LocalDeadLetters):
            raise fail("dead_letters", "target",
                       f"must be a callable (record, reason) -> None or a destination such as "
                       f"kinesis_spout.deadletters.KinesisDeadLetters, got {self.target!r}")
        require_float("dead_letters", "deadline_s", self.deadline_s, 1.0, 86400.0)
        for name in ("max_in_a_row", "window", "min_in_window"):
            value = getattr(self, name)
            if value is not None:
                require_int("dead_letters", name, value, 0, 10_000_000)
        if self.max_ratio is not None:
            require_float("dead_letters", "max_ratio", self.max_ratio, 0.0, 1.0)
            if self.max_ratio >= 1.0:
                raise fail("dead_letters", "max_ratio", f"must be below 1 (more than all records cannot be "
                           f"dead-lettered; 0 disables the rule), got {self.max_ratio!r}")
        if self.max_ratio and not self.window:
            raise fail("dead_letters", "window", f"must be a whole number of records when max_dead_letter_ratio is "
                       f"set ({self.max_ratio!r}); set both, or max_dead_letter_ratio=0 to disable the rule")
