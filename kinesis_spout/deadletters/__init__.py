"""Dead-letter destinations: where records go when their retries ran out or their scheme cannot decode them.

``SpoutConfig(dead_letter=...)`` takes a handler ``(record, reason) -> None`` or a destination:
:class:`LocalDeadLetters` (the default: a JSON Lines file per app and stream under ``./kinesis-spout-dead-letters``
or ``$KINESIS_SPOUT_DEAD_LETTER_DIR``), :class:`KinesisDeadLetters` (another stream) or :class:`JsonLinesDeadLetters`
(a file of your choice). Letters are put back on a stream by :func:`replay_letters`
(``kinesis-spout dead-letters replay``). Whatever it
is, a record is done, and its shard's checkpoint may pass it, only once its dead letter was written; failed writes
are retried with backoff on the spout's dead-letter thread (see :class:`DeadLetterWorker`). A letter too large for
a Kinesis record goes into the dead-letter stream as a stub naming the record's position (and whole to
``KinesisDeadLetters(oversized=...)``, if set): it never holds up the others.
"""

from kinesis_spout.config.deadletters import LocalDeadLetters
from kinesis_spout.deadletters.base import (
    ENVELOPE_VERSION,
    DeadLetter,
    DeadLetterDestination,
    DeadLetterError,
    DeadLetterWriter,
    HandlerWriter,
    envelope,
    envelope_bytes,
    open_writer,
    record_from_envelope,
    stub_envelope_bytes,
)
from kinesis_spout.deadletters.jsonl import JsonLinesDeadLetters
from kinesis_spout.deadletters.kinesis import KinesisDeadLetters
from kinesis_spout.deadletters.worker import DeadLetterWorker

__all__ = ["ENVELOPE_VERSION", "DeadLetter", "DeadLetterDestination", "DeadLetterError", "DeadLetterWorker",
           "DeadLetterWriter", "HandlerWriter", "JsonLinesDeadLetters", "KinesisDeadLetters",
           "LocalDeadLetters", "envelope",
           "envelope_bytes", "open_writer", "record_from_envelope", "stub_envelope_bytes"]
