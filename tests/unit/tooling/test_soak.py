"""The chaos soak's own bookkeeping: the seeded fault plan (required shares, replay), the ledger of delivered ids
(torn last lines, lines that are not deliveries, duplicates), the checkpoint sampler on a real ZooKeeper (a
checkpoint moved backwards or deleted is caught) and the verdict of a path (a loss, an inexact count)."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.soak.checkpoints import CheckpointSampler  # noqa: E402
from benchmarks.soak.faults import FaultMix, plan  # noqa: E402
from benchmarks.soak.ledger import DeliveryLedger, append_ids  # noqa: E402
from benchmarks.soak.report import PathResult, verdict  # noqa: E402
from benchmarks.soak.report import markdown as report_markdown  # noqa: E402

MIX = FaultMix(weights={"driver": 1, "worker": 4, "throttle": 1}, at_least={"driver": 0.2})


def test_the_plan_keeps_the_required_share_and_replays_with_its_seed() -> None:
    for kills in (1, 3, 5, 50, 51):
        kinds = plan(random.Random(kills), kills, MIX)
        assert len(kinds) == kills
        assert kinds.count("driver") >= max(1, -(-kills // 5)), kinds
    assert plan(random.Random(9), 50, MIX) == plan(random.Random(9), 50, MIX)
    assert plan(random.Random(9), 50, MIX) != plan(random.Random(10), 50, MIX)


def test_a_full_soak_kills_every_path_s_processes_at_least_fifty_times_and_ten_spark_drivers() -> None:
    from benchmarks.soak.paths import leases, spark_driver, spout
    from benchmarks.soak.runner import DEFAULT_KILLS

    for mix in (spout.MIX, leases.MIX, spark_driver.MIX, spark_driver.CLUSTER_MIX):
        for seed in range(20):
            kinds = plan(random.Random(seed), DEFAULT_KILLS, mix)
            assert sum(kind.startswith("sigkill") for kind in kinds) >= 50, Counter(kinds)
            if mix in (spark_driver.MIX, spark_driver.CLUSTER_MIX):
                assert kinds.count(spark_driver.DRIVER) >= 10, Counter(kinds)


def test_the_ledger_counts_whole_delivery_lines_only(tmp_path: Path) -> None:
    ledger = DeliveryLedger(tmp_path)
    with open(tmp_path / "a.log", "a") as log:
        append_ids(log, ["shardId-000000000000:1", "shardId-000000000001:7"], "w1", "3")
        log.write("LEASE_LOST shardId-000000000000\nshardId-000000000000:2")  # the last line cut by a SIGKILL
        log.flush()
        assert ledger.refresh() == 2
        log.write("\n")  # ... and completed: read once, whole
        log.flush()
    with open(tmp_path / "b.log", "a") as log:
        append_ids(log, ["shardId-000000000001:7"])
    assert ledger.refresh() == 3
    assert ledger.counts() == Counter({"shardId-000000000000:1": 1, "shardId-000000000000:2": 1,
                                       "shardId-000000000001:7": 2})


def test_a_checkpoint_moved_backwards_or_deleted_is_reported(zookeeper: Any) -> None:
    zk = zookeeper.client()
    base = f"{zookeeper.prefix}/app/stream/checkpoints"

    def store(shard: str, seq: int) -> None:
        data = json.dumps({"sequence_number": str(seq)}).encode()
        if zk.exists(f"{base}/{shard}"):
            zk.set(f"{base}/{shard}", data)
        else:
            zk.create(f"{base}/{shard}", data, makepath=True)

    sampler = CheckpointSampler(zk, base)
    sampler.sample()  # nothing stored yet
    store("shardId-0", 100)
    store("shardId-1", 5)
    sampler.sample()
    store("shardId-0", 200)
    sampler.sample()
    assert sampler.backwards == []
    store("shardId-0", 150)
    zk.delete(f"{base}/shardId-1")
    sampler.sample()
    assert sorted(sampler.backwards) == ["shardId-0: 200 -> 150", "shardId-1: 5 -> (deleted)"]
    assert sampler.samples == 4


def test_a_path_fails_on_a_loss_an_inexact_count_or_a_checkpoint_backwards() -> None:
    produced = {"shardId-0:1": 0, "shardId-0:2": 1, "shardId-1:1": 2}
    result = PathResult("spout")
    result.count_deliveries(produced, Counter({"shardId-0:1": 2, "shardId-1:1": 1}))
    assert (result.produced, result.delivered, result.lost, result.duplicates) == (3, 2, 1, 1)
    assert result.lost_ids == ["#1 shardId-0:2"] and not result.ok
    result.count_deliveries(produced, Counter(produced))
    assert result.ok
    assert not PathResult("exactly-once", exact=False).ok
    assert not PathResult("leases", checkpoints_backwards=["shardId-0: 2 -> 1"]).ok
    assert PathResult("readstream-executors", built=False).ok


def test_a_record_behind_its_shard_s_checkpoint_is_lost_and_one_ahead_of_it_is_behind() -> None:
    produced = {"shardId-0:10": 0, "shardId-0:20": 1, "shardId-1:30": 2, "shardId-2:40": 3, "shardId-0:5": 4}
    result = PathResult("exactly-once")
    result.count_deliveries(produced, Counter({"shardId-0:5": 1}), {"shardId-0": 10, "shardId-1": 29})
    assert (result.lost, result.lost_ids) == (1, ["#0 shardId-0:10"])  # the checkpoint passed it: no one reads it
    assert (result.behind, result.behind_ids) == (3, ["#1 shardId-0:20", "#2 shardId-1:30", "#3 shardId-2:40"])
    assert not result.safe and verdict(result) == "FAILED"
    result.count_deliveries(produced, Counter({"shardId-0:5": 1, "shardId-0:10": 1}), {"shardId-0": 10})
    assert (result.lost, result.behind, result.safe, result.ok) == (0, 3, True, False)
    assert verdict(result) == "BEHIND (nothing lost)"
    result.count_deliveries(produced, Counter({"shardId-0:5": 1}))  # no checkpoints read: every missing one lost
    assert (result.lost, result.behind) == (4, 0)


def test_exactly_once_counts_short_while_records_are_behind_are_lag_and_a_count_too_high_is_inexact() -> None:
    result = PathResult("exactly-once", behind=3)
    result.judge_counts(Counter({"k0": 5, "k1": 4}), Counter({"k0": 5, "k1": 2}))
    assert result.exact is None and result.safe and result.inexact_keys == {"k1": [4, 2]}
    result.judge_counts(Counter({"k0": 5, "k1": 4}), Counter({"k0": 6, "k1": 2}))
    assert result.exact is False and not result.safe
    caught_up = PathResult("exactly-once")
    caught_up.judge_counts(Counter({"k0": 5}), Counter({"k0": 4}))
    assert caught_up.exact is False
    caught_up.judge_counts(Counter({"k0": 5}), Counter({"k0": 5}))
    assert caught_up.exact is True and caught_up.ok
    markdown = report_markdown([result], 7, ["--quick"], 60.0)
    assert "| 3 |" in markdown and "FAILED" in markdown


def test_the_network_path_does_at_least_fifty_network_faults_of_a_full_soak() -> None:
    from benchmarks.soak.paths import leases_network
    from benchmarks.soak.runner import DEFAULT_KILLS

    for seed in range(20):
        kinds = plan(random.Random(seed), DEFAULT_KILLS, leases_network.MIX)
        assert sum(kind in leases_network.NETWORK_KINDS for kind in kinds) >= 50, Counter(kinds)
        assert set(leases_network.NETWORK_KINDS) <= set(kinds)


def test_the_spout_pipeline_exactly_once_and_readstream_network_paths_do_fifty_network_faults_of_a_full_soak() -> None:
    from benchmarks.soak.paths import PATHS, pipeline_network, readstream_network, spout, spout_network
    from benchmarks.soak.paths.network import NETWORK_KINDS
    from benchmarks.soak.paths.spark_driver import DRIVER
    from benchmarks.soak.runner import DEFAULT_KILLS

    assert {"spout-network", "pipeline-network", "exactly-once-network", "readstream-driver-network",
            "readstream-executors-network"} <= set(PATHS)
    for mix, network, process_kill in ((spout_network.MIX, NETWORK_KINDS, spout.SIGKILL),
                                       (pipeline_network.MIX, NETWORK_KINDS, DRIVER),
                                       (pipeline_network.READSTREAM_MIX, NETWORK_KINDS, DRIVER),
                                       (readstream_network.MIX, readstream_network.NETWORK_KINDS, DRIVER)):
        for seed in range(20):
            kinds = plan(random.Random(seed), DEFAULT_KILLS, mix)
            assert sum(kind in network for kind in kinds) >= 50, Counter(kinds)
            assert set(network) <= set(kinds) and process_kill in kinds, Counter(kinds)


def test_each_fault_kind_gets_the_duplicates_and_fenced_writes_of_its_window(tmp_path: Path) -> None:
    from benchmarks.soak.cycle import FaultStats, FaultWindows

    ledger, stats, fenced = DeliveryLedger(tmp_path), FaultStats(), [0]
    windows = FaultWindows(stats, ledger, None, lambda: fenced[0])
    with open(tmp_path / "w.log", "a") as log:
        append_ids(log, ["shardId-0:1", "shardId-0:2"])
        windows.open("zk-partition-long")
        append_ids(log, ["shardId-0:2", "shardId-1:3"])  # one duplicate
        fenced[0] += 2
        windows.open("slow-link")
        append_ids(log, ["shardId-1:4"])
        windows.close()
        windows.close()  # idempotent
    assert stats.duplicates == Counter({"zk-partition-long": 1})
    assert stats.fenced == Counter({"zk-partition-long": 2})
    assert ledger.shard_counts() == {"shardId-0": 2, "shardId-1": 2}


def test_the_overlap_is_how_long_an_old_owner_kept_delivering_after_its_successor_began() -> None:
    from benchmarks.soak.paths.leases import longest_overlap

    def line(seq: int, worker: str, epoch: int, at: float, shard: str = "shardId-0") -> list[str]:
        return [f"{shard}:{seq}", worker, str(epoch), str(at)]

    handover_and_back = [line(1, "a", 1, 1.0), line(2, "b", 2, 3.0), line(3, "a", 3, 9.0)]
    assert longest_overlap(handover_and_back) == (0.0, "")
    zombie = [line(1, "a", 1, 1.0), line(3, "b", 2, 3.0), line(2, "a", 1, 4.5), line(4, "b", 2, 5.0),
              line(5, "a", 1, 6.0)]
    assert longest_overlap(zombie + [line(9, "c", 1, 2.0, "shardId-1"), ["shardId-1:8", "c", "1"]]) == \
        (3.0, "shardId-0: a -> b")
