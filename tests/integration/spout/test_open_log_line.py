"""The line a spout logs when it opens says what it reads, and names a shard as waiting only when a parent of its
is still to be read (with that parent), never a shard that has no parent; a task that owns no shard says so."""

from __future__ import annotations

import logging

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream


def opened(caplog: pytest.LogCaptureFixture) -> str:
    (line,) = [r.getMessage() for r in caplog.records if " opened stream " in r.getMessage()]
    return line


def config(endpoint: KinesisEndpoint, stream: str, **overrides: object) -> SpoutConfig:
    return SpoutConfig(stream_name=stream, app_name="open-line", endpoint_url=endpoint.endpoint_url,
                       region=endpoint.region, coordination="static",
                       initial_position=InitialPosition.TRIM_HORIZON, **overrides)  # type: ignore[arg-type]


def test_children_of_an_unread_parent_are_named_with_it_and_the_parent_is_read(
        kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=2)
    parent, other = kinesalite.shard_ids(stream)
    client = kinesalite.client()
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 126))
    wait_for_stream(client, stream)
    children = sorted(set(kinesalite.shard_ids(stream)) - {parent, other})
    with KinesisSpout(config(kinesalite, stream), MemoryCheckpointStore()):
        line = opened(caplog)
    assert "task 0/1 owns 4 of 4 shards" in line, line
    assert f"reading {parent} TRIM_HORIZON" in line and f"{other} TRIM_HORIZON" in line, line
    waiting = line[line.index("waiting for their parents: "):]
    assert waiting == "waiting for their parents: " + ", ".join(f"{c} (after {parent})" for c in children), line
    assert "(none" not in line, line


def test_shards_without_parents_are_never_said_to_wait(kinesalite: KinesisEndpoint,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=4)
    with KinesisSpout(config(kinesalite, stream), MemoryCheckpointStore()):
        line = opened(caplog)
    assert "owns 4 of 4 shards" in line and line.count("TRIM_HORIZON") == 4, line
    assert "waiting" not in line and "(none" not in line, line


def test_a_task_that_owns_no_shard_says_so_plainly(kinesalite: KinesisEndpoint,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    stream = kinesalite.create_stream(shards=1)
    with KinesisSpout(config(kinesalite, stream, task_index=1, task_count=2), MemoryCheckpointStore()):
        line = opened(caplog)
    assert "task 1/2 owns 0 of 1 shards: nothing to read" in line, line
    assert "(none" not in line and "waiting" not in line, line
