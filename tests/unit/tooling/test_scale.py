"""The scale benchmark's own instruments: the lease watch's move count on a real ZooKeeper, kinesalite's request
counter (count_requests.js) on a real kinesalite, and the goals of the report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale.cluster import COUNTER_JS  # noqa: E402
from benchmarks.scale.leases import LeaseRunSize, goals  # noqa: E402
from benchmarks.scale.observe import LeaseWatch, request_counts  # noqa: E402
from benchmarks.scale.report import markdown  # noqa: E402
from kinesis_spout.testing.emulators import KinesaliteServer  # noqa: E402
from kinesis_spout.testing.kinesis import kinesis_client, wait_for_stream  # noqa: E402
from kinesis_spout.testing.process import wait_until  # noqa: E402

SIZE = LeaseRunSize(shards=4, workers=2, kill=1, session_timeout_s=4.0, put_every_s=1.0, rest_s=1.0,
                    phase_timeout_s=10.0)


def test_the_lease_watch_counts_a_move_when_another_worker_takes_a_lease(zookeeper: Any) -> None:
    client = zookeeper.client()
    base = f"{zookeeper.prefix}/app/stream"
    watch = LeaseWatch(client, base).start()
    node = f"{base}/leases/shard-0"
    client.create(node, json.dumps({"owner": None}).encode())
    expected_moves = 0
    for owner, move in [("w1", False), ("w2", True), (None, False), ("w2", False), ("w1", True)]:
        client.set(node, json.dumps({"owner": owner}).encode())
        expected_moves += move
        assert wait_until(lambda owner=owner: watch.state()[0].get("shard-0", "?") == owner, 10), watch.state()
        assert watch.state()[2] == expected_moves
    client.create(f"{base}/workers/w1", ephemeral=True)
    assert wait_until(lambda: watch.owned_by({"w1"}, 1), 10)
    assert watch.balanced({"w1"}, 1) and watch.even({"w1"}, 1)
    assert not watch.owned_by({"w1"}, 2)  # a shard without a lease is not owned


def test_the_request_counter_counts_kinesalite_s_calls_by_operation(tmp_path: Path) -> None:
    counts = tmp_path / "counts.json"
    server = KinesaliteServer(command_prefix=["env", f"NODE_OPTIONS=--require {COUNTER_JS}",
                                              f"KINESIS_SPOUT_COUNT_FILE={counts}"])
    with server:
        client = kinesis_client(server.endpoint_url)
        client.create_stream(StreamName="s", ShardCount=1)
        wait_for_stream(client, "s")
        iterator = client.get_shard_iterator(StreamName="s", ShardId="shardId-000000000000",
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for _ in range(3):
            iterator = client.get_records(ShardIterator=iterator)["NextShardIterator"]
        assert wait_until(lambda: request_counts(counts).get("GetRecords") == 3, 10), request_counts(counts)
        assert request_counts(counts)["GetShardIterator"] == 1


def test_the_report_marks_a_goal_missed_and_a_phase_that_did_not_end() -> None:
    figures = {"balance": {"balanced_s": 75.0, "moves_per_shard": 0.5, "even_s": None},
               "failover": {"owned_again_s": 9.0}, "rest": {"zk_writes_per_s": 0.0},
               "records": {"lost": 1, "produced": 8}}
    met = {goal.split(" (")[0]: ok for goal, _, ok in goals(figures, SIZE)}
    assert met == {"balanced within 60 s of start": False, "at most 1.2 lease moves per shard while balancing": True,
                   "a SIGKILLed worker's shards owned again within the session timeout + 10 s": True,
                   "0 records lost": False, "idle shards cost no ZooKeeper write": True}
    doc = {"setup": {"shards": 4, "workers": 2, "kill": 1, "session_timeout_s": 4.0, "put_every_s": 1.0},
           "machine": {"cores": 2}, "load_before": [], "load_after": [], "command": "x", "wall_s": 60.0,
           "finished": "now", "nodes": "loopback", "figures": figures, "goals": goals(figures, SIZE)}
    text = markdown(doc)
    assert "| balanced within 60 s of start | 75.0 s | **no** |" in text
    assert "| even: counts within one | did not happen in time |" in text


def test_the_spark_report_judges_the_zookeeper_bound_by_the_busy_shards_and_a_doubled_record() -> None:
    from benchmarks.scale.spark_report import goals as spark_goals
    from benchmarks.scale.spark_report import markdown as spark_markdown

    live = {"shards_with_records_per_batch": 40.0, "zk_requests_per_batch": 8.5, "latest_offset_ms_p50": 250.0,
            "driver_python_ms_per_batch": 90.0}
    backlog = {"executors": {"records_per_s": 90.0, "python_us_per_record": 110.0},
               "driver": {"records_per_s": 100.0, "python_us_per_record": 100.0}}
    cut = {"delivered": 10, "expected": 10, "lost": 0, "doubled": 1}
    doc = {"sizes": [{"shards": 256, "load_before": [], "load_after": [], "caught_up": {"executors": live},
                      "backlog": backlog, "cut": cut,
                      "auto": {"by hand": {"mode": "driver", "runner_sees_master": False},
                               "register(spark)": {"mode": "executors", "runner_sees_master": False}}}],
           "setup": {"per_shard": 1, "batches": 1, "rate": 1, "busy_every": 1, "seconds": 1.0},
           "machine": {"cores": 2}, "load_before": [], "load_after": [], "command": "x", "wall_s": 60.0,
           "finished": "now"}
    met = [ok for _, _, ok in spark_goals(doc)]
    # 8.5 <= 5 + 40/10; 250 ms > 200; 1.1x <= 1.2x; 0.9x the records/s; a record doubled; auto by hand is driver
    assert met == [True, False, True, False, False, False]
    doc["goals"] = spark_goals(doc)
    assert "| by hand | driver | no |" in spark_markdown(doc)
