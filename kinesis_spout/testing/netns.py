"""The Linux plumbing of :mod:`kinesis_spout.testing.nodes`: ``ip`` commands, whether network namespaces can be
made here, a private subnet per network, and the removal of what a crashed run left behind.

Every name made here starts with :data:`PREFIX` (``ksn``) and a network id of six hex digits, so a cleanup removes
only what this harness made: namespaces ``ksn-<id>-<n>``, a bridge ``ksn<id>b`` and host-side veths
``ksn<id>h<n>``. Each network takes one of four /26 slots of :data:`SUBNET` (``10.200.0.0/24``), a range that lives
on this machine alone: the bridge gets the slot's first address, the nodes the next ones, and nothing routes it
anywhere else (no default route in a node, no NAT). A network records its owner (pid and start time) in
:data:`STATE_DIR`; :func:`cleanup_leftovers` removes the networks whose owner is gone.

Who calls: :class:`kinesis_spout.testing.nodes.NodeNetwork`, and ``python -m kinesis_spout.testing.netns`` (a
manual cleanup).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Sequence

PREFIX = "ksn"
SUBNET = ipaddress.ip_network("10.200.0.0/24")
SLOT_PREFIX_LEN = 26
STATE_DIR = Path("/run/kinesis-spout-nodes")
_NAME = re.compile(rf"^{PREFIX}-?([0-9a-f]{{6}})")


class NodesUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no ``ip``, or ``ip netns add`` refused); the message
    says which and what to do."""


class NetnsCommandError(RuntimeError):
    """An ``ip`` or ``tc`` command failed; the message has the command and its output."""


