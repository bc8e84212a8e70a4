"""Dead letters: the contract destinations follow, and the writer of a configured target. The value handed to a
destination and its JSON envelope are in :mod:`kinesis_spout.deadletters.envelope` (imported here too).

A record becomes a dead letter when its retries ran out (failed or timed out ``retry_limit + 1`` times) or when its
scheme cannot decode it. The spout hands dead letters to a :class:`DeadLetterWriter` on a background thread
(:mod:`kinesis_spout.deadletters.worker`); a record is done, and the shard's checkpoint may pass it, only once its
dead letter was written. Pure apart from the writers' own I/O: no threads here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

from kinesis_spout.config.deadletters import DeadLetterDestination, LocalDeadLetters
from kinesis_spout.deadletters.envelope import (
    ENVELOPE_VERSION,
    STUB_REASON_CHARS,
    DeadLetter,
    envelope,
    envelope_bytes,
    record_from_envelope,
    stub_envelope_bytes,
)
from kinesis_spout.deadletters.local import LocalDeadLetterWriter
from kinesis_spout.errors import ConfigError, DeadLetterError
from kinesis_spout.records import Record

if TYPE_CHECKING:
    from kinesis_spout.config import SpoutConfig

__all__ = ["ENVELOPE_VERSION", "STUB_REASON_CHARS", "DeadLetter", "DeadLetterDestination", "DeadLetterError",
           "DeadLetterWriter", "HandlerWriter", "envelope", "envelope_bytes", "open_writer", "record_from_envelope",
           "stub_envelope_bytes"]

@runtime_checkable
class DeadLetterWriter(Protocol):
    """Writes dead letters durably. Who calls: the spout's dead-letter thread only (never two calls at once).

    ``write`` returns once every letter is durably stored, or raises (a :class:`DeadLetterError` with ``written``
    for a partial success; any other exception means none is known to be written). The letters not written are
    passed again later, so a write should not keep half-done state. ``close`` releases files or clients and is
    idempotent.
    """

    def write(self, letters: Sequence[DeadLetter]) -> None: ...

    def close(self) -> None: ...


class HandlerWriter:
    """A writer over a plain handler ``(record, reason) -> None`` (such as the default, which logs): the handler is
    called once per letter, in order; a handler that raises stops the call, and the letters before it count as
    written."""

    def __init__(self, handler: Callable[[Record, str], None]) -> None:
        self.handler = handler

    def write(self, letters: Sequence[DeadLetter]) -> None:
        for i, letter in enumerate(letters):
            try:
                self.handler(letter.record, letter.reason)
            except Exception as exc:  # noqa: BLE001 - any handler error: retried later, never dropped
                raise DeadLetterError(f"the dead-letter handler raised {type(exc).__name__}: {exc}",
                                      written=letters[:i]) from exc

    def close(self) -> None:
        pass


def open_writer(dead_letter: Any, config: SpoutConfig) -> DeadLetterWriter:
    """The writer for ``config.dead_letter``: a destination's own, or a :class:`HandlerWriter` for a callable.

    :class:`DeadLetterDestination` (the configuration's contract) promises a :class:`DeadLetterWriter`; one that
    returns something else is a ``ConfigError`` here, before any record is read. The default,
    :class:`~kinesis_spout.config.deadletters.LocalDeadLetters`, gets a
    :class:`~kinesis_spout.deadletters.local.LocalDeadLetterWriter` on the file it names."""
    if isinstance(dead_letter, LocalDeadLetters):
        return LocalDeadLetterWriter(dead_letter.path(config))
    if isinstance(dead_letter, DeadLetterDestination):
        writer = dead_letter.open_writer(config)
        if not isinstance(writer, DeadLetterWriter):
            raise ConfigError(f"dead_letter {dead_letter!r}: its open_writer returned {writer!r}, not a "
                              f"kinesis_spout.deadletters.DeadLetterWriter (an object with write(letters) and "
                              f"close()); return one from open_writer")
        return writer
    return HandlerWriter(dead_letter)
