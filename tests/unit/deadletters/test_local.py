"""The default dead-letter writer's log: the first letter of each shard, then a summary at most every 10 s."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kinesis_spout.deadletters.base import DeadLetter
from kinesis_spout.deadletters.local import SUMMARY_EVERY_S, LocalDeadLetterWriter
from kinesis_spout.records import Record, SequenceKey


def letter(shard: str, n: int) -> DeadLetter:
    seq = str(49_000_000_000_000_000_000 + n)
    record = Record(shard, seq, None, f"pk-{n}", b"data %d" % n, None, SequenceKey.parse(seq, None))
    return DeadLetter(record, "poison record: test", 1, "orders", "app", 1_780_000_000.0)


def test_a_storm_of_letters_logs_the_first_of_each_shard_and_a_summary_every_ten_seconds(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    now = [100.0]
    path = tmp_path / "app" / "orders.jsonl"
    writer = LocalDeadLetterWriter(str(path), clock=lambda: now[0])
    for n in range(50):  # 100 letters of two shards within 5 s
        writer.write([letter("shardId-1", n), letter("shardId-2", n)])
        now[0] += 0.1
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and all(str(path) in m and "(first: " in m for m in messages)
    now[0] += SUMMARY_EVERY_S
    writer.write([letter("shardId-1", 99)])
    assert len(caplog.records) == 3 and "99 more dead letters" in caplog.records[-1].getMessage()
    assert "shardId-1: 50, shardId-2: 49" in caplog.records[-1].getMessage()
    writer.write([letter("shardId-2", 99)])
    writer.close()
    assert len(caplog.records) == 4 and "1 more dead letters" in caplog.records[-1].getMessage()
    assert len(path.read_text().splitlines()) == 102 and writer.written == 102
    assert json.loads(path.read_text().splitlines()[0])["shard_id"] == "shardId-1"


def test_a_line_torn_by_another_worker_after_this_writer_opened_the_shared_file_stays_apart_from_its_next_letter(
        tmp_path: Path) -> None:
    """Workers of one app on one host share the default file. One of them is killed in the middle of a write while
    another has the file open: the survivor's next letter must start on a line of its own, or the torn half and that
    whole letter make one line that parses as neither, and a letter whose record is done is lost."""
    path = tmp_path / "app" / "orders.jsonl"
    survivor = LocalDeadLetterWriter(str(path))
    survivor.write([letter("shardId-1", 1)])
    whole = LocalDeadLetterWriter(str(path))
    whole.write([letter("shardId-2", 2)])
    whole.close()
    with open(path, "ab") as killed:  # what a worker killed in the middle of its write leaves at the end
        killed.write(path.read_bytes().splitlines()[-1][:40])
    survivor.write([letter("shardId-1", 3)])
    survivor.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines[2]) == 40
    assert [json.loads(line)["sequence_number"][-1] for line in (*lines[:2], *lines[3:-1])] == ["1", "2", "3"]
