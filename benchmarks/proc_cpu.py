"""CPU time of a process tree from Linux's ``/proc``: which process (or thread) spent how much, between two moments.

Who calls: the Spark benchmark, which takes a :func:`snapshot` of the Spark JVM and the Python processes it started
before and after a measured window and asks :func:`tree_cpu_between` (or :func:`thread_cpu_between`) for the CPU
seconds a group of them spent in between. Snapshots are plain values; the arithmetic on them is pure.

A process that ends inside the window still counts: once its parent reaps it, Linux adds its CPU time to the
parent's "reaped children" time (``cutime`` + ``cstime``), so the CPU of a group between two snapshots is
``sum(own CPU of its members alive at the end) - sum(own CPU of its members alive at the start) + (reaped time of
their parents at the end - at the start)``. That is exact when the parents reap nothing but members in between;
:func:`tree_cpu_between` reports the children of those parents that ended and were not members, so a reader can
tell. Threads have no such record: a thread that ends inside the window loses its figure
(:func:`thread_cpu_between` counts only threads alive at both ends). Resolution: one clock tick (10 ms).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Mapping

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessCpu:
    """One process at one moment: its parent, command line, own CPU seconds (user + system, all its threads,
    ended ones included) and the CPU seconds of its children it has reaped."""

    pid: int
    ppid: int
    command: str
    own_s: float
    reaped_s: float
    state: str = "R"

    @property
    def zombie(self) -> bool:
        """Ended but not reaped yet: its command line reads empty, its CPU is not in its parent's reaped time yet."""
        return self.state == "Z"


@dataclass(frozen=True)
class TreeSnapshot:
    """A process tree at one moment: ``root`` and its descendants by pid, and the CPU seconds of the root's threads
    by thread id (with their names, ``comm``: at most 15 characters)."""

    root: int
    processes: Mapping[int, ProcessCpu] = field(default_factory=dict)
    threads: Mapping[int, tuple[str, float]] = field(default_factory=dict)


def parse_stat(text: str) -> tuple[str, int, str, float, float]:
    """``(comm, ppid, state, own CPU s, reaped children's CPU s)`` from the text of ``/proc/<pid>/stat``.

    The name may hold spaces and parentheses, so the fields are split after its last ``)`` (proc(5): state is
    field 3, ppid 4, utime 14, stime 15, cutime 16, cstime 17, in clock ticks)."""
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    if len(fields) < 15:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return comm, int(fields[1]), fields[0], (utime + stime) * TICK_S, (cutime + cstime) * TICK_S


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError:  # ended meanwhile, or not ours to read
        return None


def read_process(pid: int) -> ProcessCpu | None:
    """The process now, or None when it has ended (a zombie not reaped yet counts as still there)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    _, ppid, state, own, reaped = parse_stat(stat)
    command = (_read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    return ProcessCpu(pid, ppid, command, own, reaped, state)


def _all_parents() -> dict[int, int]:
    """pid -> ppid of every process now."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _read(f"/proc/{name}/stat")
            if stat is not None:
                out[int(name)] = parse_stat(stat)[1]
    return out


def snapshot(root: int, with_threads: bool = True) -> TreeSnapshot:
    """``root`` and its descendants now, and (``with_threads``) the root's threads. A few milliseconds."""
    parents = _all_parents()
    members = {root}
    grew = True
    while grew:  # descendants at any depth
        more = {pid for pid, ppid in parents.items() if ppid in members and pid not in members}
        members |= more
        grew = bool(more)
    processes = {}
    for pid in sorted(members):
        proc = read_process(pid)
        if proc is not None:
            processes[pid] = proc
    threads: dict[int, tuple[str, float]] = {}
    if with_threads:
        try:
            tids = os.listdir(f"/proc/{root}/task")
        except OSError:
            tids = []
        for tid in tids:
            stat = _read(f"/proc/{root}/task/{tid}/stat")
            if stat is not None:
                comm, _, _, own, _ = parse_stat(stat)
                threads[int(tid)] = (comm, own)
    return TreeSnapshot(root, processes, threads)


@dataclass(frozen=True)
class GroupCpu:
    """CPU seconds a group of processes spent between two snapshots (``reaped_s`` of them by processes that ended
    and were reaped meanwhile), its members seen at either snapshot, and the children of its reapers that ended in
    between without being members (their CPU is in ``seconds`` too: see the module docstring), with their commands.
    """

    seconds: float
    members: tuple[int, ...]
    foreign_ended: tuple[str, ...]
    reaped_s: float = 0.0


def tree_cpu_between(before: TreeSnapshot, after: TreeSnapshot, member: Callable[[ProcessCpu], bool],
                     root_reaps_members: bool = False) -> GroupCpu:
    """The CPU the processes ``member`` selects spent between ``before`` and ``after`` (see the module docstring).

    PURE. The reaped time that counts is that of the members themselves (a daemon that forks and reaps workers)
    and, with ``root_reaps_members``, the root's (whose children that end must then all be members: the others
    are listed in ``foreign_ended``). The root itself is never a member. A process is a member when either
    snapshot says so (a zombie's command line reads empty); a zombie at ``after`` that ``before`` did not know
    cannot be judged: take ``after`` once the parents reaped their children."""
    pids = {pid for snap in (before, after) for pid, p in snap.processes.items()
            if pid != snap.root and member(p)}
    first = {pid: before.processes[pid] for pid in pids if pid in before.processes}
    last = {pid: after.processes[pid] for pid in pids if pid in after.processes}
    reapers = set(first) | set(last) | ({before.root} if root_reaps_members else set())
    seconds = sum(p.own_s for p in last.values()) - sum(p.own_s for p in first.values())
    reaped = 0.0
    for pid in reapers:
        was, now = before.processes.get(pid), after.processes.get(pid)
        if now is not None:  # a reaper that ended meanwhile took its reaped time with it (its parent has it)
            reaped += now.reaped_s - (was.reaped_s if was is not None else 0.0)
        elif was is not None and was.ppid in reapers and after.processes.get(was.ppid) is not None:
            reaped -= was.reaped_s  # its parent's reaped time holds all it had reaped, before the window too
    foreign = tuple(sorted(f"{pid} {p.command}" for pid, p in before.processes.items()
                           if p.ppid in reapers and pid not in after.processes and pid not in first))
    return GroupCpu(max(0.0, seconds + reaped), tuple(sorted(set(first) | set(last))), foreign, reaped)


def own_cpu_between(before: TreeSnapshot, after: TreeSnapshot) -> float | None:
    """The root process's own CPU (all its threads) between the snapshots; None when it is missing from one."""
    was, now = before.processes.get(before.root), after.processes.get(after.root)
    if was is None or now is None or before.root != after.root:
        return None
    return now.own_s - was.own_s


def thread_cpu_between(before: TreeSnapshot, after: TreeSnapshot, name_prefix: str) -> float | None:
    """CPU of the root's threads whose name starts with ``name_prefix`` and that were alive at both snapshots;
    None when there was none."""
    tids = [tid for tid, (comm, _) in after.threads.items()
            if comm.startswith(name_prefix) and tid in before.threads]
    if not tids:
        return None
    return sum(after.threads[t][1] - before.threads[t][1] for t in tids)
