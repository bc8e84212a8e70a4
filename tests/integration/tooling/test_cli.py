"""The ``kinesis-spout checkpoints`` command against a real ZooKeeper (and moto for the resume after a reset)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kinesis_spout import Checkpoint, InitialPosition, KinesisSpout, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.cli import AUTH_ENV, main
from kinesis_spout.spark.bookkeeping.batch_store import batch_store_for


def base_args(zookeeper: Any, stream: str = "clicks") -> list[str]:
    return ["checkpoints", "--stream", stream, "--app", "etl", "--zookeeper", zookeeper.hosts,
            "--prefix", zookeeper.prefix]


def store(zookeeper: Any, stream: str = "clicks", **extra: Any) -> ZooKeeperCheckpointStore:
    s = ZooKeeperCheckpointStore.from_config(SpoutConfig(stream_name=stream, app_name="etl", zookeeper=zookeeper.hosts,
                                                         zookeeper_prefix=zookeeper.prefix, **extra))
    s.open()
    return s


def test_list_prints_a_row_per_shard(zookeeper, capsys) -> None:
    assert main(base_args(zookeeper)) == 0
    assert "(none)" in capsys.readouterr().out
    s = store(zookeeper)
    try:
        s.save(Checkpoint("shardId-000000000000", "49590338271490256608559692538361571095921575989136588898")
               .stamped("worker-1"))
        s.save(Checkpoint("shardId-000000000001", None, shard_end=True).stamped("worker-2"))
        batch_store_for(s).save_batch_id(12)
    finally:
        s.close()
    assert main(base_args(zookeeper)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "last batch id: 12" in out
    header = next(line for line in lines if line.startswith("shard "))
    assert header.split() == ["shard", "checkpoint", "shard_end", "owner", "updated_at"]
    row0 = next(line for line in lines if line.startswith("shardId-000000000000")).split()
    assert row0[1:4] == ["49590338271490256608559692538361571095921575989136588898", "false", "worker-1"]
    row1 = next(line for line in lines if line.startswith("shardId-000000000001")).split()
    assert row1[1:4] == ["-", "true", "worker-2"]


def test_reset_refuses_without_yes_and_rewrites_with_it(zookeeper, capsys) -> None:
    s = store(zookeeper)  # made-up sequence numbers: --force skips asking Kinesis whether the shard has them
    try:
        s.save(Checkpoint("shardId-000000000000", "500"))
        assert main(base_args(zookeeper) + ["reset", "--shard", "shardId-000000000000", "--to", "100", "--force"]) == 2
        assert "add --yes" in capsys.readouterr().err
        assert s.load("shardId-000000000000").sequence_number == "500"
        assert main(base_args(zookeeper) + ["reset", "--shard", "shardId-000000000000", "--to", "100", "--force",
                                            "--yes"]) == 0  # backwards: an operator's decision
        assert s.load("shardId-000000000000").sequence_number == "100"
        assert main(base_args(zookeeper) + ["reset", "--shard", "shardId-000000000000", "--to", "latest",
                                            "--yes"]) == 0
        cp = s.load("shardId-000000000000")
        assert cp.reset_to == "LATEST" and cp.sequence_number is None and cp.owner.startswith("kinesis-spout reset")
        assert main(base_args(zookeeper) + ["reset", "--shard", "shardId-000000000000", "--to", "yesterday",
                                            "--yes"]) == 1
        assert "--to must be trim-horizon, latest, a sequence number" in capsys.readouterr().err
        assert main(base_args(zookeeper) + ["reset", "--shard", "shardId-000000000000", "--to", "500:3", "--force",
                                            "--yes"]) == 0  # inside a KPL aggregate: after its user record 3
        cp = s.load("shardId-000000000000")
        assert (cp.sequence_number, cp.sub_sequence_number, cp.reset_to) == ("500", 3, None)
    finally:
        s.close()


def test_reset_repairs_an_unreadable_checkpoint(zookeeper, capsys) -> None:
    node = f"{zookeeper.prefix}/etl/clicks/checkpoints/shardId-000000000003"
    zookeeper.client().create(node, b"{not json", makepath=True)
    assert main(base_args(zookeeper) + ["reset", "--shard", "shardId-000000000003", "--to", "trim-horizon",
                                        "--yes"]) == 0
    assert "unreadable" in capsys.readouterr().out
    assert json.loads(zookeeper.client().get(node)[0])["reset_to"] == "TRIM_HORIZON"


def test_after_a_reset_to_trim_horizon_the_spout_reads_the_shard_again(moto_kinesis, zookeeper) -> None:
    stream = moto_kinesis.create_stream(shards=1)
    moto_kinesis.put(stream, [f"r{i}".encode() for i in range(10)])
    config = SpoutConfig(stream_name=stream, app_name="etl", zookeeper=zookeeper.hosts,
                         zookeeper_prefix=zookeeper.prefix, endpoint_url=moto_kinesis.endpoint_url,
                         region=moto_kinesis.region, initial_position=InitialPosition.LATEST,
                         checkpoint_interval_s=0.0, empty_record_backoff_s=0.2)
    shard = moto_kinesis.shard_ids(stream)[0]
    s = store(zookeeper, stream)
    try:
        s.save(Checkpoint(shard, "10"))  # everything read: a restart would read nothing
        assert main(base_args(zookeeper, stream) + ["reset", "--shard", shard, "--to", "trim-horizon",
                                                    "--yes"]) == 0
        got: list[str] = []
        with KinesisSpout(config) as spout:
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                for tup in spout.next_batch(10, timeout_s=0.5):
                    got.append(tup.record.data.decode())
                    spout.ack(tup.message_id)
        assert got == [f"r{i}" for i in range(10)]
        assert s.load(shard).sequence_number == "10" and s.load(shard).reset_to is None
    finally:
        s.close()


def test_credentials_come_from_the_environment_and_are_never_printed(zookeeper, capsys,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    owner = store(zookeeper, zookeeper_auth="etl:hunter2-secret")
    try:
        owner.save(Checkpoint("shardId-000000000000", "7"))
    finally:
        owner.close()
    reset = ["reset", "--shard", "shardId-000000000000", "--to", "1", "--yes", "--force"]  # --force: no Kinesis here
    assert main(base_args(zookeeper) + reset) == 1
    err = capsys.readouterr().err
    assert "not allowed by the node's ACL" in err and "zookeeper_auth" in err
    monkeypatch.setenv(AUTH_ENV, "etl:hunter2-secret")
    assert main(base_args(zookeeper) + reset) == 0
    captured = capsys.readouterr()
    assert "hunter2" not in captured.out + captured.err


def test_reset_refuses_a_shard_the_stream_does_not_have_unless_forced(kinesalite, zookeeper, capsys) -> None:
    """A mistyped shard id used to exit 0 and leave a phantom checkpoint that nothing ever reads."""
    stream = kinesalite.create_stream(shards=2)
    args = base_args(zookeeper, stream) + ["--endpoint-url", kinesalite.endpoint_url, "--region", "us-east-1",
                                           "reset", "--to", "trim-horizon", "--yes", "--shard"]
    node = f"{zookeeper.prefix}/etl/{stream}/checkpoints/shardId-000000000007"
    assert main(args + ["shardId-000000000007"]) == 1
    err = capsys.readouterr().err
    assert f"stream {stream!r} has no shard 'shardId-000000000007'" in err
    assert "shardId-000000000000, shardId-000000000001" in err and "--force" in err
    assert zookeeper.client().exists(node) is None
    assert main(args + ["shardId-000000000001"]) == 0  # a real shard without a checkpoint yet: fine
    assert main(args + ["shardId-000000000007", "--force"]) == 0
    assert json.loads(zookeeper.client().get(node)[0])["reset_to"] == "TRIM_HORIZON"


def test_reset_of_a_shard_without_checkpoint_refuses_when_kinesis_cannot_be_asked(zookeeper, capsys) -> None:
    from kinesis_spout.testing.process import free_port

    args = base_args(zookeeper) + ["--endpoint-url", f"http://127.0.0.1:{free_port()}", "--region", "us-east-1",
                                   "reset", "--shard", "shardId-000000000000", "--to", "latest", "--yes"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "cannot check that stream 'clicks' has shard 'shardId-000000000000'" in err and "--force" in err
    assert zookeeper.client().exists(f"{zookeeper.prefix}/etl/clicks/checkpoints/shardId-000000000000") is None


def test_an_unreachable_zookeeper_is_reported_with_the_cli_flag(capsys) -> None:
    from kinesis_spout.testing.process import free_port

    hosts = f"127.0.0.1:{free_port()}"
    assert main(["checkpoints", "--stream", "clicks", "--app", "etl", "--zookeeper", hosts, "--timeout", "1"]) == 1
    err = capsys.readouterr().err
    assert f"cannot connect to ZooKeeper at {hosts}" in err
    assert "--zookeeper HOST:PORT" in err and "SpoutConfig" not in err
