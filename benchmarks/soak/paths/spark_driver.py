"""The faults of a Spark driver in a process of its own and of its executors: the pipeline, exactly-once and
readStream paths share them.

- ``sigkill-driver``: SIGKILL of the driver's whole process group (Python driver, its JVM, in local mode the Python
  workers), then a new driver;
- ``sigkill-driver-jvm`` (local mode, where the executor runs in the driver's JVM): SIGKILL of the driver's JVM
  alone; the Python driver is given ``JVM_EXIT_S`` to end on its own, then SIGKILLed, and a new driver started;
- ``sigkill-executor-jvm`` (a standalone cluster): SIGKILL of one executor JVM (its worker launches another);
- ``sigkill-python-worker``: SIGKILL of one PySpark Python worker (its task fails and Spark tries it again);
- ``session-expiry``: the driver's group paused past its ZooKeeper session (SIGSTOP, then SIGCONT).
"""

from __future__ import annotations

import os
import random
import signal
import time
from typing import Callable

from benchmarks.soak.faults import THROTTLE, ZOOKEEPER_RESTART, FaultMix
from benchmarks.soak.paths.common import PAUSE_S, SESSION_S
from benchmarks.soak.processes import Consumer, cmdline, descendants, executor_jvms, python_workers
from kinesis_spout.testing.process import wait_until

DRIVER = "sigkill-driver"
JVM = "sigkill-driver-jvm"
EXECUTOR = "sigkill-executor-jvm"
PYTHON_WORKER = "sigkill-python-worker"
SESSION_EXPIRY = "session-expiry"
JVM_EXIT_S = 15.0
#: at least 50 kills of the query's processes in 72 faults, 11 of them drivers (at least ten asked for); a driver
#: restart costs the most (10-45 s to the next delivery on a busy 2-core machine), so the other kills are mostly the
#: quicker ones (Python workers, executor JVMs)
MIX = FaultMix(weights={JVM: 0.5, PYTHON_WORKER: 4, SESSION_EXPIRY: 1, ZOOKEEPER_RESTART: 1, THROTTLE: 1.5},
               at_least={DRIVER: 0.15, PYTHON_WORKER: 0.55})
CLUSTER_MIX = FaultMix(weights={EXECUTOR: 3, PYTHON_WORKER: 3, SESSION_EXPIRY: 1, ZOOKEEPER_RESTART: 1, THROTTLE: 1},
                       at_least={DRIVER: 0.15, EXECUTOR: 0.2, PYTHON_WORKER: 0.35})


class SparkDriverTarget:
    """One Spark driver process and its faults. Who calls: the fault cycle, on the path's thread.

    ``notes`` collects what the faults saw (a JVM kill the driver did not end after, a worker kill with no worker
    running); the path reports them.
    """

    def __init__(self, driver: Consumer, executors: Callable[[], list[int]] | None = None) -> None:
        self.driver = driver
        self.executors = executors  # the standalone workers' pids (executor JVMs below them); None: local mode
        self.notes: list[str] = []

    def revive(self) -> list[str]:
        return self.driver.exits[-1:] if self.driver.revive() else []

    def fault(self, kind: str, rng: random.Random) -> str:
        if kind == DRIVER:
            self.driver.kill()
            self.driver.start()
            return "driver SIGKILLed (with its JVM and workers) and started again"
        if kind == SESSION_EXPIRY:
            self.driver.pause(PAUSE_S)
            return f"driver paused {PAUSE_S:g} s (session {SESSION_S:g} s)"
        if kind == PYTHON_WORKER:
            return self._kill_python_worker(rng)
        if kind == JVM:
            return self._kill_jvm()
        if kind == EXECUTOR:
            return self._kill_executor(rng)
        raise ValueError(f"a Spark driver path has no fault {kind!r}")

    def _kill_python_worker(self, rng: random.Random) -> str:
        found: list[int] = []

        def some() -> bool:
            found[:] = [w for root in self._roots() for w in python_workers(root)]
            return bool(found)

        if not wait_until(some, 10.0, interval_s=0.1):
            self.notes.append("a Python worker kill found no Python worker running within 10 s")
            return "no Python worker running: nothing killed"
        victim = rng.choice(found)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            return f"Python worker {victim} ended before the SIGKILL"
        return f"Python worker {victim} SIGKILLed (of {len(found)})"

    def _roots(self) -> list[int]:
        """Where the Python workers run: under the standalone workers, else under the driver."""
        if self.executors is not None:
            return self.executors()
        return [self.driver.pid] if self.driver.pid else []

    def _kill_executor(self, rng: random.Random) -> str:
        jvms = [j for root in self._roots() for j in executor_jvms(root)]
        if not jvms:
            self.notes.append("an executor JVM kill found no executor running")
            return "no executor JVM running: nothing killed"
        victim = rng.choice(jvms)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            return f"executor JVM {victim} ended before the SIGKILL"
        return f"executor JVM {victim} SIGKILLed (of {len(jvms)})"

    def _kill_jvm(self) -> str:
        pid = self.driver.pid
        jvms = [p for p in descendants(pid) if cmdline(p).startswith("java ") or "/java " in cmdline(p)] if pid else []
        if not jvms:
            self.driver.kill()
            self.driver.start()
            return "no JVM found under the driver: the driver was SIGKILLed instead"
        os.kill(jvms[0], signal.SIGKILL)
        began = time.monotonic()
        ended = wait_until(lambda: not self.driver.running, JVM_EXIT_S)
        if not ended:
            self.notes.append(f"the Python driver was still running {JVM_EXIT_S:g} s after its JVM was killed")
        self.driver.kill()
        self.driver.start()
        return (f"driver JVM {jvms[0]} SIGKILLed; the Python driver "
                f"{'ended after %.1f s' % (time.monotonic() - began) if ended else 'did not end: SIGKILLed'}; "
                f"started again")
