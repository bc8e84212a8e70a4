"""Consumer processes of the soak and the signals the faults send them.

Every consumer runs in a session (process group) of its own and dies with the harness
(:class:`~kinesis_spout.testing.process.ServerProcess`). A SIGKILL goes to the whole group: for a Spark driver that
is the Python driver, its JVM and the JVM's Python workers, as when the host of a driver dies. The helpers below
find a Spark driver's Python workers and executor JVMs among the descendants of a process, from ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Sequence

from kinesis_spout.testing.process import ServerProcess


class Consumer:
    """One consumer process, started again after each kill with the same command line.

    Who calls: a path's thread only. ``starts`` counts the launches, ``exits`` the unexpected exits seen by
    :meth:`revive` (each with its exit code and log tail), which a path reports as findings.
    """

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self._server = ServerProcess(name, argv, log_path, env=env, cwd=cwd)
        self.starts = 0
        self.exits: list[str] = []

    @property
    def pid(self) -> int | None:
        return self._server.pid

    @property
    def running(self) -> bool:
        return self._server.running

    def start(self) -> None:
        self._server.start()
        self.starts += 1

    def revive(self) -> bool:
        """Start the process again if it ended on its own (noted in ``exits``); True if it had ended."""
        if self._server.running:
            return False
        self.exits.append(f"{self.name} exited with code {self._server.exit_code()}:\n{self._server.log_tail(15)}")
        self._server.kill()  # reaps it
        self.start()
        return True

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the process group (the consumer and everything it started)."""
        pid = self._server.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole group and reap the leader."""
        self.signal_group(signal.SIGKILL)
        self._server.kill()

    def pause(self, seconds: float) -> None:
        """SIGSTOP the group for ``seconds`` (past a ZooKeeper session timeout), then SIGCONT."""
        self.signal_group(signal.SIGSTOP)
        try:
            time.sleep(seconds)  # the pause itself, not synchronisation
        finally:
            self.signal_group(signal.SIGCONT)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGCONT, SIGTERM and wait up to ``grace_s`` (then SIGKILL); the rest of the group is killed too."""
        pid = self._server.pid
        if pid is None:
            return
        self.signal_group(signal.SIGCONT)
        self._server.stop(grace_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)

    def log_tail(self, lines: int = 20) -> str:
        return self._server.log_tail(lines)


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/*/stat``."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid``, nearest first."""
    tree = _children()
    out: list[int] = []
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo.extend(tree.get(child, []))
    return out


def python_workers(pid: int) -> list[int]:
    """The PySpark Python workers under ``pid`` (forked by a ``pyspark.daemon``; the daemon itself when it has no
    worker at the moment)."""
    found = [p for p in descendants(pid) if "pyspark" in cmdline(p) and ("daemon" in cmdline(p)
                                                                        or "worker" in cmdline(p))]
    workers = [p for p in found if any(q in found for q in _parents(p))]
    return workers or found


def _parents(pid: int) -> list[int]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return [int(stat.rsplit(")", 1)[1].split()[1])]


def executor_jvms(pid: int) -> list[int]:
    """The Spark executor JVMs under ``pid`` (standalone workers' ``CoarseGrainedExecutorBackend``)."""
    return [p for p in descendants(pid) if "ExecutorBackend" in cmdline(p)]
