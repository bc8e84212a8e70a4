"""A dead-letter storm's message says where the letters written before it are: the file when it holds some, and
that none was written (naming the file they would go to) when the storm came first, rather than pointing at a file
that was never created. Against kinesalite."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kinesis_spout import (
    DeadLetterStormError,
    InitialPosition,
    JsonScheme,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
)
from kinesis_spout.deadletters import JsonLinesDeadLetters
from kinesis_spout.testing.kinesis import KinesisEndpoint


def storm_message(endpoint: KinesisEndpoint, stream: str, letters: Path) -> str:
    config = SpoutConfig(stream_name=stream, app_name="storm", endpoint_url=endpoint.endpoint_url,
                         region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                         empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, scheme=JsonScheme(),
                         dead_letter=JsonLinesDeadLetters(str(letters)))
    deadline = time.monotonic() + 30.0
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        while time.monotonic() < deadline:
            try:
                batch = spout.next_batch(max_records=500, timeout_s=0.5)
            except DeadLetterStormError as exc:
                return str(exc)
            spout.ack_many(t.message_id for t in batch)
    pytest.fail("no DeadLetterStormError within 30 s")


def test_a_storm_before_any_letter_was_written_names_no_file_as_holding_letters(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, [f"plain text line {i}" for i in range(150)])
    letters = tmp_path / "letters.jsonl"
    message = storm_message(kinesalite, stream, letters)
    assert not letters.exists()
    assert "letters written before are in" not in message, message
    assert f"no dead letter was written before the storm (they go to {letters}" in message, message


def test_a_storm_after_letters_were_written_names_the_file_that_holds_them(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    kinesalite.put(stream, ["poison 1", "poison 2", *[json.dumps({"n": i}) for i in range(20)]])
    kinesalite.put(stream, [f"plain text line {i}" for i in range(150)])
    letters = tmp_path / "letters.jsonl"
    message = storm_message(kinesalite, stream, letters)
    assert len(letters.read_text().splitlines()) == 2
    assert f"letters written before are in {letters}" in message, message
