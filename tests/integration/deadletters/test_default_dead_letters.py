"""Dead letters are kept by default: whole, in a local JSON Lines file, fsynced before the checkpoint passes their
record, with a few log lines per storm of letters; where the file cannot be written, whole in the log."""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.config.deadletters import DEAD_LETTER_DIR_ENV
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain


def config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    return SpoutConfig(**{**dict(stream_name=stream, app_name="kept", endpoint_url=endpoint.endpoint_url,
                                 region=endpoint.region, initial_position=InitialPosition.TRIM_HORIZON,
                                 empty_record_backoff_s=0.2, checkpoint_interval_s=0.0, scheme=JsonScheme()),
                          **overrides})


def poisoned(endpoint: KinesisEndpoint, stream: str, poison: int) -> tuple[list[tuple[str, str]], set[str]]:
    """``poison`` text records, each between JSON ones, on one shard; returns what was placed and the poison ids."""
    data: list[str] = []
    for i in range(poison):
        data += [json.dumps({"n": i}), f"poison {i}"]
    data.append(json.dumps({"n": "last"}))
    placed = endpoint.put(stream, data, partition_keys=["k"] * len(data))
    return placed, {f"{s}:{q}" for (s, q), d in zip(placed, data) if d.startswith("poison")}


def test_by_default_every_letter_is_kept_whole_in_the_folder_with_a_few_log_lines(
        kinesalite: KinesisEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    monkeypatch.setenv(DEAD_LETTER_DIR_ENV, str(tmp_path / "dl"))
    stream = kinesalite.create_stream(shards=1)
    placed, poison = poisoned(kinesalite, stream, 53)
    store = MemoryCheckpointStore()
    with KinesisSpout(config(kinesalite, stream), store) as spout:
        assert len(drain(spout, len(placed) - len(poison))) == len(placed) - len(poison)
        assert spout.flush_checkpoints()
    path = tmp_path / "dl" / "kept" / f"{stream}.jsonl"
    letters = [json.loads(line) for line in path.read_text().splitlines()]
    assert {f"{d['shard_id']}:{d['sequence_number']}" for d in letters} == poison
    first = letters[0]
    assert base64.b64decode(first["data"]).startswith(b"poison ")
    assert first["stream"] == stream and first["app"] == "kept" and first["attempts"] == 1
    assert first["reason"].startswith("poison record: ") and first["dead_lettered_at"]
    assert "sub_sequence_number" in first and first["partition_key"] == "k"
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]
    about = [r for r in caplog.records if str(path) in r.getMessage()]
    assert 1 <= len(about) <= 3, [r.getMessage() for r in about]  # the first letter, a summary: not 53 lines
    assert not [r for r in caplog.records if r.getMessage().startswith("dead letter ")]


def test_a_folder_that_cannot_be_created_sends_whole_letters_to_the_log_with_a_warning_naming_the_setting(
        kinesalite: KinesisEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(DEAD_LETTER_DIR_ENV, str(blocker / "dl"))  # under a file: cannot be created (even as root)
    stream = kinesalite.create_stream(shards=1)
    placed, poison = poisoned(kinesalite, stream, 3)
    store = MemoryCheckpointStore()
    with KinesisSpout(config(kinesalite, stream), store) as spout:
        drain(spout, len(placed) - len(poison))
        assert spout.flush_checkpoints()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and DEAD_LETTER_DIR_ENV in
                r.getMessage()]
    assert len(warnings) == 1 and "cannot create or open the dead-letter file" in warnings[0]
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("dead letter ")]
    envelopes = [json.loads(m[m.index("{"):]) for m in logged]
    assert {f"{d['shard_id']}:{d['sequence_number']}" for d in envelopes} == poison
    assert sorted(base64.b64decode(d["data"]) for d in envelopes) == [b"poison 0", b"poison 1", b"poison 2"]
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]


def test_a_letter_is_fsynced_before_the_checkpoint_passes_its_record(
        moto_kinesis: KinesisEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEAD_LETTER_DIR_ENV, str(tmp_path))
    stream = moto_kinesis.create_stream(shards=1)
    placed = moto_kinesis.put(stream, [json.dumps({"n": i}) for i in range(5)])
    shard, failed_seq = placed[2]
    store = MemoryCheckpointStore()
    seen_at_fsync: list[str | None] = []
    real_fsync = os.fsync

    def fsync_spy(fd: int) -> None:  # the checkpoint as it stands when a letter's bytes go to disk
        cp = store.load(shard)
        seen_at_fsync.append(cp.sequence_number if cp is not None else None)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_spy)
    with KinesisSpout(config(moto_kinesis, stream, retry_limit=0), store) as spout:
        batch = drain(spout, 5, ack=False)
        spout.ack_many(t.message_id for t in batch if t.record.sequence_number != failed_seq)
        spout.fail(f"{shard}:{failed_seq}")  # no retry left: a dead letter
        assert spout.flush_checkpoints()
        assert store.load(shard).sequence_number == placed[-1][1]
    assert seen_at_fsync, "the letter was never fsynced"
    assert all(seq is None or int(seq) < int(failed_seq) for seq in seen_at_fsync), seen_at_fsync
