"""Dead letters back onto a stream: read letters (a JSON Lines file or a dead-letter stream), put their records
again, and keep a journal of the positions put so that a second replay skips them.

At-least-once: a letter's record is put with its original data and partition key; its position
(``stream shard_id sequence_number sub_sequence_number``) is appended to the journal, flushed and fsynced, only
after Kinesis accepted it. A crash between the two puts it again on the next replay (a duplicate, never a loss).
The puts go through :meth:`KinesisDeadLetterWriter.put_entries` (PutRecords, refused entries put again).

Input is checked whole before anything is put: an unreadable file, or a line that is not a letter (including a stub
whose data was left out), is a :class:`LetterFileError` naming the file and line, and nothing is put.

Torn lines. A process killed in the middle of a write leaves a file's line cut short (its record was not done: the
shard reads it again), and the next writer starts on a new line. A line of a file that does not parse as JSON and
starts like an envelope (``{``), or holds only NUL bytes (what a power cut may leave), is such a torn line: it is
skipped and its number is reported (:attr:`Letters.torn`). A strict prefix of a JSON object never parses, so a line
that parses but is not a letter, or that is not JSON and does not start with ``{`` (a journal, another file), was
not torn: it is refused as above. A whole letter glued to a torn half on one line (written before writers looked
for a torn last line before every write) is read, and the line is reported torn.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import IO, Any, Iterable, Iterator, Sequence

from kinesis_spout.deadletters.base import record_from_envelope
from kinesis_spout.deadletters.kinesis import KinesisDeadLetterWriter
from kinesis_spout.errors import SpoutError
from kinesis_spout.records import Record

__all__ = ["JOURNAL_SUFFIX", "STREAM_PREFIX", "Letter", "LetterFileError", "Letters", "ReplayReport",
           "count_letters", "journal_of", "load_letters", "read_letter_file", "read_letter_stream", "replay_letters",
           "replay_to_kinesis"]

#: The journal of a letter file ``F`` is ``F.replayed`` (of a dead-letter stream ``S``: ``S.replayed``, here).
JOURNAL_SUFFIX = ".replayed"
#: A source ``stream:NAME`` is the dead-letter stream NAME (of :class:`~kinesis_spout.deadletters.KinesisDeadLetters`).
STREAM_PREFIX = "stream:"
#: How an envelope's line starts (compact JSON, ``version`` first): where a whole letter glued to a torn half begins.
ENVELOPE_START = b'{"version":'


class LetterFileError(SpoutError, ValueError):
    """Letters could not be read: the message names the file (or stream) and the line, and what is wrong."""


@dataclass(frozen=True)
class Letter:
    """A letter read back: the stream its record came from, the record, the reason, and where it was read."""

    stream: str
    record: Record
    reason: str
    where: str

    @property
    def position(self) -> str:
        """The record's position, as the journal keeps it."""
        r = self.record
        sub = "-" if r.sub_sequence_number is None else r.sub_sequence_number
        return f"{self.stream} {r.shard_id} {r.sequence_number} {sub}"


@dataclass(frozen=True)
class Letters:
    """What a source holds: its ``letters`` in order, and the numbers of the ``torn`` lines skipped (a file's)."""

    letters: list[Letter]
    torn: tuple[int, ...] = ()

    def torn_note(self) -> str:
        """The summary of the torn lines for the CLI (empty without any), e.g. ``skipped 1 torn line (line 7) ...``."""
        if not self.torn:
            return ""
        n = len(self.torn)
        shown = ", ".join(str(line) for line in self.torn[:10]) + (f", ... ({n} in all)" if n > 10 else "")
        if n == 1:
            return (f"skipped 1 torn line (line {shown}): a write cut short by a crash; its record was not done "
                    f"then, so its shard read it again after the restart")
        return (f"skipped {n} torn lines (lines {shown}): writes cut short by crashes; their records were not done "
                f"then, so their shards read them again after the restarts")


@dataclass(frozen=True)
class ReplayReport:
    """What a replay did: ``put`` records accepted by Kinesis, ``skipped`` letters already in the journal."""

    put: int
    skipped: int
    journal: str | None


def _letter(text: str | bytes, where: str) -> Letter:
    try:
        return _letter_of(json.loads(text), where)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise LetterFileError(f"{where}: not a dead letter ({exc}); fix or remove this line, nothing was put") \
            from None


def _letter_of(doc: Any, where: str) -> Letter:
    """The letter of a parsed envelope; :class:`LetterFileError` naming ``where`` when it is not one."""
    try:
        stream, record = record_from_envelope(doc)
        return Letter(stream, record, str(doc.get("reason", "")), where)
    except (ValueError, TypeError) as exc:
        raise LetterFileError(f"{where}: not a dead letter ({exc}); fix or remove this line, nothing was put") \
            from None


def read_letter_file(path: str) -> Letters:
    """Every letter of a JSON Lines file, in order (blank lines skipped, torn lines skipped and numbered: see the
    module's notes). Raises :class:`LetterFileError` for an unreadable file or a line that is not a letter."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as exc:
        raise LetterFileError(f"cannot read the dead-letter file {path}: {exc.strerror or exc}") from exc
    letters: list[Letter] = []
    torn: list[int] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            doc = json.loads(line)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError (a character cut in two)
            if not _torn(line):
                raise LetterFileError(f"{where}: not a dead letter (not JSON, and not the start of an envelope cut "
                                      f"short by a crash): is {path} a dead-letter file? Fix or remove this line, "
                                      f"nothing was put") from None
            torn.append(n)
            letters += _glued(line, where)
            continue
        letters.append(_letter_of(doc, where))
    return Letters(letters, tuple(torn))


def _torn(line: bytes) -> bool:
    """Whether a line that does not parse is what a crash leaves: an envelope's start, or NUL bytes."""
    rest = line.lstrip(b"\x00 \t\r")
    return not rest or rest.startswith(b"{")


