"""Every benchmark runs: a smoke run (tiny sizes, real servers) writes complete, plausible results.

Speed is never asserted: the figures must exist, be positive and hang together (ratios computed from the medians,
counts that add up), whatever the machine's load. The smoke run writes to a temporary directory, never to
benchmarks/results/.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.registry import BENCHMARKS  # noqa: E402
from benchmarks.report import fmt_cell  # noqa: E402
from benchmarks.stats import ratio, summary  # noqa: E402
from kinesis_spout.testing.spark import quick_start_env  # noqa: E402

# The smoke run starts Spark (its Spark benchmarks) in a subprocess: no fixture of the plugin says so.
pytestmark = pytest.mark.spark


#: A smoke run that prints no progress line for this long is stuck: a step of it hangs. Its steps take seconds on a
#: quiet 2-core machine and up to two minutes at a load average of 15 (a Spark session's start and first jobs), and
#: the run's length grows with the load other users put on the machine: only a silence that long fails it.
SMOKE_STALL_S = 600.0
#: The whole run's bound, past any load seen: a run that keeps printing progress is still moving through its steps.
SMOKE_BOUND_S = 3600.0


def run_until_stalled(argv: list[str], env: dict[str, str], stall_s: float, bound_s: float
                      ) -> tuple[int | None, str, str]:
    """Run ``argv`` in ROOT until it ends, prints no line on stdout for ``stall_s``, or ``bound_s`` passed; a run
    that stalls or overruns is killed (its return code is then None). Returns (return code, stdout, stderr)."""
    lines: list[str] = []
    last_line = [time.monotonic()]
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)

        def follow() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                last_line[0] = time.monotonic()

        reader = threading.Thread(target=follow, name="smoke-progress", daemon=True)
        reader.start()
        ends_at = time.monotonic() + bound_s
        code: int | None = None
        while code is None and time.monotonic() - last_line[0] < stall_s and time.monotonic() < ends_at:
            try:
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                continue
        if code is None:
            proc.kill()
            proc.wait()
        reader.join(30)
        errors.seek(0)
        return code, "".join(lines), errors.read()


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    """One smoke run of every benchmark: (results dir, latest.json, progress output).

    The run takes 85 s on 2 cores at a load average of 2-4 and 6 minutes or more at 15 (Spark alone 40 s and
    3 minutes): it is bounded by its progress (SMOKE_STALL_S without a line), not by a time that a loaded machine
    outruns. Its Spark JVMs start with the quick options: a smoke run asserts no speed."""
    out = tmp_path_factory.mktemp("bench-smoke")
    code, stdout, stderr = run_until_stalled(
        [sys.executable, "-m", "benchmarks", "--smoke", "--out", str(out), "--no-chart"],
        quick_start_env(os.environ), SMOKE_STALL_S, SMOKE_BOUND_S)
    assert code is not None, (f"smoke run printed nothing for {SMOKE_STALL_S:g} s (or ran {SMOKE_BOUND_S:g} s), "
                              f"killed:\n{stdout[-4000:]}\n{stderr[-4000:]}")
    assert code == 0, f"smoke run failed:\n{stdout[-4000:]}\n{stderr[-4000:]}"
    return out, json.loads((out / "latest.json").read_text()), stdout


def rows_of(results: dict[str, Any], name: str) -> list[dict[str, Any]]:
    entry = results["benchmarks"][name]
    assert entry["status"] == "ok", entry
    assert entry["rows"], f"{name} produced no rows"
    return list(entry["rows"])


def assert_figure(fig: Any, repeats: int | None = None) -> float:
    """A figure made by summary(): positive, median within the runs' range; returns the median."""
    assert isinstance(fig, dict), fig
    assert 0 < fig["min"] <= fig["median"] <= fig["max"], fig
    assert fig["runs"] and all(r > 0 for r in fig["runs"]), fig
    if repeats is not None:
        assert len(fig["runs"]) == repeats, fig
    return float(fig["median"])


