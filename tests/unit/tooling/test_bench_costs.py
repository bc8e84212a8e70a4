"""The benchmarks' cost arithmetic without servers: CPU from Linux's /proc (this process, its threads and children
it starts here, one of which ends inside a window, one of which is a zombie), ZooKeeper's ``mntr`` and ``stat``
replies, the split of a Spark query's costs by process, and the fits behind the 100-shard estimate.

The CPU a child spent is checked against what the kernel tells its parent when it is reaped (``os.wait4``'s
rusage), an account that does not go through /proc. /proc counts in clock ticks, hence tolerances of a few ticks.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import select
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.proc_cpu import (  # noqa: E402
    TICK_S,
    ProcessCpu,
    TreeSnapshot,
    own_cpu_between,
    parse_stat,
    read_process,
    snapshot,
    thread_cpu_between,
    tree_cpu_between,
)
from benchmarks.spark_costs import CostSnapshot, costs_between  # noqa: E402
from benchmarks.spark_estimate import (  # noqa: E402
    ESTIMATE_SHARD_RATE,
    ESTIMATE_SHARDS,
    estimate,
    fit_line,
    fit_task_and_record,
)
from benchmarks.zk_requests import (  # noqa: E402
    ZkCounters,
    ZkRequestCounter,
    idle_pings,
    parse_mntr,
    parse_stat_clients,
)

TOLERANCE_S = 3 * TICK_S  # /proc truncates user and system time to ticks, each

# -- children that burn CPU on request --------------------------------------------------------------------------
#: argv[1]: a marker for the member test, argv[2]: the name (comm) to give itself. Lines on stdin: "burn S" burns
#: S seconds of CPU; "fork S" forks a worker that burns S seconds, reaps it and answers its rusage CPU; "exit".
CHILD = r"""
import os, sys, time
with open("/proc/self/comm", "w") as handle:
    handle.write(sys.argv[2])
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
print("ready", flush=True)
for line in sys.stdin:
    command, _, arg = line.strip().partition(" ")
    if command == "burn":
        burn(float(arg))
        print("ok", flush=True)
    elif command == "fork":
        pid = os.fork()
        if pid == 0:
            burn(float(arg))
            os._exit(0)
        _, _, usage = os.wait4(pid, 0)
        print(usage.ru_utime + usage.ru_stime, flush=True)
    elif command == "exit":
        break
