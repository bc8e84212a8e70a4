"""Where dead letters go, as configured: a handler or a destination, and how long failing writes are tolerated.

PURE: the configuration holds the target as a plain object; :mod:`kinesis_spout.deadletters` (I/O) opens its
writer and checks what it got. :class:`DeadLetterDestination` is the contract a destination follows, declared here
so that the configuration needs nothing from the I/O layer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Union, runtime_checkable

from kinesis_spout.config.names import fail, require_float
from kinesis_spout.records import Record

if TYPE_CHECKING:
    from kinesis_spout.config.spout import SpoutConfig

__all__ = ["DeadLetterDestination", "DeadLetterHandler", "DeadLetterSettings", "DeadLetterTarget",
           "log_dead_letter"]

log = logging.getLogger("kinesis_spout")

#: Called with the record and the reason when a record's retries ran out (or it cannot be decoded). It runs on the
#: spout's dead-letter thread; the record is done when it returns, and retried with backoff when it raises.
DeadLetterHandler = Callable[[Record, str], None]


@runtime_checkable
class DeadLetterDestination(Protocol):
    """A dead-letter destination as configured (``SpoutConfig(dead_letter=...)``): immutable settings that make a
    fresh writer for each spout. ``open_writer`` does no I/O (the writer connects or opens its file on its first
    write) and returns a :class:`kinesis_spout.deadletters.DeadLetterWriter`; the spout checks that it did."""

    def open_writer(self, config: SpoutConfig) -> Any: ...


#: What ``SpoutConfig.dead_letter`` takes: a handler, or a destination of :mod:`kinesis_spout.deadletters`.
DeadLetterTarget = Union[DeadLetterHandler, DeadLetterDestination]


def log_dead_letter(record: Record, reason: str) -> None:
    """The default dead-letter handler: log the record's id and size at ERROR level."""
    log.error("dead letter %s (%d bytes, partition key %r): %s", record.message_id, len(record.data),
              record.partition_key, reason)


@dataclass(frozen=True)
class DeadLetterSettings:
    """Dead letters (``SpoutConfig.dead_letters``; flat keywords ``dead_letter``, ``dead_letter_deadline_s``).

    ``target`` is a handler ``(record, reason) -> None`` or a destination of :mod:`kinesis_spout.deadletters`; a
    dead-lettered record is done only once its dead letter was written, failed writes are retried with backoff,
    and once they kept failing for ``deadline_s`` the spout raises a ``DeadLetterError``.
    """

    target: DeadLetterTarget = log_dead_letter
    deadline_s: float = 60.0

    def __post_init__(self) -> None:
        if not callable(self.target) and not callable(getattr(self.target, "open_writer", None)):
            raise fail("dead_letters", "target",
                       f"must be a callable (record, reason) -> None or a destination such as "
                       f"kinesis_spout.deadletters.KinesisDeadLetters, got {self.target!r}")
        require_float("dead_letters", "deadline_s", self.deadline_s, 1.0, 86400.0)
