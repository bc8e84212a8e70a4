"""A dead-letter storm stops the spout before its letters pass the checkpoint; a few poison records never do."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import (
    DeadLetterError,
    DeadLetterStormError,
    InitialPosition,
    JsonScheme,
    KinesisSpout,
    MemoryCheckpointStore,
    SpoutConfig,
    TextScheme,
)
from kinesis_spout.deadletters import JsonLinesDeadLetters
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain


def config(endpoint: KinesisEndpoint, stream: str, letters: Path, **overrides: Any) -> SpoutConfig:
    return SpoutConfig(stream_name=stream, app_name="storm", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                       empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
                       dead_letter=JsonLinesDeadLetters(str(letters)), **overrides)


def read_until_storm(spout: KinesisSpout, timeout_s: float = 20.0) -> tuple[list[str], DeadLetterStormError]:
    """Read and ack until the storm error is raised; returns the message ids delivered and the error."""
    delivered: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            batch = spout.next_batch(max_records=500, timeout_s=0.5)
        except DeadLetterStormError as exc:
            return delivered, exc
        spout.ack_many(t.message_id for t in batch)
        delivered += [t.message_id for t in batch]
    pytest.fail(f"no DeadLetterStormError within {timeout_s} s; delivered {len(delivered)}")


def test_a_json_scheme_on_a_text_stream_stops_within_a_hundred_records_and_the_restart_reads_them(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    good = kinesalite.put(stream, [json.dumps({"n": i}) for i in range(30)])
    text = kinesalite.put(stream, [f"plain text line {i}" for i in range(400)])
    letters = tmp_path / "letters.jsonl"
    store = MemoryCheckpointStore()
    shard = good[0][0]
    with KinesisSpout(config(kinesalite, stream, letters, scheme=JsonScheme()), store) as spout:
        delivered, error = read_until_storm(spout)
        with pytest.raises(DeadLetterStormError):  # it stays stopped
            spout.next_batch(max_records=10, timeout_s=0.1)
        assert spout.poison_records <= 200  # it stopped early, not after the whole stream
    assert isinstance(error, DeadLetterError) and not error.retriable
    message = str(error)
    for part in ("JsonScheme", "max_dead_letters_in_a_row=100", repr(stream), shard, text[0][1], "restart"):
        assert part in message, part
    assert error.rule == "max_dead_letters_in_a_row" and error.letters == 100 and error.shard_ids == (shard,)
    assert delivered == [f"{s}:{q}" for s, q in good]
    assert not letters.exists() or letters.read_text() == ""  # the storm's letters were never written
    stored = store.load(shard)
    assert stored is not None and stored.sequence_number == good[-1][1]  # the last good record, not past it

    with KinesisSpout(config(kinesalite, stream, letters, scheme=TextScheme()), store) as spout:
        again = drain(spout, 400)
    assert [t.message_id for t in again] == [f"{s}:{q}" for s, q in text]
    assert again[0].values[-1] == "plain text line 0"


def test_two_thousand_records_with_one_percent_poison_and_a_burst_of_twenty_never_trip(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=2)
    data = [json.dumps({"n": i}) if i % 100 != 50 else f"poison {i}" for i in range(2000)]
    data[1200:1220] = [f"burst {i}" for i in range(20)]
    placed = kinesalite.put(stream, data, partition_keys=["one-key"] * len(data))  # one shard, in order
    letters = tmp_path / "letters.jsonl"
    store = MemoryCheckpointStore()
    poison = {f"{s}:{q}" for (s, q), d in zip(placed, data) if not d.startswith("{")}
    with KinesisSpout(config(kinesalite, stream, letters, scheme=JsonScheme()), store) as spout:
        got = drain(spout, len(data) - len(poison), timeout_s=30)
        assert spout.flush_checkpoints()
    assert len(got) == len(data) - len(poison)
    kept = {f"{d['shard_id']}:{d['sequence_number']}" for d in map(json.loads, letters.read_text().splitlines())}
    assert kept == poison  # every poison record kept, none lost to a stop
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]
