"""Dead letters: the value handed to a destination, its JSON envelope, and the contract destinations follow.

A record becomes a dead letter when its retries ran out (failed or timed out ``retry_limit + 1`` times) or when its
scheme cannot decode it. The spout hands dead letters to a :class:`DeadLetterWriter` on a background thread
(:mod:`kinesis_spout.deadletters.worker`); a record is done, and the shard's checkpoint may pass it, only once its
dead letter was written. Pure apart from the writers' own I/O: no threads here.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

from kinesis_spout.config.deadletters import DeadLetterDestination
from kinesis_spout.errors import ConfigError, DeadLetterError
from kinesis_spout.records import Record, SequenceKey

if TYPE_CHECKING:
    from kinesis_spout.config import SpoutConfig

__all__ = ["ENVELOPE_VERSION", "DeadLetter", "DeadLetterDestination", "DeadLetterError", "DeadLetterWriter",
           "HandlerWriter", "envelope", "envelope_bytes", "open_writer", "record_from_envelope", "stub_envelope_bytes"]

#: The ``version`` field of the JSON envelope; it changes only if a field changes meaning or goes away.
ENVELOPE_VERSION = 1
#: A stub's ``reason`` keeps at most this many characters (the whole one is in the full letter, if kept).
STUB_REASON_CHARS = 8192


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record given up on: ``reason`` says why, ``attempts`` how many times it was emitted (1 for a record whose
    scheme refused it on first emission), ``stream_name``/``app_name`` where it was read, ``at`` when it was given
    up (epoch seconds)."""

    record: Record
    reason: str
    attempts: int
    stream_name: str
    app_name: str
    at: float


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
    returns something else is a ``ConfigError`` here, before any record is read."""
    if isinstance(dead_letter, DeadLetterDestination):
        writer = dead_letter.open_writer(config)
        if not isinstance(writer, DeadLetterWriter):
            raise ConfigError(f"dead_letter {dead_letter!r}: its open_writer returned {writer!r}, not a "
                              f"kinesis_spout.deadletters.DeadLetterWriter (an object with write(letters) and "
                              f"close()); return one from open_writer")
        return writer
    return HandlerWriter(dead_letter)


def envelope(letter: DeadLetter) -> dict[str, Any]:
    """The JSON envelope of a dead letter (the same for every built-in destination).

    ``data`` is the original record's data in base64; ``sub_sequence_number`` is null for a plain record (a user
    record of a KPL aggregate has one); times are ISO 8601 in UTC.
    """
    record = letter.record
    arrival = record.approximate_arrival_timestamp
    return {
        "version": ENVELOPE_VERSION,
        "reason": letter.reason,
        "attempts": letter.attempts,
        "app": letter.app_name,
        "stream": letter.stream_name,
        "shard_id": record.shard_id,
        "sequence_number": record.sequence_number,
        "sub_sequence_number": record.sub_sequence_number,
        "partition_key": record.partition_key,
        "approximate_arrival_timestamp": arrival.isoformat() if arrival is not None else None,
        "dead_lettered_at": datetime.fromtimestamp(letter.at, timezone.utc).isoformat(),
        "data": base64.b64encode(record.data).decode("ascii"),
    }


def envelope_bytes(letter: DeadLetter) -> bytes:
    """The envelope as compact UTF-8 JSON on one line (no newline)."""
    return json.dumps(envelope(letter), separators=(",", ":"), ensure_ascii=False).encode()


def stub_envelope_bytes(letter: DeadLetter, full_letter: str | None) -> bytes:
    """The envelope of a letter too large for its destination, as compact UTF-8 JSON: every field but ``data``, and
    ``truncated: true``, ``data_size`` (the original data's length in bytes), ``data_sha256`` (its SHA-256, hex) and
    ``full_letter`` (where the whole envelope was written, or null); a ``reason`` longer than
    :data:`STUB_REASON_CHARS` is cut short there. Its size does not depend on the data: with
    ``shard_id`` and ``sequence_number`` (and ``sub_sequence_number``) the record can be read again from ``stream``
    while the stream retains it."""
    doc = envelope(letter)
    data = letter.record.data
    del doc["data"]
    reason = letter.reason
    if len(reason) > STUB_REASON_CHARS:  # a scheme's error may quote the whole record
        doc["reason"] = f"{reason[:STUB_REASON_CHARS]}... ({len(reason):,} characters in all)"
    doc.update(truncated=True, data_size=len(data), data_sha256=hashlib.sha256(data).hexdigest(),
               full_letter=full_letter)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def record_from_envelope(doc: dict[str, Any] | bytes | str) -> tuple[str, Record]:
    """Read an envelope back (to replay dead letters): ``(stream, record)``. Raises ``ValueError`` naming what is
    missing or malformed."""
    if isinstance(doc, (bytes, str)):
        doc = json.loads(doc)
    if not isinstance(doc, dict):
        raise ValueError(f"a dead-letter envelope is a JSON object, got {type(doc).__name__}")
    if doc.get("truncated"):
        where = f"the whole letter is in {doc['full_letter']}, or " if doc.get("full_letter") else ""
        raise ValueError(
            f"the data of record {doc.get('shard_id')}:{doc.get('sequence_number')} ({doc.get('data_size')} bytes) "
            f"was left out of this dead letter, too large for its destination: {where}read the record again from "
            f"stream {doc.get('stream')!r}, shard {doc.get('shard_id')}, with a GetShardIterator of type "
            f"AT_SEQUENCE_NUMBER at {doc.get('sequence_number')} (sub-sequence {doc.get('sub_sequence_number')}) "
            f"while the stream retains it, and check its SHA-256 against data_sha256")
    try:
        arrival = doc.get("approximate_arrival_timestamp")
        sub = doc.get("sub_sequence_number")
        record = Record(shard_id=doc["shard_id"], sequence_number=doc["sequence_number"], sub_sequence_number=sub,
                        partition_key=doc["partition_key"], data=base64.b64decode(doc["data"], validate=True),
                        approximate_arrival_timestamp=datetime.fromisoformat(arrival) if arrival else None,
                        key=SequenceKey.parse(doc["sequence_number"], sub))
        return str(doc["stream"]), record
    except KeyError as exc:
        raise ValueError(f"dead-letter envelope lacks the field {exc.args[0]!r}") from None
