"""What a ``readStream`` query costs per batch on a local Spark session: ZooKeeper requests and CPU, by process.

Who calls: the Spark benchmark. :class:`SparkCostProbe` takes a :class:`CostSnapshot` before and after a measured
window (ZooKeeper's request counters, and the CPU of the Spark JVM and of the processes it started);
:func:`costs_between` (pure) says what was spent in between, split the way the benchmark reports it:

- **driver Python**: where a Python data source's driver side runs in PySpark 4. The JVM starts one process per
  streaming query, ``python -m pyspark.sql.streaming.python_streaming_source_runner`` (the *source runner*), and
  calls the reader's ``initialOffset``/``latestOffset``/``partitions``/``commit`` in it (this is where the source
  plans batches, keeps its ZooKeeper and Kinesis clients, and in ``readMode=driver`` reads every record); when a
  query starts the JVM also asks short-lived workers forked by ``pyspark.daemon pyspark.sql.worker.*`` processes
  (looking up and creating the data source, pickling the read function). Both are counted; the process that ran
  ``spark.readStream`` (and the ``foreachBatch`` function) is not. A runner that ends inside the window (a whole
  query in it) is followed by a :class:`RunnerWatch`, which knows its CPU up to its end.
- **JVM helpers**: the other short-lived processes the JVM starts and reaps: Hadoop's local file system runs
  ``readlink`` and ``chmod`` (through Java's ``jspawnhelper``) while it writes a query's checkpoint files, when
  Hadoop's native library is not there. Driver-side work of the JVM.
- **stream thread**: the JVM thread that drives the query (``stream execution thread for ...``: offset and
  commit logs, calls into the driver Python, job submission, progress), when it was alive at both snapshots.
- **executor Python**: the Python workers forked by ``pyspark.daemon pyspark.worker`` that run the tasks' ``read``
  (in ``readMode=executors`` they read Kinesis and record the batch ends in ZooKeeper).
- **JVM**: the whole JVM's own CPU - in ``local[N]`` the driver and the executors share it (task threads, the
  Arrow batches coming back from Python, the sink's job, GC and the JIT compilers).
- **ZooKeeper**: see :mod:`benchmarks.zk_requests`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from benchmarks.proc_cpu import (
    ProcessCpu,
    TreeSnapshot,
    own_cpu_between,
    read_process,
    snapshot,
    thread_cpu_between,
    tree_cpu_between,
)
from benchmarks.zk_requests import ZkCounters, ZkRequestCounter, idle_pings

SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
PLANNING_DAEMONS = "pyspark.daemon pyspark.sql.worker."
EXECUTOR_DAEMON = "pyspark.daemon pyspark.worker"
STREAM_THREAD = "stream executio"  # "stream execution thread for ...", cut to 15 characters by Linux


def is_source_runner(proc: ProcessCpu) -> bool:
    return SOURCE_RUNNER in proc.command


def is_planning_python(proc: ProcessCpu) -> bool:
    return PLANNING_DAEMONS in proc.command


def is_executor_python(proc: ProcessCpu) -> bool:
    return proc.command.endswith(EXECUTOR_DAEMON)


@dataclass(frozen=True)
class CostSnapshot:
    """ZooKeeper's counters and the Spark JVM's process tree at one moment (``at``: UTC wall clock, to compare with
    the timestamps of Spark's progress reports)."""

    at: dt.datetime
    zk: ZkCounters
    tree: TreeSnapshot


class SparkCostProbe:
    """Snapshots of one Spark session's JVM (``jvm_pid``) and one ZooKeeper server. The constructor does no I/O."""

    def __init__(self, jvm_pid: int, zookeeper: ZkRequestCounter) -> None:
        self.jvm_pid = jvm_pid
        self.zookeeper = zookeeper

    @classmethod
    def for_session(cls, spark: Any, zookeeper_hosts: str, prefix: str) -> "SparkCostProbe":
        """The probe of ``spark``'s JVM (asked for its pid over py4j) and the ZooKeeper at ``zookeeper_hosts``."""
        pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        return cls(pid, ZkRequestCounter(zookeeper_hosts, prefix))

    def snapshot(self) -> CostSnapshot:
        at = dt.datetime.now(dt.timezone.utc)
        return CostSnapshot(at, self.zookeeper.read(), snapshot(self.jvm_pid))

    def wait_source_runners_gone(self, known: Iterable[int] = (), timeout_s: float = 10.0) -> bool:
        """Wait until the source runners (those running now, and the pids in ``known``) have ended and the JVM has
        reaped them (which adds their CPU to its reaped time; an ended runner not reaped yet has no command line to
        be told by, hence ``known``). True when that happened in time."""
        pids = set(known)
        deadline = time.monotonic() + timeout_s
        while True:
            tree = snapshot(self.jvm_pid, with_threads=False)
            pids |= {pid for pid, p in tree.processes.items() if is_source_runner(p)}
            if all(read_process(pid) is None for pid in pids):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


class RunnerWatch:
    """Follows the CPU of the JVM's source runners from a thread (``runner-watch``), so that the CPU of a runner that
    ends before the next snapshot is known: :meth:`stop` returns each runner's last reading (its final CPU when the
    watch saw it ended and not reaped yet, else at most ``interval_s`` of its life is missed; it ends idle).

    The constructor does no I/O; :meth:`start` starts the thread, :meth:`stop` joins it (idempotent). The readings
    are owned by the thread until it is joined."""

    def __init__(self, jvm_pid: int, interval_s: float = 0.05) -> None:
        self.jvm_pid = jvm_pid
        self.interval_s = interval_s
        self._last: dict[int, float] = {}
        self._ended: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runner-watch", daemon=True)

    def start(self) -> "RunnerWatch":
        self._thread.start()
        return self

    def _read(self) -> bool:
        """One reading of the known runners; True while one of them is alive."""
        alive = False
        for pid in [p for p in self._last if p not in self._ended]:
            proc = read_process(pid)
            if proc is None or proc.zombie:
                self._ended.add(pid)
                if proc is not None:
                    self._last[pid] = proc.own_s
            else:
                self._last[pid] = proc.own_s
                alive = True
        return alive

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._read():  # look for a new runner only while none is known alive (a scan costs ~ms)
                tree = snapshot(self.jvm_pid, with_threads=False)
                for pid, proc in tree.processes.items():
                    if is_source_runner(proc) and pid not in self._last:
                        self._last[pid] = proc.own_s
            self._stop.wait(self.interval_s)  # pacing

    def stop(self) -> dict[int, float]:
        """Stop following; each runner seen (pid) and its last CPU seconds."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self._read()
        return dict(self._last)


def costs_between(before: CostSnapshot, after: CostSnapshot, baseline: ZkCounters | None = None,
                  runners: Mapping[int, float] | None = None) -> dict[str, Any]:
    """Seconds of CPU and ZooKeeper requests between two snapshots (see the module docstring). PURE.

    ``runners`` (a :class:`RunnerWatch`'s readings) gives the CPU of source runners that ended in between; without
    it, a runner that ended in between makes ``driver_python_s`` None (its CPU cannot be told apart from the JVM
    helpers' in the JVM's reaped time). ``zk_reads`` leaves out the pings of the ZooKeeper connections already
    open at ``baseline`` (a reading taken before the run started its clients; ``before``'s when None), which are
    in ``zk_idle_pings``; ``zk_writes`` has no pings to leave out. ``foreign_ended`` lists (pid and command) the
    processes that ended in between, were reaped by a Python daemon and were not its workers (their CPU would be
    in the Python figures). ``executor_python_ended_s`` is the part of ``executor_python_s`` spent by workers that
    ended in between: near all of it when Spark does not reuse its Python workers."""
    runners = runners or {}
    old, new = before.tree.processes, after.tree.processes
    seen = {pid for pid, p in (*old.items(), *new.items()) if is_source_runner(p)} | set(runners)
    runner_s: float | None = 0.0
    ended_s = 0.0  # final CPU of the runners that ended (and were reaped by the JVM) in between
    for pid in seen:
        start = old[pid].own_s if pid in old else 0.0
        if pid in new and not new[pid].zombie:
            end = new[pid].own_s
        elif pid in runners:
            end = runners[pid]
            if pid not in new:  # reaped: its CPU is in the JVM's reaped time
                ended_s += end
        else:
            runner_s = None  # ended in between and not followed
            break
        runner_s = runner_s + end - start if runner_s is not None else None
    planning = tree_cpu_between(before.tree, after.tree, is_planning_python)
    executors = tree_cpu_between(before.tree, after.tree, is_executor_python)
    jvm_was, jvm_now = old.get(before.tree.root), new.get(after.tree.root)
    reaped = jvm_now.reaped_s - jvm_was.reaped_s if jvm_was and jvm_now else None
    zk = after.zk.minus(before.zk)
    pings = idle_pings(baseline if baseline is not None else before.zk, before.zk, after.zk)
    return {"seconds": (after.at - before.at).total_seconds(),
            "driver_python_s": None if runner_s is None else runner_s + planning.seconds,
            "source_runner_s": runner_s, "source_runners": len(seen), "planning_python_s": planning.seconds,
            "jvm_helpers_s": None if reaped is None or runner_s is None else max(0.0, reaped - ended_s),
            "foreign_ended": [*planning.foreign_ended, *executors.foreign_ended],
            "stream_thread_s": thread_cpu_between(before.tree, after.tree, STREAM_THREAD),
            "executor_python_s": executors.seconds, "executor_python_ended_s": executors.reaped_s,
            "executor_python_processes": len(executors.members), "jvm_s": own_cpu_between(before.tree, after.tree),
            "zk_writes": zk.writes, "zk_reads": zk.reads - pings, "zk_idle_pings": pings,
            "zk_namespace_writes": zk.namespace_writes, "zk_namespace_reads": zk.namespace_reads,
            "zk_packets": zk.packets, "zk_connections": zk.connections}
