"""ZooKeeper requests counted by the server itself: its ``mntr`` counters, read before and after a measured window.

Who calls: the Spark benchmark, around each measured run, on the run's private ZooKeeper (the test fixture allows
``mntr``: ``4lw.commands.whitelist=srvr,ruok,stat,mntr``). What ZooKeeper 3.8 counts, checked on this server:

- ``zk_cnt_updatelatency``: every write request the server answered - create, set, delete, a multi (one request
  whatever it holds), also those that failed (a create on an existing node, a create whose parent is missing),
  and session opens and closes. Pings are not writes.
- ``zk_cnt_readlatency``: every other request - getData, exists, getChildren, also those that failed (a read of a
  missing node), sync, and the pings a client sends when its connection was idle for a third of its session
  timeout (kazoo: every ~3.3 s with a 10 s session), which are not the benchmark's work.
- ``zk_cnt_<namespace>_read_per_namespace`` / ``..._write_per_namespace``: the successful reads and writes under
  the first path component ``<namespace>`` only (pings, failed requests and session requests are left out).
- ``zk_packets_received``: every packet (requests, pings, connection requests; a ``mntr`` is one too).

Reading ``mntr`` is itself counted by none of the request counters above, only by ``zk_packets_received``.

Pings are taken out with ``stat``, which lists each client connection with the packets it sent (``recved``): the
packets that connections already open before a run (sessions of earlier runs, idle: kazoo keeps one per Python
worker and checkpoint path) send during the run are their pings, and :func:`idle_pings` counts them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from kinesis_spout.testing.zookeeper import four_letter


@dataclass(frozen=True)
class ZkCounters:
    """The request counters of one ``mntr`` reply (see the module docstring), for one namespace."""

    writes: int
    reads: int
    packets: int
    namespace_writes: int
    namespace_reads: int
    connections: int
    clients: Mapping[str, int] = field(default_factory=dict)  # client address -> packets it sent (``stat``)

    def minus(self, before: "ZkCounters") -> "ZkCounters":
        """The requests between ``before`` and this reading (``connections`` is this reading's)."""
        return ZkCounters(self.writes - before.writes, self.reads - before.reads, self.packets - before.packets,
                          self.namespace_writes - before.namespace_writes,
                          self.namespace_reads - before.namespace_reads, self.connections, self.clients)


_CLIENT = re.compile(r"^\s*/(\S+?)\[\d+\]\(.*?\brecved=(\d+)")


def parse_stat_clients(reply: str) -> dict[str, int]:
    """Client address -> packets received from it, from the ``Clients:`` lines of a ``stat`` reply. PURE."""
    out = {}
    for line in reply.splitlines():
        match = _CLIENT.match(line)
        if match:
            out[match.group(1)] = int(match.group(2))
    return out


def idle_pings(baseline: ZkCounters, before: ZkCounters, after: ZkCounters) -> int:
    """Packets sent between ``before`` and ``after`` by the connections that were already open at ``baseline`` (a
    reading taken before the run started its clients): the pings of earlier runs' idle sessions. PURE."""
    old = set(baseline.clients) & set(before.clients) & set(after.clients)
    return sum(max(0, after.clients[c] - before.clients[c]) for c in old)


def parse_mntr(reply: str, namespace: str) -> ZkCounters:
    """The counters of a ``mntr`` reply; ``ValueError`` when it has no request counters (not a ZooKeeper 3.6+ reply,
    or ``mntr`` not allowed by the server's ``4lw.commands.whitelist``). PURE."""
    values: dict[str, str] = {}
    for line in reply.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            values[key.strip()] = value.strip()
    needed = ("zk_cnt_updatelatency", "zk_cnt_readlatency", "zk_packets_received")
    missing = [k for k in needed if k not in values]
    if missing:
        raise ValueError(f"ZooKeeper's mntr reply has no {', '.join(missing)} (reply {reply[:120]!r}): a ZooKeeper "
                         f"3.6+ server with mntr in 4lw.commands.whitelist is needed")

    def number(key: str) -> int:
        return int(float(values.get(key, "0")))

    return ZkCounters(number("zk_cnt_updatelatency"), number("zk_cnt_readlatency"), number("zk_packets_received"),
                      number(f"zk_cnt_{namespace}_write_per_namespace"),
                      number(f"zk_cnt_{namespace}_read_per_namespace"), number("zk_num_alive_connections"))


class ZkRequestCounter:
    """Reads the counters of one ZooKeeper server (``host:port``) for the znodes under ``prefix``.

    The constructor does no I/O; :meth:`read` asks the server (one short TCP connection)."""

    def __init__(self, hosts: str, prefix: str) -> None:
        host, _, port = hosts.split(",")[0].rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.namespace = prefix.strip("/").split("/")[0]

    def read(self) -> ZkCounters:
        """The counters now (``mntr``) and the client connections (``stat``): two short TCP connections."""
        counters = parse_mntr(four_letter(self.host, self.port, "mntr", timeout_s=5.0), self.namespace)
        clients = parse_stat_clients(four_letter(self.host, self.port, "stat", timeout_s=5.0))
        return ZkCounters(counters.writes, counters.reads, counters.packets, counters.namespace_writes,
                          counters.namespace_reads, counters.connections, clients)