"""
TRICKY_COMM = "cpu) (kid x"  # a name with spaces and parentheses, as /proc/<pid>/stat shows it


class Child:
    """A child of this process running ``CHILD``; :meth:`reap` waits for it and returns its CPU from rusage."""

    def __init__(self, marker: str, comm: str = TRICKY_COMM) -> None:
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", CHILD, marker, comm], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0)
        self.pid = self.proc.pid
        assert self.read_line() == "ready"

    def read_line(self, timeout_s: float = 20.0) -> str:
        assert self.proc.stdout is not None
        out = b""
        deadline = time.monotonic() + timeout_s
        while not out.endswith(b"\n"):
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(f"child {self.pid} did not answer in {timeout_s:g} s")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                raise AssertionError(f"child {self.pid} closed its output")
            out += chunk
        return out.decode().strip()

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        return self.read_line()

    def end(self) -> None:
        """Ask it to exit, without reaping it (it becomes a zombie)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"exit\n")
        self.proc.stdin.close()

    def wait_zombie(self, timeout_s: float = 20.0) -> ProcessCpu:
        deadline = time.monotonic() + timeout_s
        while True:
            proc = read_process(self.pid)
            if proc is not None and proc.zombie:
                return proc
            assert time.monotonic() < deadline, f"child {self.pid} did not end: {proc}"
            time.sleep(0.01)

    def reap(self) -> float:
        """Wait for it; the CPU seconds (user + system) the kernel accounted to it."""
        _, status, usage = os.wait4(self.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return float(usage.ru_utime + usage.ru_stime)

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def children() -> Iterator[Callable[..., Child]]:
    """Starts children; kills and reaps those still there at the end, so that none is reaped in another test's
    window (this process's reaped time is the root's)."""
    started: list[Child] = []

    def start(marker: str, comm: str = TRICKY_COMM) -> Child:
        child = Child(marker, comm)
        started.append(child)
        return child

    yield start
    for child in started:
        child.kill()


def marked(marker: str) -> Callable[[ProcessCpu], bool]:
    return lambda p: p.command.endswith(f" {marker} {TRICKY_COMM}")


# -- /proc ------------------------------------------------------------------------------------------------------
def stat_line(pid: int, comm: str, state: str, ppid: int, utime: int, stime: int, cutime: int, cstime: int) -> str:
    """A /proc/<pid>/stat line (proc(5)): every other field a distinct number, so an index off by one shows."""
    fields = [state, ppid, 1001, 1002, 34816, 1003, 4194560, 1004, 1005, 1006, 1007, utime, stime, cutime, cstime,
              20, 0, 3, 0, 123456, 7654321, 999]
    return f"{pid} ({comm}) " + " ".join(str(f) for f in fields) + "\n"


def test_parse_stat_splits_after_the_last_parenthesis_of_the_name() -> None:
    line = stat_line(4242, "a) b (c ) d", "S", 77, utime=150, stime=50, cutime=700, cstime=300)
    comm, ppid, state, own, reaped = parse_stat(line)
    assert (comm, ppid, state) == ("a) b (c ) d", 77, "S")
    assert own == pytest.approx(200 * TICK_S) and reaped == pytest.approx(1000 * TICK_S)
    with pytest.raises(ValueError, match="not a /proc stat line"):
        parse_stat("4242 (short) S 1 2 3")


def test_read_process_and_snapshot_see_a_child_whose_name_has_parentheses_and_spaces(children: Any) -> None:
    child = children("marker-name")
    proc = read_process(child.pid)
    assert proc is not None and not proc.zombie
    assert proc.ppid == os.getpid() and proc.command.endswith(f"marker-name {TRICKY_COMM}")
    assert parse_stat(Path(f"/proc/{child.pid}/stat").read_text())[0] == TRICKY_COMM
    tree = snapshot(os.getpid())
    assert tree.root == os.getpid() and child.pid in tree.processes  # found as a descendant through its ppid
    assert tree.processes[os.getpid()].own_s > 0 and threading.get_native_id() in tree.threads
    assert read_process(2**22 + 1) is None  # above pid_max: no such process


def test_a_child_that_ends_inside_the_window_counts_through_its_parents_reaped_time(children: Any) -> None:
    child = children("marker-ends")
    child.ask("burn 0.06")  # before the window: not to be counted
    before = snapshot(os.getpid())
    child.ask("burn 0.08")
    child.end()
    total = child.reap()
    after = snapshot(os.getpid())
    assert child.pid in before.processes and child.pid not in after.processes
    got = tree_cpu_between(before, after, marked("marker-ends"), root_reaps_members=True)
    inside = total - before.processes[child.pid].own_s
    assert before.processes[child.pid].own_s >= 0.06 - TOLERANCE_S
    assert got.seconds == pytest.approx(inside, abs=TOLERANCE_S)
    assert got.seconds >= 0.08 - TOLERANCE_S
    assert got.reaped_s == pytest.approx(total, abs=TOLERANCE_S)
    assert got.members == (child.pid,) and got.foreign_ended == ()
    # without the root as reaper the ended child's CPU is nowhere to be found
    assert tree_cpu_between(before, after, marked("marker-ends")).seconds == 0.0


def test_a_zombie_counts_its_final_cpu_and_reaping_it_moves_nothing(children: Any) -> None:
    child = children("marker-zombie")
    child.ask("burn 0.04")
    before = snapshot(os.getpid())
    child.ask("burn 0.08")
    child.end()
    zombie = child.wait_zombie()
    assert zombie.command == "" and zombie.ppid == os.getpid()
    at_zombie = snapshot(os.getpid())
    total = child.reap()
    reaped = snapshot(os.getpid())
    member = marked("marker-zombie")
    inside = total - before.processes[child.pid].own_s
    as_zombie = tree_cpu_between(before, at_zombie, member, root_reaps_members=True)
    assert as_zombie.members == (child.pid,)  # a member by the first snapshot: the zombie's command reads empty
    assert as_zombie.seconds == pytest.approx(inside, abs=TOLERANCE_S) and as_zombie.reaped_s == 0.0
    as_reaped = tree_cpu_between(before, reaped, member, root_reaps_members=True)
    assert as_reaped.seconds == pytest.approx(as_zombie.seconds, abs=TOLERANCE_S)
    # a zombie the first snapshot cannot judge is reported as a foreign process that ended, its CPU counted
    late = tree_cpu_between(at_zombie, reaped, member, root_reaps_members=True)
    assert late.foreign_ended == (f"{child.pid} ",) and late.members == ()
    assert late.seconds == pytest.approx(total, abs=TOLERANCE_S)


def test_a_member_that_reaps_its_workers_and_a_foreign_child_of_the_root(children: Any) -> None:
    daemon = children("marker-daemon")
    other = children("marker-other")
    other.ask("burn 0.04")
    before = snapshot(os.getpid())
    worker = float(daemon.ask("fork 0.08"))  # born, burning and reaped inside the window: no snapshot sees it
    other.ask("burn 0.06")
    other.end()
    other_total = other.reap()
    after = snapshot(os.getpid())
    member = marked("marker-daemon")
    daemon_own = after.processes[daemon.pid].own_s - before.processes[daemon.pid].own_s

    got = tree_cpu_between(before, after, member)
    assert got.reaped_s == pytest.approx(worker, abs=TOLERANCE_S) and worker >= 0.08 - TOLERANCE_S
    assert got.seconds == pytest.approx(daemon_own + worker, abs=TOLERANCE_S)
    assert got.members == (daemon.pid,) and got.foreign_ended == ()  # the root reaps nothing of the group

    with_root = tree_cpu_between(before, after, member, root_reaps_members=True)
    # a foreign child's CPU is all in the root's reaped time, from before the window too: it is listed
    assert with_root.seconds == pytest.approx(daemon_own + worker + other_total, abs=2 * TOLERANCE_S)
    assert with_root.foreign_ended == (f"{other.pid} {before.processes[other.pid].command}",)
    assert "marker-other" in with_root.foreign_ended[0]


def test_a_member_that_ends_after_reaping_workers_before_the_window(children: Any) -> None:
    daemon = children("marker-old-daemon")
    worker = float(daemon.ask("fork 0.08"))  # reaped before the window: the daemon's reaped time
    before = snapshot(os.getpid())
    assert before.processes[daemon.pid].reaped_s == pytest.approx(worker, abs=TOLERANCE_S)
    daemon.end()
    total = daemon.reap()
    after = snapshot(os.getpid())
    got = tree_cpu_between(before, after, marked("marker-old-daemon"), root_reaps_members=True)
    # the kernel hands the root the daemon's own CPU and all it reaped: what it reaped before the window is not
    # of the window
    own_total = total - worker
    assert got.seconds == pytest.approx(own_total - before.processes[daemon.pid].own_s, abs=TOLERANCE_S)


def _burner(name: str, seconds: float, started: threading.Event, go: threading.Event, done: threading.Event,
            leave: threading.Event, cpu: list[float]) -> None:
    Path(f"/proc/self/task/{threading.get_native_id()}/comm").write_text(name)
    started.set()
    go.wait(20)
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass
    cpu.append(time.thread_time() - start)
    done.set()
    leave.wait(20)


def test_thread_cpu_counts_threads_alive_at_both_snapshots_by_name() -> None:
    events = [threading.Event() for _ in range(8)]
    old_started, old_go, old_done, old_leave, new_started, new_go, new_done, new_leave = events
    old_cpu: list[float] = []
    new_cpu: list[float] = []
    old = threading.Thread(target=_burner, args=("burner-old", 0.06, old_started, old_go, old_done, old_leave,
                                                 old_cpu), daemon=True)
    new = threading.Thread(target=_burner, args=("burner-new", 0.06, new_started, new_go, new_done, new_leave,
                                                 new_cpu), daemon=True)
    old.start()
    try:
        assert old_started.wait(20)
        before = snapshot(os.getpid())
        new.start()  # born inside the window: not counted
        assert new_started.wait(20)
        old_go.set()
        new_go.set()
        assert old_done.wait(20) and new_done.wait(20)
        after = snapshot(os.getpid())
    finally:
        for event in events:
            event.set()
        old.join(20)
        new.join(20)
    assert "burner-old" in {name for name, _ in before.threads.values()}
    got = thread_cpu_between(before, after, "burner-")
    assert got == pytest.approx(old_cpu[0], abs=TOLERANCE_S)
    assert thread_cpu_between(before, after, "no-such-thread") is None
    own = own_cpu_between(before, after)
    assert own is not None and own >= old_cpu[0] + new_cpu[0] - 2 * TOLERANCE_S  # the process: all its threads
    one, two = ProcessCpu(1, 0, "a", 1.0, 0.0), ProcessCpu(2, 1, "b", 2.0, 0.0)
    assert own_cpu_between(TreeSnapshot(1, {1: one, 2: two}), TreeSnapshot(2, {1: one, 2: two})) is None


# -- ZooKeeper's replies ----------------------------------------------------------------------------------------
MNTR = "".join(f"{k}\t{v}\n" for k, v in [
    ("zk_version", "3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC"), ("zk_server_state", "standalone"),
    ("zk_num_alive_connections", "6"), ("zk_avg_latency", "2.1111"), ("zk_packets_sent", "1400"),
    ("zk_packets_received", "1515"), ("zk_avg_updatelatency", "3.4"), ("zk_min_updatelatency", "1"),
    ("zk_cnt_updatelatency", "517"), ("zk_sum_updatelatency", "1758"), ("zk_p50_updatelatency", "2"),
    ("zk_avg_readlatency", "0.5"), ("zk_cnt_readlatency", "804"), ("zk_sum_readlatency", "402"),
    # per namespace: cnt is the number of requests, sum their bytes
    ("zk_avg_bench-spark_read_per_namespace", "83.0"), ("zk_cnt_bench-spark_read_per_namespace", "121"),
    ("zk_sum_bench-spark_read_per_namespace", "10043"), ("zk_cnt_bench-spark_write_per_namespace", "233"),
    ("zk_sum_bench-spark_write_per_namespace", "3184"), ("zk_cnt_other_write_per_namespace", "9"),
    ("zk_cnt_other_read_per_namespace", "8"),
])

STAT = """Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
Clients:
 /127.0.0.1:43836[1](queued=0,recved=9,sent=9)
 /127.0.0.1:43850[0](queued=0,recved=1,sent=0)
 /[0:0:0:0:0:0:0:1]:41234[1](queued=0,recved=27,sent=27,sid=0x1000003a2b40001,lop=PING,est=1700000000000,to=10000)

Latency min/avg/max: 0/2.1111/7
Received: 16
Sent: 17
Connections: 3
Outstanding: 0
Zxid: 0x5
Mode: standalone
Node count: 7
"""


def test_parse_mntr_takes_request_counts_not_latencies_or_bytes() -> None:
    got = parse_mntr(MNTR, "bench-spark")
    assert got == ZkCounters(writes=517, reads=804, packets=1515, namespace_writes=233, namespace_reads=121,
                             connections=6)
    other = parse_mntr(MNTR, "other")
    assert (other.namespace_writes, other.namespace_reads) == (9, 8)
    assert parse_mntr(MNTR, "nowhere").namespace_writes == 0  # no request under it yet


@pytest.mark.parametrize("reply", ["", "mntr is not executed because it is not in the whitelist.\n",
                                   "zk_version\t3.4.14\nzk_packets_received\t10\n"])
def test_parse_mntr_refuses_a_reply_without_request_counters(reply: str) -> None:
    with pytest.raises(ValueError, match="4lw.commands.whitelist"):
        parse_mntr(reply, "bench-spark")


def test_parse_stat_clients_reads_each_connection_packets() -> None:
    assert parse_stat_clients(STAT) == {"127.0.0.1:43836": 9, "127.0.0.1:43850": 1, "[0:0:0:0:0:0:0:1]:41234": 27}
    assert parse_stat_clients("This ZooKeeper instance is not currently serving requests\n") == {}


def _zk(writes: int, reads: int, clients: dict[str, int], connections: int = 3) -> ZkCounters:
    return ZkCounters(writes, reads, writes + reads + 10, writes - 1, reads - 2, connections, clients)


def test_idle_pings_count_only_connections_open_since_the_baseline() -> None:
    baseline = _zk(10, 10, {"a:1": 5, "b:2": 3, "gone:3": 4})
    before = _zk(20, 20, {"a:1": 7, "b:2": 4, "new:4": 2})
    after = _zk(30, 40, {"a:1": 10, "b:2": 4, "new:4": 12, "newer:5": 6})
    assert idle_pings(baseline, before, after) == 3  # a: 3 more, b: none; new and newer are the run's own
    assert idle_pings(before, before, after) == 13  # with the run's connections taken as old ones
    reused = _zk(30, 40, {"a:1": 1, "b:2": 6})  # a's address reused by a new connection: not a negative count
    assert idle_pings(baseline, before, reused) == 2


def test_counters_minus_and_the_counter_needs_no_server() -> None:
    before, after = _zk(20, 20, {}, connections=3), _zk(30, 45, {"a:1": 1}, connections=5)
    assert after.minus(before) == ZkCounters(10, 25, 35, 10, 25, 5, {"a:1": 1})
    counter = ZkRequestCounter("127.0.0.1:1,127.0.0.2:2", "/bench-spark/apps")  # nothing listens on port 1
    assert (counter.host, counter.port, counter.namespace) == ("127.0.0.1", 1, "bench-spark")
    assert ZkRequestCounter(":2181", "bench").host == "127.0.0.1"


# -- a Spark query's costs by process ---------------------------------------------------------------------------
JVM = 100
RUNNER = "python3 -m pyspark.sql.streaming.python_streaming_source_runner"
PLANNING = "python3 -m pyspark.daemon pyspark.sql.worker.create_data_source"
EXECUTOR = "python3 -m pyspark.daemon pyspark.worker"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _p(pid: int, ppid: int, command: str, own: float, reaped: float = 0.0, state: str = "S") -> ProcessCpu:
    return ProcessCpu(pid, ppid, command, own, reaped, state)


def _snap(seconds: float, zk: ZkCounters, *procs: ProcessCpu, threads: dict[int, tuple[str, float]] | None = None
          ) -> CostSnapshot:
    return CostSnapshot(T0 + dt.timedelta(seconds=seconds), zk, TreeSnapshot(JVM, {p.pid: p for p in procs},
                                                                             threads or {}))


ZK_BASELINE = ZkCounters(90, 40, 200, 70, 30, 2, {"old:1": 10})
ZK_BEFORE = ZkCounters(100, 50, 300, 80, 40, 3, {"old:1": 12, "run:2": 3})
ZK_AFTER = ZkCounters(130, 70, 360, 100, 55, 4, {"old:1": 14, "run:2": 20, "run:3": 5})


def _backlog_window() -> tuple[CostSnapshot, CostSnapshot]:
    """A query whose source runner ends (and is reaped by the JVM) inside the window, as in a backlog run."""
    before = _snap(0.0, ZK_BEFORE, _p(JVM, 1, "java", 10.0, 1.0), _p(200, JVM, RUNNER, 0.5),
                   _p(300, JVM, PLANNING, 0.2), _p(400, JVM, EXECUTOR, 0.1, 2.0), _p(401, 400, EXECUTOR, 0.3),
                   _p(450, 400, "sh -c stray", 0.05))
    # the runner ended at 1.7 s; the JVM also reaped 0.25 s of helpers (readlink, chmod); the planning daemon
    # reaped a worker of 0.3 s; the executor daemon reaped worker 401 (0.9 s in all) and a stray process (0.05 s)
    # and forked worker 402
    after = _snap(2.5, ZK_AFTER, _p(JVM, 1, "java", 12.5, 1.0 + 1.7 + 0.25), _p(300, JVM, PLANNING, 0.25, 0.3),
                  _p(400, JVM, EXECUTOR, 0.15, 2.0 + 0.9 + 0.05), _p(402, 400, EXECUTOR, 0.4))
    return before, after


def test_costs_between_follows_a_runner_that_ended_with_the_watch_readings() -> None:
    before, after = _backlog_window()
    got = costs_between(before, after, ZK_BASELINE, runners={200: 1.7})
    assert got["seconds"] == 2.5
    assert got["source_runners"] == 1 and got["source_runner_s"] == pytest.approx(1.2)
    assert got["planning_python_s"] == pytest.approx(0.05 + 0.3)
    assert got["driver_python_s"] == pytest.approx(1.2 + 0.35)
    assert got["jvm_helpers_s"] == pytest.approx(0.25)  # the JVM's reaped time less the runner's
    assert got["jvm_s"] == pytest.approx(2.5) and got["stream_thread_s"] is None
    # executor daemon and workers: 0.05 + (0.4 - 0.3) + 0.95 reaped (the stray's 0.05 in it: so it is listed)
    assert got["executor_python_s"] == pytest.approx(0.05 + 0.1 + 0.95)
    assert got["executor_python_ended_s"] == pytest.approx(0.95)
    assert got["executor_python_processes"] == 3 and got["foreign_ended"] == ["450 sh -c stray"]
    assert (got["zk_writes"], got["zk_idle_pings"], got["zk_reads"]) == (30, 2, 18)  # old:1 pinged twice
    assert (got["zk_namespace_writes"], got["zk_namespace_reads"], got["zk_packets"], got["zk_connections"]) == (
        20, 15, 60, 4)


def test_costs_between_without_the_watch_cannot_split_the_jvm_reaped_time() -> None:
    before, after = _backlog_window()
    got = costs_between(before, after)
    assert got["source_runner_s"] is None and got["driver_python_s"] is None and got["jvm_helpers_s"] is None
    assert got["source_runners"] == 1
    assert got["planning_python_s"] == pytest.approx(0.35) and got["executor_python_s"] == pytest.approx(1.1)
    # without a baseline, the connections open at `before` (the run's own too) are taken as idle
    assert (got["zk_idle_pings"], got["zk_reads"]) == (2 + 17, 20 - 19)


def test_costs_between_a_runner_alive_throughout_a_zombie_and_one_seen_only_by_the_watch() -> None:
    threads_before = {11: ("stream executio", 1.0), 12: ("Executor task l", 5.0)}
    threads_after = {11: ("stream executio", 1.3), 12: ("Executor task l", 6.0)}
    before = _snap(0.0, ZK_BEFORE, _p(JVM, 1, "java", 10.0, 1.0), _p(200, JVM, RUNNER, 0.5),
                   threads=threads_before)
    alive = _snap(2.0, ZK_AFTER, _p(JVM, 1, "java", 11.0, 1.1), _p(200, JVM, RUNNER, 0.6), threads=threads_after)
    got = costs_between(before, alive)
    assert got["source_runner_s"] == pytest.approx(0.1) and got["driver_python_s"] == pytest.approx(0.1)
    assert got["jvm_helpers_s"] == pytest.approx(0.1) and got["stream_thread_s"] == pytest.approx(0.3)

    # ended, not reaped yet: its final CPU from the watch, and the JVM's reaped time does not hold it yet
    zombie = _snap(2.0, ZK_AFTER, _p(JVM, 1, "java", 11.0, 1.2), _p(200, JVM, "", 1.1, state="Z"))
    assert costs_between(before, zombie)["source_runner_s"] is None
    got = costs_between(before, zombie, runners={200: 1.1})
    assert got["source_runner_s"] == pytest.approx(0.6) and got["jvm_helpers_s"] == pytest.approx(0.2)

    # a second query's runner started and ended between the snapshots: only the watch saw it
    short = _snap(2.0, ZK_AFTER, _p(JVM, 1, "java", 11.0, 1.0 + 0.9 + 0.1), _p(200, JVM, RUNNER, 0.6))
    got = costs_between(before, short, runners={200: 0.6, 250: 0.9})
    assert got["source_runners"] == 2 and got["source_runner_s"] == pytest.approx(0.1 + 0.9)
    assert got["jvm_helpers_s"] == pytest.approx(0.1)


# -- the 100-shard estimate's fits -------------------------------------------------------------------------------
def test_fit_line_matches_least_squares_and_goes_through_the_origin_with_one_x() -> None:
    assert fit_line([(4.0, 10.0), (16.0, 34.0)]) == pytest.approx((2.0, 2.0))
    points = [(4.0, 11.0), (4.0, 9.5), (16.0, 35.0), (16.0, 30.0), (8.0, 19.0)]
    slope, intercept = statistics.linear_regression([x for x, _ in points], [y for _, y in points])
    assert fit_line(points) == pytest.approx((intercept, slope))
    assert fit_line([(4.0, 8.0), (4.0, 12.0)]) == pytest.approx((0.0, 2.5))  # every cost taken as per shard
    assert fit_line([(0.0, 5.0), (4.0, 8.0)]) == pytest.approx((0.0, 2.0))  # x <= 0 is left out
    assert fit_line([]) is None and fit_line([(0.0, 1.0)]) is None


def _error(points: list[tuple[float, float, float]], fit: tuple[float, float]) -> float:
    return sum((c - t * fit[0] - r * fit[1]) ** 2 for t, r, c in points)


def test_fit_task_and_record_recovers_both_costs_and_is_least_squares() -> None:
    per_task, per_record = 0.004, 2e-6
    exact = [(t, r, t * per_task + r * per_record) for t, r in [(4, 1000), (16, 20000), (8, 400), (12, 9000)]]
    assert fit_task_and_record([(float(t), float(r), c) for t, r, c in exact]) == pytest.approx((per_task,
                                                                                                 per_record))
    noisy = [(4.0, 1000.0, 0.021), (16.0, 20000.0, 0.1), (8.0, 400.0, 0.029), (12.0, 9000.0, 0.071)]
    fit = fit_task_and_record(noisy)
    assert fit is not None and fit[0] > 0 and fit[1] > 0
    for column in (0, 1):  # least squares: the residuals are orthogonal to both columns
        assert sum(p[column] * (p[2] - p[0] * fit[0] - p[1] * fit[1]) for p in noisy) == pytest.approx(0.0,
                                                                                                       abs=1e-9)


@pytest.mark.parametrize("points", [
    [(1.0, 100.0, 1.0), (1.0, 1000.0, 0.9), (2.0, 100.0, 2.0)],  # more records, less cost: per record < 0
    [(10.0, 100.0, 0.001), (1.0, 1000.0, 1.0), (2.0, 1500.0, 1.4)],  # more tasks, less cost: per task < 0
    [(4.0, 1000.0, 0.02), (8.0, 2000.0, 0.041), (16.0, 4000.0, 0.079)],  # records 250 per task: no telling apart
])
def test_fit_task_and_record_keeps_both_costs_at_least_zero_and_is_the_best_such_fit(
        points: list[tuple[float, float, float]]) -> None:
    fit = fit_task_and_record(points)
    assert fit is not None and fit[0] >= 0 and fit[1] >= 0
    best = _error(points, fit)
    # no non-negative pair on a fine grid around the one-cost fits does better
    top_task = max(c / t for t, _, c in points) * 2
    top_record = max(c / r for _, r, c in points) * 2
    grid = [(top_task * i / 100, top_record * j / 100) for i, j in itertools.product(range(101), repeat=2)]
    assert best <= min(_error(points, g) for g in grid) + 1e-12


def test_fit_task_and_record_without_usable_points() -> None:
    assert fit_task_and_record([]) is None and fit_task_and_record([(0.0, 0.0, 1.0)]) is None


def test_estimate_from_rows_with_exact_costs() -> None:
    per_task, per_record = 0.005, 3e-6

    def run(shards: int, batches: int, records: int, seconds: float) -> dict[str, Any]:
        return {"batches": batches, "records": records, "seconds": seconds,
                "executor_python_s": batches * shards * per_task + records * per_record}

    def fig(value: float) -> dict[str, float]:
        return {"median": value}

    rows = [{"case": "exec", "kind": "caught up", "shards": 4, "costs": [run(4, 5, 5000, 5.0)],
             "zk_writes_per_batch": fig(2 * 4 + 2), "zk_reads_per_batch": fig(12.0),
             "driver_cpu_ms_per_batch": fig(20.0)},
            {"case": "exec", "kind": "caught up", "shards": 16, "costs": [run(16, 10, 5000, 5.0)],
             "zk_writes_per_batch": fig(2 * 16 + 2), "zk_reads_per_batch": fig(36.0),
             "driver_cpu_ms_per_batch": fig(44.0)},
            {"case": "exec", "kind": "backlog", "shards": 4, "costs": [run(4, 2, 20000, 3.0)]},
            {"case": "driver", "kind": "backlog", "shards": 4,  # 2 ms per task, nothing per record
             "costs": [{"batches": 2, "records": 20000, "seconds": 3.0, "executor_python_s": 8 * 0.002},
                       {"batches": 1, "records": 5000, "seconds": 1.0, "executor_python_s": 4 * 0.002}]}]
    got = estimate(rows, "exec", "driver")
    assert got is not None
    assert got["cpu_ms_per_task"] == pytest.approx(per_task * 1000)
    assert got["cpu_us_per_record"] == pytest.approx(per_record * 1e6)
    assert got["executor_cores"] == pytest.approx(ESTIMATE_SHARDS * per_task
                                                  + ESTIMATE_SHARDS * ESTIMATE_SHARD_RATE * per_record)
    assert got["fit_points"] == 3 and got["driver_mode_cpu_ms_per_task"] == pytest.approx(2.0)
    assert got["zk_writes_per_s"] == pytest.approx(2 * ESTIMATE_SHARDS + 2)  # the line through 4 and 16 shards
    assert got["zk_reads_per_s"] == pytest.approx(4 + 2 * ESTIMATE_SHARDS)
    assert got["driver_cpu_ms_per_batch"] == pytest.approx(12 + 2 * ESTIMATE_SHARDS)
    # the widest run made 2 batches/s: each carried half the shards' checkpoint copies
    assert got["measured_batches_per_s"] == pytest.approx(2.0)
    assert got["zk_writes_per_s_up_to"] == pytest.approx(got["zk_writes_per_s"] + ESTIMATE_SHARDS / 2)
    assert estimate([{**r, "costs": []} for r in rows], "exec", "driver") is None