def _glued(line: bytes, where: str) -> Sequence[Letter]:
    """The whole letter at the end of a torn line, if one follows the torn half on the same line (else none)."""
    start = line.find(ENVELOPE_START, 1)
    while start > 0:
        try:
            doc = json.loads(line[start:])
        except ValueError:
            start = line.find(ENVELOPE_START, start + 1)
            continue
        return [_letter_of(doc, f"{where}, from byte {start + 1}")]
    return []


def read_letter_stream(client: Any, stream: str) -> Letters:
    """Every letter in a dead-letter stream (each shard from TRIM_HORIZON to its end or its tip). ``client`` is a
    boto3 Kinesis client. A record is put whole or not at all, so none is torn: one that is not a letter is a
    :class:`LetterFileError`."""
    letters: list[Letter] = []
    shards = client.list_shards(StreamName=stream)["Shards"]
    for shard in shards:
        shard_id = shard["ShardId"]
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard_id,
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            reply = client.get_records(ShardIterator=iterator, Limit=10_000)
            for item in reply["Records"]:
                letters.append(_letter(item["Data"], f"stream {stream}, {shard_id}:{item['SequenceNumber']}"))
            iterator = reply.get("NextShardIterator")
            if not reply["Records"] and not reply.get("MillisBehindLatest"):
                break  # at the tip (an open shard never ends)
    return Letters(letters)


def _journal(path: str) -> set[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return {line.strip() for line in f if line.strip()}
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise LetterFileError(f"cannot read the replay journal {path}: {exc.strerror or exc}") from exc


def _append(journal: IO[str], positions: Iterable[str]) -> None:
    journal.write("".join(f"{p}\n" for p in positions))
    journal.flush()
    os.fsync(journal.fileno())


def replay_letters(letters: list[Letter], writer: KinesisDeadLetterWriter, *, to_stream: str | None = None,
                   journal: str | None = None) -> ReplayReport:
    """Put each letter's record (data and partition key) onto ``to_stream`` or, without one, the stream it came
    from (``writer.stream_name`` is set per target stream). Letters whose position is in ``journal`` are skipped;
    the positions put are appended to it after each accepted PutRecords call. Raises the writer's
    :class:`~kinesis_spout.errors.DeadLetterError` when entries stay refused; what was accepted is in the journal.
    Who calls: the ``kinesis-spout dead-letters replay`` command, or a program; changes the streams and the journal.
    """
    done = _journal(journal) if journal else set()
    todo = [letter for letter in letters if letter.position not in done]
    by_stream: dict[str, list[Letter]] = {}
    for letter in todo:
        by_stream.setdefault(to_stream or letter.stream, []).append(letter)
    put = 0
    out = open(journal, "a", encoding="utf-8") if journal else None  # noqa: SIM115 - closed below
    try:
        for stream, group in by_stream.items():
            writer.stream_name = stream
            for start in range(0, len(group), 500):
                chunk = group[start:start + 500]
                entries = [(letter, {"Data": letter.record.data, "PartitionKey": letter.record.partition_key})
                           for letter in chunk]
                try:
                    accepted = writer.put_entries(entries)
                except Exception as exc:
                    if out is not None:
                        _append(out, (letter.position for letter in getattr(exc, "written", ())))
                    raise
                put += len(accepted)
                if out is not None:
                    _append(out, (letter.position for letter in accepted))
    finally:
        if out is not None:
            out.close()
    return ReplayReport(put=put, skipped=len(letters) - len(todo), journal=journal)


def count_letters(letters: Iterable[Letter]) -> Iterator[tuple[str, str, int]]:
    """``(shard_id, reason, count)`` for the letters, reasons shortened to what precedes a record id or a colon."""
    counts: Counter[tuple[str, str]] = Counter()
    for letter in letters:
        reason = letter.reason.split(": record ")[0].split(" on attempt ")[0]
        counts[(letter.record.shard_id, reason)] += 1
    for (shard, reason), n in sorted(counts.items()):
        yield shard, reason, n


def journal_of(source: str) -> str:
    """The default journal of a source: ``FILE.replayed``, or ``NAME.replayed`` in the working directory."""
    return source.removeprefix(STREAM_PREFIX) + JOURNAL_SUFFIX


def load_letters(source: str, *, region: str | None = None, endpoint_url: str | None = None) -> Letters:
    """The letters of a JSON Lines file (and its torn lines), or of the dead-letter stream ``stream:NAME`` (read with
    a client made for ``region`` and ``endpoint_url``). Who calls: ``kinesis-spout dead-letters``."""
    if not source.startswith(STREAM_PREFIX):
        return read_letter_file(source)
    from kinesis_spout.kinesis.client import make_client

    client = make_client(region, endpoint_url)
    try:
        return read_letter_stream(client, source.removeprefix(STREAM_PREFIX))
    finally:
        client.close()


def replay_to_kinesis(letters: list[Letter], to_stream: str | None, journal: str | None, region: str | None,
                      endpoint_url: str | None, put_attempts: int = 10) -> ReplayReport:
    """:func:`replay_letters` through a :class:`KinesisDeadLetterWriter` made for ``region`` and ``endpoint_url``
    (closed at the end)."""
    writer = KinesisDeadLetterWriter(to_stream or "", region, endpoint_url, put_attempts)
    try:
        return replay_letters(letters, writer, to_stream=to_stream, journal=journal)
    finally:
        writer.close()