def run(argv: Sequence[str], *, check: bool = True, timeout_s: float = 30.0) -> str:
    """Run one command (``ip``, ``tc``) and return its stdout; :class:`NetnsCommandError` when it fails and
    ``check``."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    if check and done.returncode != 0:
        raise NetnsCommandError(f"{' '.join(argv)} failed with code {done.returncode}: "
                                f"{(done.stderr or done.stdout).strip()}")
    return done.stdout


def in_namespace(namespace: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside ``namespace`` (``ip netns exec``, which execs: the pid is the command's own)."""
    return ["ip", "netns", "exec", namespace, *argv]


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be made here, or None when they can: checks root, ``ip`` and ``tc``, then
    makes and removes a namespace. Who calls: :meth:`NodeNetwork.start` and the tests' skip condition."""
    if os.geteuid() != 0:
        return "network namespaces need root (this process runs as uid %d)" % os.geteuid()
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH: install iproute2 (apt-get install -y iproute2)"
    probe = f"{PREFIX}-probe{os.getpid()}"
    try:
        run(["ip", "netns", "add", probe])
    except (NetnsCommandError, OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns add` failed here: {exc}"
    run(["ip", "netns", "del", probe], check=False)
    return None


def netem_unavailable_reason() -> str | None:
    """Why ``tc ... netem`` (delay, loss) cannot be used here, or None when it can: tries it on the loopback of a
    probe namespace. Kernels built without ``CONFIG_NET_SCH_NETEM`` (some VM kernels) refuse it while namespaces,
    veths and bridges work. Who calls: :meth:`NodeNetwork.start`."""
    probe = f"{PREFIX}-probe{os.getpid()}"
    try:
        run(["ip", "netns", "add", probe])
        done = subprocess.run(in_namespace(probe, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                                                   "1ms"]), capture_output=True, text=True, timeout=30, check=False)
    except (NetnsCommandError, OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns add` failed here: {exc}"
    finally:
        run(["ip", "netns", "del", probe], check=False)
    if done.returncode != 0:
        return (f"this kernel refuses the netem qdisc ({(done.stderr or done.stdout).strip()}): it was built without "
                f"CONFIG_NET_SCH_NETEM (sch_netem), so links can be cut but not slowed")
    return None


@contextlib.contextmanager
def allocation_lock() -> Iterator[None]:
    """Holds a machine-wide lock while a network picks its slot and makes its bridge (two test processes starting
    networks at once would otherwise pick the same slot)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def slots() -> list[ipaddress.IPv4Network]:
    """The /26 subnets of :data:`SUBNET` a network may take."""
    return list(SUBNET.subnets(new_prefix=SLOT_PREFIX_LEN))  # type: ignore[arg-type]


def free_slot() -> ipaddress.IPv4Network | None:
    """The first slot no address of this machine's (host) interfaces lies in; call under :func:`allocation_lock`."""
    used = set()
    for line in run(["ip", "-o", "-4", "addr", "show"]).splitlines():
        match = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", line)
        if match:
            used.add(ipaddress.ip_address(match.group(1)))
    for slot in slots():
        if not any(address in slot for address in used):
            return slot
    return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()[19]


def record_owner(network_id: str) -> None:
    """Write this process as the owner of ``network_id`` (read back by :func:`cleanup_leftovers`)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / network_id).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")


def _owner_alive(network_id: str) -> bool:
    try:
        pid_text, started = (STATE_DIR / network_id).read_text().split()
    except (OSError, ValueError):
        return False
    return _start_time(int(pid_text)) == started


def existing_ids() -> set[str]:
    """The ids of every network of this harness that has a namespace, a link or an owner file on this machine."""
    found = set()
    for line in run(["ip", "netns", "list"], check=False).splitlines() + \
            [line.split(":")[1].strip().split("@")[0] for line in run(["ip", "-o", "link", "show"]).splitlines()]:
        match = _NAME.match(line.split()[0] if line.split() else "")
        if match:
            found.add(match.group(1))
    if STATE_DIR.is_dir():
        found.update(p.name for p in STATE_DIR.iterdir() if re.fullmatch(r"[0-9a-f]{6}", p.name))
    return found


def namespaces_of(network_id: str) -> list[str]:
    """The namespaces of network ``network_id`` that exist now."""
    names = [line.split()[0] for line in run(["ip", "netns", "list"], check=False).splitlines() if line.split()]
    return [n for n in names if n.startswith(f"{PREFIX}-{network_id}-")]


def links_of(network_id: str) -> list[str]:
    """The host-side links (bridge, veths) of network ``network_id`` that exist now."""
    out = []
    for line in run(["ip", "-o", "link", "show"]).splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(f"{PREFIX}{network_id}"):
            out.append(name)
    return out


def remove_network(network_id: str) -> None:
    """SIGKILL every process in the network's namespaces, delete them, its veths and its bridge, and its owner
    file. Idempotent; never touches a name without the network's prefix."""
    for namespace in namespaces_of(network_id):
        for pid in run(["ip", "netns", "pids", namespace], check=False).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        run(["ip", "netns", "del", namespace], check=False)
    for link in sorted(links_of(network_id), key=lambda name: name.endswith("b")):  # veths first, bridge last
        run(["ip", "link", "del", link], check=False)
    with contextlib.suppress(OSError):
        (STATE_DIR / network_id).unlink()


def cleanup_leftovers() -> list[str]:
    """Remove every network of this harness whose owner process is gone (a test that crashed or was killed);
    returns their ids. Networks of live processes (other test runs on this machine) are left alone."""
    removed = []
    for line in run(["ip", "netns", "list"], check=False).splitlines():
        probe = re.match(rf"^({PREFIX}-probe(\d+))\b", line)
        if probe and _start_time(int(probe.group(2))) is None:  # a probe of unavailable_reason() cut short
            run(["ip", "netns", "del", probe.group(1)], check=False)
    for network_id in sorted(existing_ids()):
        if not _owner_alive(network_id):
            remove_network(network_id)
            removed.append(network_id)
    return removed


def main() -> int:
    """``python -m kinesis_spout.testing.netns``: remove the leftovers of crashed runs and say what was removed."""
    reason = unavailable_reason()
    if reason is not None:
        print(f"nothing to clean: {reason}")
        return 0
    removed = cleanup_leftovers()
    print(f"removed {len(removed)} leftover node network(s){': ' + ', '.join(removed) if removed else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
