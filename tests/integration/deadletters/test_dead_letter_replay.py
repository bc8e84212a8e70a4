"""`kinesis-spout dead-letters replay`: the letters a spout kept go back onto a stream with their data and partition
keys, refused entries are put again, a second replay puts nothing, and a file that cannot be read puts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinesis_spout.cli import main
from kinesis_spout.deadletters import JsonLinesDeadLetters, KinesisDeadLetters
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import read_all, spout_letters

PTEE = "ProvisionedThroughputExceededException"


def test_letters_of_a_spout_go_back_with_their_keys_a_refusal_is_put_again_and_a_second_replay_puts_nothing(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    proxy, through = fault_proxy
    source = kinesis_backend.create_stream(shards=2)
    target = kinesis_backend.create_stream(shards=1)
    letters = tmp_path / "letters.jsonl"
    poison = spout_letters(kinesis_backend, source, JsonLinesDeadLetters(str(letters)))
    proxy.refuse_records({0: PTEE, 3: PTEE})  # the first PutRecords call: two entries refused
    argv = ["dead-letters", "replay", str(letters), "--to-stream", target, "--endpoint-url", through.endpoint_url,
            "--region", through.region]
    assert main(argv) == 0
    assert "put 6 records; skipped 0" in capsys.readouterr().out
    assert proxy.injected == {f"PutRecords:{PTEE}": 2}
    assert sorted((r["Data"], r["PartitionKey"]) for r in read_all(kinesis_backend, target)) == poison

    assert main(argv) == 0  # the journal: nothing is put twice
    assert "put 0 records; skipped 6" in capsys.readouterr().out
    assert len(read_all(kinesis_backend, target)) == 6
    assert len((tmp_path / "letters.jsonl.replayed").read_text().splitlines()) == 6

    assert main(["dead-letters", "list", str(letters)]) == 0
    listing = capsys.readouterr().out
    assert "6  letters in all" in listing and "poison record" in listing


def test_letters_of_a_dead_letter_stream_go_back_to_the_stream_they_came_from(
        kinesis_backend: KinesisEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # the journal of a stream source goes to the working directory
    source = kinesis_backend.create_stream(shards=1)
    dlq = kinesis_backend.create_stream(shards=1)
    poison = spout_letters(kinesis_backend, source, KinesisDeadLetters(dlq))
    before = len(read_all(kinesis_backend, source))
    argv = ["dead-letters", "replay", f"stream:{dlq}", "--endpoint-url", kinesis_backend.endpoint_url,
            "--region", kinesis_backend.region]
    assert main(argv) == 0
    assert "put 6 records" in capsys.readouterr().out
    again = read_all(kinesis_backend, source)[before:]
    assert sorted((r["Data"], r["PartitionKey"]) for r in again) == poison
    assert (tmp_path / f"{dlq}.replayed").exists()


def test_a_file_that_cannot_be_read_is_named_and_nothing_is_put(
        moto_kinesis: KinesisEndpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """(Lines that are not letters, and lines torn by a crash: test_dead_letter_replay_torn.py.)"""
    target = moto_kinesis.create_stream(shards=1)
    argv = ["dead-letters", "replay", str(tmp_path / "missing.jsonl"), "--to-stream", target, "--endpoint-url",
            moto_kinesis.endpoint_url, "--region", moto_kinesis.region]
    assert main(argv) == 1
    assert "cannot read the dead-letter file" in capsys.readouterr().err
    assert read_all(moto_kinesis, target) == []
