"""Another Kinesis stream as dead-letter destination: one record per dead letter, holding its JSON envelope."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

from kinesis_spout.deadletters.base import (
    DeadLetter,
    DeadLetterDestination,
    DeadLetterError,
    DeadLetterWriter,
    envelope_bytes,
    stub_envelope_bytes,
)
from kinesis_spout.errors import ConfigError, PutRecordsError
from kinesis_spout.kinesis.writing.putter import MAX_RECORD_BYTES, PutEntry, RecordPutter
from kinesis_spout.retry import RetryPolicy

if TYPE_CHECKING:
    from kinesis_spout.config import SpoutConfig
    from kinesis_spout.kinesis.credentials import AwsCredentials

__all__ = ["KinesisDeadLetters", "KinesisDeadLetterWriter", "MAX_ENVELOPE_BYTES"]

log = logging.getLogger(__name__)

#: Kinesis takes records of at most 1 MiB (data plus partition key).
MAX_ENVELOPE_BYTES = MAX_RECORD_BYTES


#: Pause before refused entries are put again: 50 ms, doubling with each refusal in a row. No cap: with
#: ``put_attempts`` up to 100 the pauses can grow without a useful bound (kept as it was; the largest ``max_s``
#: below is the last pause 100 attempts can reach). No jitter: writers throttled together retry together.
PUT_RETRY = RetryPolicy(initial_s=0.05, multiplier=2.0, max_s=0.05 * 2.0 ** 98)


@dataclass(frozen=True)
class KinesisDeadLetters:
    """Dead letters put into the Kinesis stream ``stream_name``, one record per dead letter: its data is the JSON
    envelope (:func:`~kinesis_spout.deadletters.envelope`; the original data in base64), its partition key the
    original one. ``region``, ``endpoint_url`` and ``credentials`` (an :class:`~kinesis_spout.AwsCredentials`)
    default to the spout's own.

    Each dead letter is put once: a ``PutRecords`` entry that Kinesis refused (throttled, internal error) is put
    again, alone with the other refused ones, up to ``put_attempts`` times within one write; entries already
    accepted are never sent again. A write that still has refused entries (or whose call failed as a whole) is
    retried by the spout's dead-letter thread with backoff, the checkpoint waiting meanwhile. A duplicate can only
    come from a call whose answer was lost after Kinesis stored it, or from a crash before the checkpoint moved.

    Oversized letters: Kinesis takes at most 1 MiB (data plus partition key) per record, and the envelope holds the
    data in base64, so a record of about 786 KB (768 KiB) or more cannot go into the stream whole. Such a letter is a
    permanent failure that must neither block the others nor be lost: the stream gets a *stub* in its place (the
    envelope without ``data``, with ``truncated: true``, ``data_size``, ``data_sha256`` and ``full_letter``; see
    :func:`~kinesis_spout.deadletters.stub_envelope_bytes`), by whose position the record is read again from its
    stream while the stream retains it. With ``oversized`` (a destination without a size limit, such as
    :class:`~kinesis_spout.deadletters.JsonLinesDeadLetters`), the whole letter is written there first, durably,
    and the stub's ``full_letter`` says where; if that write fails, the letter stays queued (and its checkpoint
    waits) while the other letters go on.
    """

    stream_name: str
    region: str | None = None
    endpoint_url: str | None = None
    put_attempts: int = 3
    credentials: AwsCredentials | None = None
    oversized: DeadLetterDestination | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.stream_name, str) or not self.stream_name.strip():
            raise ConfigError(f"KinesisDeadLetters.stream_name must be a stream name, got {self.stream_name!r}")
        if isinstance(self.put_attempts, bool) or not isinstance(self.put_attempts, int) or \
                not 1 <= self.put_attempts <= 100:
            raise ConfigError(f"KinesisDeadLetters.put_attempts must be a whole number from 1 to 100, got "
                              f"{self.put_attempts!r}")
        if self.oversized is not None and (not isinstance(self.oversized, DeadLetterDestination)
                                           or isinstance(self.oversized, KinesisDeadLetters)):
            raise ConfigError(f"KinesisDeadLetters.oversized must be a dead-letter destination without Kinesis' 1 MiB "
                              f"record limit, such as JsonLinesDeadLetters(path), or None; got {self.oversized!r}")

    def open_writer(self, config: SpoutConfig) -> "KinesisDeadLetterWriter":
        kinesis = config.kinesis  # where the spout reads: the default of where the letters go
        if self.stream_name == config.stream_name and (self.endpoint_url or kinesis.endpoint_url) == \
                kinesis.endpoint_url:
            raise ConfigError(f"the dead-letter stream {self.stream_name!r} is the stream the spout reads: its dead "
                              "letters would be read again as records; use another stream")
        fallback = None
        if self.oversized is not None:
            path = getattr(self.oversized, "path", None)
            fallback = (self.oversized.open_writer(config), f"file {path}" if path else repr(self.oversized))
        return KinesisDeadLetterWriter(self.stream_name, self.region or kinesis.region,
                                       self.endpoint_url or kinesis.endpoint_url, self.put_attempts,
                                       credentials=self.credentials or kinesis.credentials, oversized=fallback)


class KinesisDeadLetterWriter:
    """Puts envelopes with ``PutRecords`` through the project's one PutRecords writer
    (:class:`~kinesis_spout.kinesis.writing.putter.RecordPutter`; the client is made on the first write). One caller
    thread.

    ``oversized`` is the fallback writer for letters over the record limit and the text stubs give as their
    ``full_letter``. ``puts`` counts records accepted by Kinesis, ``stubs`` the stubs among them. The message ids of
    oversized letters already in the fallback whose stub is not yet in the stream are kept, so that a retried write
    does not write them to the fallback again.
    """

    def __init__(self, stream_name: str, region: str | None, endpoint_url: str | None, put_attempts: int,
                 client: Any = None, credentials: AwsCredentials | None = None,
                 oversized: tuple[DeadLetterWriter, str] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.stream_name = stream_name
        self.credentials = credentials
        self.region = region
        self.endpoint_url = endpoint_url
        self.put_attempts = put_attempts
        self.oversized = oversized
        self._sleep = sleep  # between puts of refused entries (PUT_RETRY's delays)
        self._client = client
        self._putter: RecordPutter[Any] | None = None
        self._in_fallback: set[str] = set()
        self.puts = 0  # records accepted by Kinesis
        self.stubs = 0  # stubs of oversized letters accepted

    def write(self, letters: Sequence[DeadLetter]) -> None:
        """Put every letter (called by the spout's dead-letter thread). An oversized letter goes whole to the
        fallback first, if any, then as a stub into the stream; one whose fallback write fails is left out of this
        call and reported not written (raising :class:`DeadLetterError` once the others are put). Changes the
        stream, the fallback, the counters and the set of letters already in the fallback."""
        datas = [envelope_bytes(letter) for letter in letters]
        big = [letter for letter, data in zip(letters, datas)
               if _record_size(data, letter.record.partition_key) > MAX_ENVELOPE_BYTES]
        held: set[int] = set()  # oversized letters whose fallback write failed: not put, retried later
        fallback_error: BaseException | None = None
        if big:
            held, fallback_error = self._to_fallback(big)
        bigs = {id(letter) for letter in big}
        full = self.oversized[1] if self.oversized is not None else None
        entries = []
        for letter, data in zip(letters, datas):
            if id(letter) in held:
                continue
            if id(letter) in bigs:
                data = stub_envelope_bytes(letter, full)
            entries.append((letter, {"Data": data, "PartitionKey": letter.record.partition_key}))
        try:
            written: list[DeadLetter] = self.put_entries(entries)
        except DeadLetterError as exc:
            raise DeadLetterError(str(exc), written=self._done(list(exc.written), bigs)) from exc.__cause__
        self._done(written, bigs)
        if fallback_error is not None:
            raise DeadLetterError(f"{len(held)} dead letters too large for stream {self.stream_name!r} could not be "
                                  f"written whole to {full}: {fallback_error}; they are retried",
                                  written=written) from fallback_error

    def put_entries(self, entries: list[tuple[Any, dict[str, Any]]]) -> list[Any]:
        """Put ``(item, {"Data": ..., "PartitionKey": ...})`` entries into ``stream_name`` in PutRecords calls of at
        most 500 records and 5 MiB, refused entries put again up to ``put_attempts`` times; returns the items
        accepted, in order. Raises :class:`DeadLetterError` (``written``: the items accepted) when entries stay
        refused or a call fails (a failed call is not tried again here: the dead-letter thread retries the write).
        Dead letters (:meth:`write`) and replays (:mod:`kinesis_spout.deadletters.replay`) both put through it.
        Changes the stream and ``puts``."""
        try:
            putter = self._writer()
        except Exception as exc:  # noqa: BLE001 - no client (credentials, region): retried by the caller
            raise DeadLetterError(f"putting records into stream {self.stream_name!r} failed: {exc}") from exc
        before = putter.counters.records_put
        try:
            landed = putter.put([(item, PutEntry(entry["Data"], entry["PartitionKey"])) for item, entry in entries])
        except PutRecordsError as exc:  # entries refused put_attempts times, or a call failed (its __cause__)
            raise DeadLetterError(str(exc), written=list(exc.written)) from (exc.__cause__ or exc)
        except Exception as exc:  # noqa: BLE001 - a failed call: wrapped, retried by the caller
            raise DeadLetterError(f"putting records into stream {self.stream_name!r} failed: {exc}") from exc
        finally:
            self.puts += putter.counters.records_put - before
        return [x.item for x in landed]

    def _to_fallback(self, big: list[DeadLetter]) -> tuple[set[int], BaseException | None]:
        """Log the oversized letters and write those not yet there to the fallback, if any. Returns the ids of the
        letters whose fallback write failed, and its error."""
        for letter in big:
            log.warning("the dead letter of %s (%d bytes of data) is over Kinesis' 1 MiB record limit as a JSON "
                        "envelope: stream %r gets a stub without its data%s", letter.record.message_id,
                        len(letter.record.data), self.stream_name,
                        f", the whole letter goes to {self.oversized[1]}" if self.oversized else
                        "; read the record again from its stream by the stub's sequence number")
        if self.oversized is None:
            return set(), None
        todo = [letter for letter in big if letter.record.message_id not in self._in_fallback]
        if not todo:
            return set(), None
        done: list[DeadLetter]
        error: BaseException | None
        try:
            self.oversized[0].write(todo)
        except DeadLetterError as exc:
            done, error = list(exc.written), exc
        except Exception as exc:  # noqa: BLE001 - retried with the letter on the next write
            done, error = [], exc
        else:
            done, error = todo, None
        self._in_fallback.update(letter.record.message_id for letter in done)
        finished = {id(letter) for letter in done}
        return {id(letter) for letter in todo if id(letter) not in finished}, error

    def _done(self, written: list[DeadLetter], bigs: set[int]) -> list[DeadLetter]:
        """Forget the fallback entries of stubs now in the stream; count those stubs."""
        for letter in written:
            if id(letter) in bigs:
                self.stubs += 1
                self._in_fallback.discard(letter.record.message_id)
        return written

    def _writer(self) -> RecordPutter[Any]:
        """The putter (and its client), made on first use: refused entries put again after :data:`PUT_RETRY`'s
        delays up to ``put_attempts`` times; a call that fails as a whole is raised at once."""
        if self._putter is None:
            if self._client is None:
                from kinesis_spout.kinesis.client import make_client

                self._client = make_client(self.region, self.endpoint_url, credentials=self.credentials)
            self._putter = RecordPutter(self.stream_name, self._client,
                                        replace(PUT_RETRY, max_attempts=self.put_attempts), retry_calls=False,
                                        what="dead letters", sleep=self._sleep)
        return self._putter

    def close(self) -> None:
        client, self._client = self._client, None
        self._putter = None
        if client is not None:
            client.close()
        if self.oversized is not None:
            self.oversized[0].close()


def _record_size(data: bytes, partition_key: str) -> int:
    """What Kinesis counts against its limits: the data plus the partition key's UTF-8 bytes."""
    return PutEntry(data, partition_key).size
