"""The JSON Lines dead-letter file survives a power cut: each batch of letters is on disk (the file's descriptor
fsynced after the batch was written) before the dead-letter thread reports the batch written, and the folder is
fsynced once the file exists, so that the file itself is not lost. A spy wraps the real ``os.fsync``."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pytest

from kinesis_spout import SpoutConfig
from kinesis_spout.deadletters import DeadLetter, DeadLetterWorker, JsonLinesDeadLetters, record_from_envelope
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.testing.process import wait_until


@dataclass(frozen=True)
class Synced:
    """One fsync call: the inode it synced, whether it is a folder, the file's size then, and whether the dead-letter
    file existed then."""

    inode: int
    folder: bool
    size: int
    file_existed: bool


def letters(first: int, n: int) -> list[DeadLetter]:
    out = []
    for i in range(first, first + n):
        seq = str(49_000_000_000_000_000_000 + i)
        record = Record("shardId-000000000000", seq, None, f"pk-{i}", b"data %d" % i, None,
                        SequenceKey.parse(seq, None))
        out.append(DeadLetter(record, "poison record: test", 1, "source", "fsync", 1_780_000_000.0))
    return out


def test_each_batch_is_fsynced_before_it_is_reported_written_and_the_folder_once_the_file_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "dead.jsonl"
    synced: list[Synced] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        st = os.fstat(fd)
        real_fsync(fd)
        synced.append(Synced(st.st_ino, stat.S_ISDIR(st.st_mode), st.st_size, path.exists()))

    monkeypatch.setattr(os, "fsync", spy)
    reports: list[tuple[list[str], list[Synced], int]] = []  # letters reported, fsyncs seen by then, file size

    def on_written(done: Sequence[DeadLetter]) -> None:
        reports.append(([letter.record.sequence_number for letter in done], list(synced), path.stat().st_size))

    writer = JsonLinesDeadLetters(str(path)).open_writer(SpoutConfig(stream_name="source", app_name="fsync"))
    worker = DeadLetterWorker(writer, on_written, deadline_s=60.0)
    batches = [letters(0, 3), letters(3, 2)]
    worker.start()
    try:
        for batch in batches:
            expected = len(reports) + 1
            worker.put(batch)
            assert wait_until(lambda: len(reports) >= expected, 10), "the batch was never reported written"
    finally:
        worker.close()
    file_inode, folder_inode = path.stat().st_ino, tmp_path.stat().st_ino
    on_disk = [record_from_envelope(line)[1].sequence_number for line in path.read_bytes().splitlines()]
    assert on_disk == [letter.record.sequence_number for batch in batches for letter in batch]
    assert [seqs for seqs, _, _ in reports] == [[letter.record.sequence_number for letter in batch]
                                                for batch in batches]
    for n, (_, seen, size) in enumerate(reports, 1):
        file_syncs = [s for s in seen if s.inode == file_inode]
        assert file_syncs and file_syncs[-1].size == size, \
            f"batch {n} was reported written before the file was fsynced after it ({file_syncs})"
        assert len(file_syncs) >= n, f"{len(file_syncs)} fsyncs of the file for {n} batches"
        assert any(s.inode == folder_inode and s.folder and s.file_existed for s in seen), \
            "the folder was not fsynced after the file was created: a power cut may lose the whole file"
