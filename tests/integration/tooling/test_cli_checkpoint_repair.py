"""Repairing checkpoints with the CLI: an unreadable checkpoint is shown (raw bytes, and the reset command that
replaces it) beside the others, the library's error about it points to commands that work, and ``reset --to SEQ``
asks the shard whether the sequence number is one of its own before writing."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from kinesis_spout import Checkpoint, CheckpointError, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.cli import main


def open_store(zookeeper: Any, stream: str = "clicks") -> ZooKeeperCheckpointStore:
    store = ZooKeeperCheckpointStore.from_config(SpoutConfig(stream_name=stream, app_name="etl",
                                                             zookeeper=zookeeper.hosts,
                                                             zookeeper_prefix=zookeeper.prefix))
    store.open()
    return store


def base_args(zookeeper: Any, stream: str = "clicks") -> list[str]:
    return ["checkpoints", "--stream", stream, "--app", "etl", "--zookeeper", zookeeper.hosts,
            "--prefix", zookeeper.prefix]


def corrupt(zookeeper: Any, shard: str, raw: bytes = b"{not json") -> str:
    node = f"{zookeeper.prefix}/etl/clicks/checkpoints/{shard}"
    zookeeper.client().create(node, raw, makepath=True)
    return node


def test_the_listing_shows_every_shard_and_an_unreadable_one_with_its_bytes_and_fix(zookeeper: Any,
                                                                                    capsys: Any) -> None:
    store = open_store(zookeeper)
    try:
        store.save(Checkpoint("shardId-000000000000", "41"))
        store.save(Checkpoint("shardId-000000000002", "43"))
    finally:
        store.close()
    corrupt(zookeeper, "shardId-000000000001")
    assert main(base_args(zookeeper)) == 1  # shown, and the exit code says something needs repair
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("shardId-")}
    assert set(rows) == {"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"}
    assert "41" in rows["shardId-000000000000"] and "43" in rows["shardId-000000000002"]
    assert "unreadable" in rows["shardId-000000000001"]
    assert "b'{not json'" in out
    fix = next(line for line in out.splitlines() if "kinesis-spout checkpoints reset" in line)
    command = shlex.split(fix[fix.index("kinesis-spout"):])
    assert command[command.index("--shard") + 1] == "shardId-000000000001"
    assert main(command[1:]) == 0  # the printed command is the whole fix
    assert main(base_args(zookeeper)) == 0
    assert "(reset to TRIM_HORIZON)" in capsys.readouterr().out


@pytest.mark.parametrize("raw", [b"{not json", json.dumps({"version": 1, "sequence_number": "x1"}).encode()])
def test_the_error_of_an_unreadable_checkpoint_points_to_commands_that_work(zookeeper: Any, capsys: Any,
                                                                            raw: bytes) -> None:
    corrupt(zookeeper, "shardId-000000000005", raw)
    store = open_store(zookeeper)
    try:
        with pytest.raises(CheckpointError) as caught:
            store.load("shardId-000000000005")
    finally:
        store.close()
    commands = re.findall(r"`(kinesis-spout [^`]+)`", str(caught.value))
    assert [c.split()[1:3] for c in commands] == [["checkpoints", "--zookeeper"], ["checkpoints", "reset"]]
    inspect, reset = (shlex.split(c)[1:] for c in commands)
    assert main(inspect) == 1
    assert repr(raw) in capsys.readouterr().out
    assert main(reset) == 0
    assert json.loads(zookeeper.client().get(f"{zookeeper.prefix}/etl/clicks/checkpoints/shardId-000000000005")[0]
                      )["reset_to"] == "TRIM_HORIZON"


def test_reset_to_a_sequence_number_the_shard_does_not_have_is_refused(kinesalite: Any, zookeeper: Any,
                                                                       capsys: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    shard0, shard1 = kinesalite.shard_ids(stream)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(20)], [f"k{i}" for i in range(20)])
    seq0 = next(seq for shard, seq in placed if shard == shard0)
    seq1 = next(seq for shard, seq in placed if shard == shard1)
    store = open_store(zookeeper, stream)
    try:
        store.save(Checkpoint(shard0, seq0))
    finally:
        store.close()
    node = f"{zookeeper.prefix}/etl/{stream}/checkpoints/{shard0}"
    before = zookeeper.client().get(node)[0]
    args = base_args(zookeeper, stream) + ["--endpoint-url", kinesalite.endpoint_url, "--region", kinesalite.region,
                                           "reset", "--shard", shard0, "--yes", "--to"]
    never_given = seq0 + "0"  # ten times the shard's first sequence number: past anything put
    for wrong in ("12345", seq1, never_given):  # not a Kinesis number, another shard's, one Kinesis never gave
        assert main(args + [wrong]) == 1, wrong
        err = capsys.readouterr().err
        assert f"sequence number {wrong!r} is not one of shard {shard0!r} of stream {stream!r}" in err
        assert "not changed" in err and "--force" in err
        assert zookeeper.client().get(node)[0] == before
    assert main(args + [f"{seq0}:2"]) == 0  # its own sequence number (inside an aggregate): written
    cp = json.loads(zookeeper.client().get(node)[0])
    assert (cp["sequence_number"], cp["sub_sequence_number"]) == (seq0, 2)


def test_reset_to_a_sequence_number_is_refused_when_kinesis_cannot_be_asked(zookeeper: Any, capsys: Any) -> None:
    from kinesis_spout.testing.process import free_port

    sequence = "49590338271490256608559692538361571095921575989136588898"
    args = base_args(zookeeper) + ["--endpoint-url", f"http://127.0.0.1:{free_port()}", "--region", "us-east-1",
                                   "reset", "--shard", "shardId-000000000000", "--to", sequence, "--yes"]
    store = open_store(zookeeper)
    try:
        store.save(Checkpoint("shardId-000000000000", "7"))
        assert main(args) == 1
        assert "cannot check sequence number" in capsys.readouterr().err
        assert store.load("shardId-000000000000").sequence_number == "7"
        assert main(args + ["--force"]) == 0
        assert store.load("shardId-000000000000").sequence_number == sequence
    finally:
        store.close()