def test_every_benchmark_ran_or_is_a_declared_slot(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, progress = smoke
    assert list(results["benchmarks"]) == [spec.name for spec in BENCHMARKS]
    for spec in BENCHMARKS:
        entry = results["benchmarks"][spec.name]
        expected = "ok" if importlib.util.find_spec(spec.module) is not None else "not implemented yet"
        assert entry["status"] == expected, entry
        assert entry["seconds"] >= 0 and entry["title"]
    assert results["mode"] == "smoke"
    assert "[bench" in progress and "tracker:" in progress  # one progress line per step


def test_results_say_what_they_were_measured_on(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    assert results["machine"]["cores"] >= 1 and results["machine"]["python"].startswith("CPython")
    for name in ("kinesis-spout", "boto3", "kazoo", "kinesalite", "zookeeper", "python"):
        assert results["versions"].get(name), f"version of {name} missing: {results['versions']}"
    for row in rows_of(results, "read") + rows_of(results, "checkpoint"):
        assert row["emulator"] == "kinesalite" and row["records"] > 0 and row["record_bytes"] == 100
        assert row["repeats"] >= 1


def test_tracker_throughput_and_memory_figures(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = rows_of(results, "tracker")
    speed = [r for r in rows if r["kind"] == "throughput"]
    assert {(r["shards"], r["ack_order"]) for r in speed if not r["key_creation_counted"]} == {
        (s, o) for s in (1, 4, 64) for o in ("in-order", "random")}
    assert any(r["key_creation_counted"] for r in speed)
    for row in speed:
        assert row["fail_rate"] == 0.01
        assert_figure(row["pairs_per_s"], row["repeats"])
    memory = [r for r in rows if r["kind"] == "memory"]
    assert {r["state"] for r in memory} == {"all in flight", "after random acks"}
    for row in memory:
        per = assert_figure(row["bytes_per_inflight_record"])
        assert 20 < per < 2_000, row  # a dict entry and a tuple at least; far less than a kilobyte
        assert row["bytes_per_inflight_record_with_key"] == pytest.approx(per + row["key_bytes"], abs=0.1)


def test_read_compares_the_spout_with_the_loop(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = {r["case"]: r for r in rows_of(results, "read")}
    loop, spout, batch = rows["boto3 loop"], rows["KinesisSpout"], rows["KinesisSpout, batch acks"]
    assert set(rows) == {"boto3 loop", "KinesisSpout", "KinesisSpout, batch acks",
                         "KinesisSpout, columns (next_columns)", "boto3 loop, botocore defaults"}
    for row in rows.values():
        assert_figure(row["records_per_s"], row["repeats"])
        assert_figure(row["cpu_us_per_record"], row["repeats"])
        assert row["shards"] == 4 and row["batch_limit"] == 10_000
    assert loop["ratio_vs_loop"] == 1.0
    assert spout["ratio_vs_loop"] == ratio(spout["records_per_s"], loop["records_per_s"])
    assert batch["ratio_vs_loop"] == ratio(batch["records_per_s"], loop["records_per_s"])
    assert batch["ratio_vs_spout"] == ratio(batch["records_per_s"], spout["records_per_s"])
    for acking in (spout, batch, rows["KinesisSpout, columns (next_columns)"]):
        assert acking["checkpoints_at_end"] is True  # every shard's checkpoint reached its last record
        assert acking["zk_writes"]["median"] >= acking["shards"]


def test_peers_ran_or_say_why(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = {r["peer"]: r for r in rows_of(results, "peers")}
    assert set(rows) == {"boto3-loop", "spout", "async-kinesis", "kinesis-python"}
    for peer in ("boto3-loop", "spout"):
        assert rows[peer]["status"] == "ok"
    for row in rows.values():
        if row["status"] == "ok":
            assert_figure(row["records_per_s"])
            assert row["ratio_vs_loop"] is not None and row["ratio_vs_loop"] > 0
        else:
            assert "not installed" in row["status"] or "failed" in row["status"], row
    assert rows["boto3-loop"]["ratio_vs_loop"] == 1.0


def test_checkpoint_intervals(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = rows_of(results, "checkpoint")
    for consumer in ("steady", "flat out"):
        mine = [r for r in rows if r["consumer"] == consumer]
        assert [r["checkpoint_interval_s"] for r in mine] == [0.0, 0.1, 1.0, 2.0]  # 10 s in full runs
        for row in mine:
            assert_figure(row["records_per_s"])
            assert_figure(row["cpu_us_per_record"])
            assert row["zk_writes"]["median"] >= row["shards"]  # at least the final checkpoint of each shard
            assert row["zk_writes_per_s"]["median"] >= 0
            assert row["checkpoints_at_end"] is True
        assert mine[2]["ratio_vs_interval_1s"] == 1.0


def test_scaling_by_shards_and_by_records_in_flight(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = rows_of(results, "scaling")
    speed = [r for r in rows if r["kind"] == "throughput"]
    assert sorted((r["shards"], r["consumer"]) for r in speed) == sorted(
        (s, c) for s in (1, 4, 16) for c in ("boto3 loop", "KinesisSpout"))
    for row in speed:
        assert_figure(row["records_per_s"])
        assert row["ratio_vs_loop"] > 0
    memory = [r for r in rows if r["kind"] == "memory"]
    assert [r["inflight_records"] for r in memory] == [1_000, 10_000]
    for row in memory:
        assert_figure(row["bytes_per_inflight_record"])


def test_shards_threads_cpu_at_rest_and_busy_shards_among_idle_ones(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = rows_of(results, "shards")
    rest = [r for r in rows if r["kind"] == "rest"]
    busy = [r for r in rows if r["kind"] == "busy"]
    assert len(rest) == 3 and len(busy) == 3 and len({r["case"] for r in rows}) == 6
    total = rest[0]["shards"]
    (per_shard,) = [r for r in rest if r["reader_threads"] == 0]
    assert per_shard["threads"] == total and per_shard["ratio"] == 1.0  # the baseline: a thread per shard
    pools = [r for r in rest if r["reader_threads"] > 0]
    assert {r["idle_max_s"] for r in pools} == {None, 4.0}
    for row in rest:
        assert row["shards"] == total
        assert_figure(row["cpu_percent"], row["repeats"])
        assert row["ratio"] == ratio(row["cpu_percent"], per_shard["cpu_percent"])
    for row in pools:
        assert 1 <= row["threads"] <= row["reader_threads"] < total, row  # bounded by the pool, not the shards
    (alone,) = [r for r in busy if r["shards"] < total]
    assert alone["ratio"] == 1.0
    for row in busy:
        assert row["records"] == alone["records"] > 0
        assert_figure(row["records_per_s"], row["repeats"])
        if row is not alone:
            assert row["shards"] == total
            assert row["ratio"] == ratio(row["records_per_s"], alone["records_per_s"])
    assert {r["reader_threads"] for r in busy if r is not alone} == {0, pools[0]["reader_threads"]}
    lines = results["benchmarks"]["shards"]["headline"]
    assert sum("idle shards" in line["figure"] for line in lines) == 2
    assert all(line["met"] in (True, False) for line in lines)


@pytest.mark.skipif(importlib.util.find_spec("benchmarks.bench_spark") is None, reason="no Spark benchmark yet")
def test_spark_pipeline_and_source_latency_and_throughput(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = {(r["case"], r["kind"]): r for r in rows_of(results, "spark")}
    cases = ("SpoutPipeline", "readStream source", "readStream source, readMode=executors")
    plain = "KinesisSpout, no Spark (next_batch + ack_many)"
    assert set(rows) == {(c, k) for c in cases for k in ("caught up", "backlog")} | {(plain, "backlog")}
    piped = rows[("SpoutPipeline", "backlog")]
    assert piped["records_per_s_vs_plain_spout"] == ratio(piped["records_per_s"], rows[(plain, "backlog")]
                                                          ["records_per_s"])
    assert rows[(plain, "backlog")]["records"] == 400 and piped["batch_limit"] == 200
    source = rows[("readStream source", "backlog")]  # its ratio with and without the query's start
    alone = source["batches_records_per_s_vs_plain_spout"]
    assert alone == ratio(source["batches_records_per_s"], rows[(plain, "backlog")]["records_per_s"])
    assert alone >= source["records_per_s_vs_plain_spout"]  # the batches are part of the whole run
    for row in rows.values():
        p50, p95 = assert_figure(row["batch_p50_ms"], 1), assert_figure(row["batch_p95_ms"], 1)
        assert p50 <= p95
        assert_figure(row["records_per_s"], 1)
        assert row["shards"] == 4 and row["record_bytes"] == 100 and row["emulator"] == "kinesalite"
    for case in cases:
        assert rows[(case, "caught up")]["batches"]["median"] >= 3  # warm-up batches plus at least two measured
        assert rows[(case, "backlog")]["records"] == 400
    assert rows[("SpoutPipeline", "caught up")]["dataframe_ms"]["median"] > 0
    assert rows[("SpoutPipeline", "caught up")]["spark_start_s"] > 0
    lines = [line["figure"] for line in results["benchmarks"]["spark"]["headline"]]
    assert sum("batch latency, caught up" in line for line in lines) == 3
    assert rows[("readStream source, readMode=executors", "backlog")]["records_per_s_vs_driver_reads"] > 0


#: per-batch columns of the Spark rows and the run costs they come from: (row key, costs key, scale)
SPARK_PER_BATCH = (("zk_writes_per_batch", "zk_writes", 1.0), ("zk_reads_per_batch", "zk_reads", 1.0),
                   ("driver_cpu_ms_per_batch", "driver_python_s", 1000.0),
                   ("executor_cpu_ms_per_batch", "executor_python_s", 1000.0),
                   ("jvm_cpu_ms_per_batch", "jvm_s", 1000.0))


@pytest.mark.skipif(importlib.util.find_spec("benchmarks.bench_spark") is None, reason="no Spark benchmark yet")
def test_spark_costs_of_each_readstream_run(smoke: tuple[Path, dict[str, Any], str]) -> None:
    """Each readStream run has its costs: ZooKeeper requests counted at the server and CPU split by process. The
    per-batch columns need batches inside the measured window, which a loaded machine may not give a caught-up
    run: where they are, they must be the costs divided by those batches."""
    _, results, _ = smoke
    rows = rows_of(results, "spark")
    assert all("costs" not in r for r in rows if not r["case"].startswith("readStream"))
    source = [r for r in rows if r["case"].startswith("readStream")]
    assert len(source) == 4
    for row in source:
        assert "costs" in row and len(row["costs"]) == row["repeats"], row["case"]
        for costs, batches in zip(row["costs"], row["batches"]["runs"]):
            assert costs["seconds"] > 0 and costs["source_runners"] >= 1, costs
            assert costs["zk_idle_pings"] >= 0 and costs["zk_reads"] >= 0, costs  # pings are some of the reads
            assert costs["planning_python_s"] >= 0 and costs["executor_python_s"] >= 0, costs
            assert 0 <= costs["batches"] <= batches, costs
            if row["kind"] == "backlog":  # the window is the whole run: the query's start and all its batches
                assert costs["zk_writes"] > 0, costs  # its session at least
                assert costs["batches"] == batches and costs["records"] == row["records"], costs
                # its driver runner ended inside the window, followed to its end and reaped by the JVM
                assert costs["runner_reaped"] is True, costs
                assert costs["source_runner_s"] is not None and costs["source_runner_s"] > 0, costs
                assert costs["driver_python_s"] == pytest.approx(
                    costs["source_runner_s"] + costs["planning_python_s"]), costs
                assert costs["jvm_helpers_s"] is not None and costs["jvm_helpers_s"] >= 0, costs
        for key, cost, scale in SPARK_PER_BATCH:
            if key in row:
                runs = [c[cost] * scale / c["batches"] for c in row["costs"]]
                assert row[key]["median"] == pytest.approx(statistics.median(runs), rel=1e-3), (row["case"], key)


def test_markdown_shows_summary_sections_and_the_spark_slot(smoke: tuple[Path, dict[str, Any], str]) -> None:
    out, results, _ = smoke
    text = (out / "latest.md").read_text()
    assert text.startswith("# kinesis_spout benchmarks (smoke run)")
    assert "## Summary" in text and "| figure | value | goal | met |" in text
    for entry in results["benchmarks"].values():
        assert entry["title"] in text
    assert ("bench_spark" in text) == (importlib.util.find_spec("benchmarks.bench_spark") is None)
    assert "KinesisSpout / boto3 loop" in text


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib is in benchmarks/.venv only")
def test_chart_is_a_png(smoke: tuple[Path, dict[str, Any], str], tmp_path: Path) -> None:
    from benchmarks.chart import write_chart
    from benchmarks.registry import BENCHMARKS as specs

    _, results, _ = smoke
    write_chart(results, {spec.name: spec.load() for spec in specs}, tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_smoke_run_refuses_to_write_the_committed_results() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--smoke", "--out", "benchmarks/results"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "never writes benchmarks/results" in done.stderr


def test_summary_and_cells() -> None:
    fig = summary([3.0, 1.0, 2.0])
    assert fig["median"] == 2.0 and fig["min"] == 1.0 and fig["max"] == 3.0 and fig["spread_pct"] == 100.0
    assert ratio(summary([2.0]), summary([4.0])) == 0.5 and ratio(1.0, 0.0) is None
    assert fmt_cell(fig, "fig1") == "2.0 (1.0–3.0)" and fmt_cell(0.915, "x") == "0.92x" and fmt_cell(None, "x") == "-"


def test_lease_failover_rebalance_and_rest_figures(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = {r["case"]: r for r in rows_of(results, "leases")}
    assert set(rows) == {"failover after SIGKILL", "failover after a clean stop (SIGTERM)",
                         "rebalance when a third worker joins", "three workers at rest"}
    kill = rows["failover after SIGKILL"]
    assert kill["seconds"]["median"] >= kill["session_timeout_s"] * 0.5  # the dead session must time out first
    assert rows["failover after a clean stop (SIGTERM)"]["seconds"]["median"] > 0
    assert all(r["replayed"]["median"] >= 0 for r in rows.values() if "replayed" in r)
    assert rows["three workers at rest"]["zk_requests_per_s_per_worker"]["median"] > 0


def test_kpl_figures_compare_aggregated_with_one_by_one(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, results, _ = smoke
    rows = rows_of(results, "kpl")
    by = {(r["case"], r["stream"]): r for r in rows}
    for case in ("boto3 loop", "KinesisSpout"):
        agg, one = by[(case, "aggregated")], by[(case, "one by one")]
        assert agg["records"] == one["records"] > 0 and agg["kinesis_records"] * 100 == agg["records"]
        assert assert_figure(agg["user_records_per_s"]) > 0 and assert_figure(one["cpu_us_per_user_record"]) > 0
        assert agg["speedup_vs_plain"] > 0
    assert by[("KinesisSpout", "aggregated")]["checkpoints_at_end"] is True
    for case in ("decoder: kinesis_spout", "decoder: aws-kinesis-agg"):
        assert assert_figure(by[(case, "aggregated (in memory)")]["cpu_us_per_user_record"]) > 0


def test_the_smoke_bound_kills_a_silent_run_and_lets_a_slow_one_that_progresses_finish() -> None:
    """The smoke fixture's bound: a run that stops printing is killed after the stall time; one that takes longer
    than the stall time in all, but prints a line within each, runs to its end (a loaded machine's run)."""
    silent = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    code, out, _ = run_until_stalled(silent, dict(os.environ), stall_s=1.0, bound_s=60.0)
    assert code is None and out == "started\n"
    slow = [sys.executable, "-c", "import time\nfor i in range(8):\n    print(i, flush=True); time.sleep(0.75)"]
    code, out, _ = run_until_stalled(slow, dict(os.environ), stall_s=5.0, bound_s=60.0)
    assert code == 0 and out.split() == [str(i) for i in range(8)]
