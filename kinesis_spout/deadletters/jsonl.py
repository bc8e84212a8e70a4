"""A JSON Lines file as dead-letter destination: one envelope per line, flushed and fsynced per write; its folder
fsynced when the file is opened, so that a new file's entry in the folder is on disk too."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Sequence

from kinesis_spout.deadletters.envelope import DeadLetter, envelope_bytes
from kinesis_spout.errors import ConfigError

if TYPE_CHECKING:
    from kinesis_spout.config import SpoutConfig

__all__ = ["JsonLinesDeadLetters", "JsonLinesWriter"]


@dataclass(frozen=True)
class JsonLinesDeadLetters:
    """Dead letters appended to the file ``path``, one JSON envelope (see
    :func:`~kinesis_spout.deadletters.envelope`) per line.

    Each write of a batch of dead letters is one ``write`` of whole lines, then ``flush`` and ``fsync``: a record
    is done only after its line is on disk. When the writer opens the file (creating it if needed) it also fsyncs
    the folder, so that a power cut cannot lose a newly created file with the lines in it. A crash in the middle
    of a write may leave a last line cut short; each write looks at the file's last byte first and starts on a new
    line after such a torn line (also one torn by another process since this one opened the file), and readers
    (``kinesis-spout dead-letters``) skip and report a line that does not parse: its record was not checkpointed
    and is dead-lettered again. Give each process its own file.
    """

    path: str

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)) or not str(self.path).strip():
            raise ConfigError(f"JsonLinesDeadLetters.path must be a file path, got {self.path!r}")
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise ConfigError(f"JsonLinesDeadLetters.path {str(self.path)!r}: the folder {folder!r} does not "
                              f"exist; create it first")

    def open_writer(self, config: SpoutConfig) -> "JsonLinesWriter":
        return JsonLinesWriter(str(self.path))


class JsonLinesWriter:
    """Appends envelopes to a file (opened on the first write; reopened after an error). One caller thread.

    Who calls: the spout's dead-letter thread. ``write`` returns only once the batch's lines are fsynced (and, on the
    first write, the folder holding the file); it changes only the file. A file whose last line is torn (a process
    killed in the middle of a write, this one or another sharing the file) gets a newline before the batch, in the
    same write, so that no whole letter is glued to a torn half."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def write(self, letters: Sequence[DeadLetter]) -> None:
        if not letters:
            return
        payload = b"".join(envelope_bytes(letter) + b"\n" for letter in letters)
        try:
            f = self._open()
            if _ends_torn(f):  # checked before every write: another process may have torn it since the open
                payload = b"\n" + payload
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:
            self.close()  # the next attempt reopens and starts on a fresh line
            raise

    def open(self) -> None:
        """Open the file now (creating it, and fsyncing its folder), if it is not open. Raises ``OSError``."""
        self._open()

    def _open(self) -> IO[bytes]:
        if self._file is None:
            f = open(self.path, "a+b")  # noqa: SIM115 - kept open across writes, closed by close()
            try:
                _fsync_folder(os.path.dirname(os.path.abspath(self.path)))  # the file's entry, if it was created
            except BaseException:
                f.close()
                raise
            self._file = f
        return self._file

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()


def _ends_torn(f: IO[bytes]) -> bool:
    """True when the file (opened for appending and reading) is not empty and its last byte is not a newline: a
    process was killed in the middle of a write. Two writers that both see it write a newline each: a blank line,
    which readers skip."""
    size = f.seek(0, os.SEEK_END)
    if not size:
        return False
    f.seek(size - 1)
    last = f.read(1)
    f.seek(0, os.SEEK_END)
    return last not in (b"\n", b"")


def _fsync_folder(folder: str) -> None:
    """fsync a folder, making the creation of a file in it durable (where the platform allows opening folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except (PermissionError, IsADirectoryError):  # Windows cannot open a folder: NTFS journals its entries
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
