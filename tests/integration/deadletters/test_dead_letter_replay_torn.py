"""`kinesis-spout dead-letters replay` and `list` after a crash: a line a kill cut short (it does not parse) is skipped,
counted and named in the summary, and every whole letter is put; a line that parses but is not a letter is still
refused before anything is put, and so is a line that is not JSON at all and not the start of an envelope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kinesis_spout.cli import main
from kinesis_spout.deadletters import JsonLinesDeadLetters
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import read_all, spout_letters


def replay_argv(letters: Path, target: str, endpoint: KinesisEndpoint) -> list[str]:
    return ["dead-letters", "replay", str(letters), "--to-stream", target, "--endpoint-url", endpoint.endpoint_url,
            "--region", endpoint.region]


def test_a_line_torn_by_a_crash_is_skipped_and_named_and_every_whole_letter_is_put(
        kinesalite: KinesisEndpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    letters = tmp_path / "letters.jsonl"
    first = spout_letters(kinesalite, kinesalite.create_stream(shards=1), JsonLinesDeadLetters(str(letters)))
    whole = letters.read_bytes()
    with open(letters, "ab") as killed:  # the run is killed in the middle of writing a seventh letter
        killed.write(whole.splitlines()[0][:len(whole.splitlines()[0]) // 2])
    second = spout_letters(kinesalite, kinesalite.create_stream(shards=1), JsonLinesDeadLetters(str(letters)))
    assert len(letters.read_bytes().splitlines()) == 13  # the next run started on a line of its own
    target = kinesalite.create_stream(shards=1)

    assert main(replay_argv(letters, target, kinesalite)) == 0
    out = capsys.readouterr().out
    assert "put 12 records; skipped 0 already in" in out and "its record was not done" in out
    assert "skipped 1 torn line (line 7): a write cut short by a crash" in out
    assert sorted((r["Data"], r["PartitionKey"]) for r in read_all(kinesalite, target)) == sorted(first + second)
    assert len((tmp_path / "letters.jsonl.replayed").read_text().splitlines()) == 12

    assert main(replay_argv(letters, target, kinesalite)) == 0  # the journal still holds
    out = capsys.readouterr().out
    assert "put 0 records; skipped 12" in out and "skipped 1 torn line (line 7)" in out

    assert main(["dead-letters", "list", str(letters)]) == 0
    listing = capsys.readouterr().out
    assert "12  letters in all" in listing and "skipped 1 torn line (line 7)" in listing


def test_a_whole_letter_glued_to_a_torn_half_by_an_earlier_writer_is_read_and_the_half_is_named(
        moto_kinesis: KinesisEndpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file written before writers looked for a torn last line before each write: a worker sharing the file went on
    right after another's torn half. The whole letter at the end of that line is read; the half is skipped."""
    letters = tmp_path / "letters.jsonl"
    spout_letters(moto_kinesis, moto_kinesis.create_stream(shards=1), JsonLinesDeadLetters(str(letters)))
    lines = letters.read_bytes().splitlines()
    letters.write_bytes(b"\n".join([*lines[:2], lines[0][:57] + lines[2], b"\x00" * 30, *lines[3:]]) + b"\n")
    target = moto_kinesis.create_stream(shards=1)
    assert main(replay_argv(letters, target, moto_kinesis)) == 0
    out = capsys.readouterr().out
    assert "put 6 records" in out and "skipped 2 torn lines (lines 3, 4)" in out
    assert len(read_all(moto_kinesis, target)) == 6


JOURNAL_LINE = b"stream-a shardId-000000000000 49590338271490256608559692538361571095921575989136 -"


@pytest.mark.parametrize("line", [b'{"version": 1, "reason": "a hand-made line"}', b"[1, 2, 3]", JOURNAL_LINE])
def test_a_line_that_is_not_a_letter_and_not_torn_is_refused_and_nothing_is_put(
        line: bytes, moto_kinesis: KinesisEndpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A crash cuts a letter short, so its line never parses (the closing brace is the envelope's last byte). A line
    that parses but is not a letter, or that is not JSON and does not start like an envelope (a journal, another
    file), comes from elsewhere: skipping it could drop a record the user means to put back."""
    letters = tmp_path / "letters.jsonl"
    spout_letters(moto_kinesis, moto_kinesis.create_stream(shards=1), JsonLinesDeadLetters(str(letters)))
    lines = letters.read_bytes().splitlines()
    letters.write_bytes(b"\n".join([lines[0], line, *lines[1:]]) + b"\n")
    target = moto_kinesis.create_stream(shards=1)
    assert main(replay_argv(letters, target, moto_kinesis)) == 1
    err = capsys.readouterr().err
    assert f"{letters}, line 2: not a dead letter" in err and "nothing was put" in err
    assert read_all(moto_kinesis, target) == [] and not (tmp_path / "letters.jsonl.replayed").exists()
    assert main(["dead-letters", "list", str(letters)]) == 1
    assert f"{letters}, line 2: not a dead letter" in capsys.readouterr().err
    json.loads(lines[0])  # the file is left as it was
    assert letters.read_bytes().splitlines()[1] == line
