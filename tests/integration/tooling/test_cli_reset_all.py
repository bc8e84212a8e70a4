"""``kinesis-spout checkpoints reset --all``: every stored checkpoint of an app's stream rewritten in one command
(to trim-horizon or latest), with the same ``--yes`` guard as the reset of one shard, against a real ZooKeeper."""

from __future__ import annotations

import json
from typing import Any

from kinesis_spout import Checkpoint, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.cli import main

SHARDS = ("shardId-000000000000", "shardId-000000000001", "shardId-000000000002")


def base_args(zookeeper: Any) -> list[str]:
    return ["checkpoints", "--stream", "clicks", "--app", "etl", "--zookeeper", zookeeper.hosts,
            "--prefix", zookeeper.prefix]


def stored(zookeeper: Any) -> ZooKeeperCheckpointStore:
    s = ZooKeeperCheckpointStore.from_config(SpoutConfig(stream_name="clicks", app_name="etl",
                                                         zookeeper=zookeeper.hosts, zookeeper_prefix=zookeeper.prefix))
    s.open()
    return s


def test_reset_all_rewrites_every_stored_checkpoint_and_asks_for_yes_first(zookeeper, capsys) -> None:
    s = stored(zookeeper)
    try:
        s.save(Checkpoint(SHARDS[0], "500"))
        s.save(Checkpoint(SHARDS[1], "900"))
        s.save(Checkpoint(SHARDS[2], None, shard_end=True))
        assert main(base_args(zookeeper) + ["reset", "--all", "--to", "trim-horizon"]) == 2
        out, err = capsys.readouterr()
        assert all(f"/{shard}: " in out for shard in SHARDS), out
        assert "add --yes" in err
        assert s.load(SHARDS[0]).sequence_number == "500"  # nothing changed without --yes
        assert main(base_args(zookeeper) + ["reset", "--all", "--to", "trim-horizon", "--yes"]) == 0
        assert "3 checkpoints rewritten" in capsys.readouterr().out
        for shard in SHARDS:
            cp = s.load(shard)
            assert cp.reset_to == "TRIM_HORIZON" and cp.sequence_number is None and not cp.shard_end, cp
            assert cp.owner.startswith("kinesis-spout reset")
    finally:
        s.close()


def test_reset_all_repairs_unreadable_checkpoints_too(zookeeper, capsys) -> None:
    node = f"{zookeeper.prefix}/etl/clicks/checkpoints/{SHARDS[1]}"
    zookeeper.client().create(node, b"{not json", makepath=True)
    s = stored(zookeeper)
    try:
        s.save(Checkpoint(SHARDS[0], "500"))
    finally:
        s.close()
    assert main(base_args(zookeeper) + ["reset", "--all", "--to", "latest", "--yes"]) == 0
    assert json.loads(zookeeper.client().get(node)[0])["reset_to"] == "LATEST"


def test_reset_all_refuses_a_sequence_number_and_a_shard(zookeeper, capsys) -> None:
    assert main(base_args(zookeeper) + ["reset", "--all", "--to", "500", "--yes"]) == 1
    assert "--all" in capsys.readouterr().err
    assert main(base_args(zookeeper) + ["reset", "--all", "--shard", SHARDS[0], "--to", "latest", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "--all" in err and "--shard" in err


def test_reset_all_without_checkpoints_says_there_is_nothing_to_reset(zookeeper, capsys) -> None:
    assert main(base_args(zookeeper) + ["reset", "--all", "--to", "latest", "--yes"]) == 0
    assert "nothing to reset" in capsys.readouterr().out
