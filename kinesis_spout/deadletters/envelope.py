"""The dead letter as a value and its JSON envelope: what every built-in destination writes, and how it is read
back. PURE: no I/O, no threads."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from kinesis_spout.records import Record, SequenceKey

__all__ = ["ENVELOPE_VERSION", "STUB_REASON_CHARS", "DeadLetter", "envelope", "envelope_bytes",
           "record_from_envelope", "stub_envelope_bytes"]

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
