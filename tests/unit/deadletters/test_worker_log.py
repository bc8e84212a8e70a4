"""The dead-letter thread's log: one WARNING per batch of letters written (how many, why, where), one DEBUG line per
letter; a writer that logs its letters itself (the default JSON Lines file) is not logged twice."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import pytest

from kinesis_spout.deadletters.base import DeadLetter, HandlerWriter
from kinesis_spout.deadletters.local import LocalDeadLetterWriter
from kinesis_spout.deadletters.worker import DeadLetterWorker
from kinesis_spout.records import Record, SequenceKey


def letter(shard: str, n: int, reason: str) -> DeadLetter:
    seq = str(49_000_000_000_000_000_000 + n)
    record = Record(shard, seq, None, f"pk-{n}", b"data %d" % n, None, SequenceKey.parse(seq, None))
    return DeadLetter(record, reason, 3, "sentences", "wordcount", 1_780_000_000.0)


def write_all(writer: object, letters: Sequence[DeadLetter]) -> None:
    """Queue the letters before the thread starts (one batch), then wait until they are written."""
    done: list[DeadLetter] = []
    worker = DeadLetterWorker(writer, done.extend, deadline_s=60.0)  # type: ignore[arg-type]
    worker.put(letters)
    worker.start()
    try:
        assert worker.flush(30.0), "the letters were not written"
    finally:
        worker.close()
    assert len(done) == len(letters)


def handler(record: Record, reason: str) -> None:
    pass


def test_a_batch_of_letters_is_one_warning_grouped_by_reason_and_one_debug_line_each(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kinesis_spout")
    letters = ([letter(f"shardId-{n % 4}", n, "failed on attempt 3 of 3") for n in range(11)]
               + [letter("shardId-1", 20 + n, "poison record: scheme JsonScheme raised ValueError") for n in range(3)])
    write_all(HandlerWriter(handler), letters)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("14 dead letters written to the dead-letter handler"), warnings[0]
    assert "handler" in warnings[0] and "11 failed on attempt 3 of 3" in warnings[0], warnings[0]
    assert "3 poison record: scheme JsonScheme raised ValueError" in warnings[0], warnings[0]
    assert "4 shards" in warnings[0], warnings[0]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "dead letter " in r.getMessage()]
    assert len(debug) == 14 and all(m.startswith("dead letter shardId-") for m in debug), debug
    assert any(letters[0].record.message_id in m and "failed on attempt 3 of 3" in m for m in debug), debug


def test_many_reasons_are_cut_to_the_most_frequent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    write_all(HandlerWriter(handler), [letter("shardId-0", n, f"poison record: case {n}") for n in range(6)])
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.count("poison record: case") == 3 and "3 more with 3 other reasons" in warning, warning
    assert len(warning) < 400, warning


def test_the_default_file_writer_logs_its_letters_itself(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    path = tmp_path / "wordcount" / "sentences.jsonl"
    write_all(LocalDeadLetterWriter(str(path)), [letter("shardId-0", n, "failed on attempt 3 of 3") for n in range(5)])
    messages = [r.getMessage() for r in caplog.records]
    assert messages and all(str(path) in m for m in messages) and "(first: " in messages[0], messages
    assert not [m for m in messages if m.startswith("5 dead letters written to")], messages  # not twice
