"""The benchmark context: run mode, progress output, the real servers, and the streams the read benchmarks share.

Who calls: the runner creates one :class:`BenchContext` per run and hands it to every benchmark's ``run``; the
benchmarks ask it for servers and loaded streams, which start (or are loaded) on first use and are shared by the
benchmarks that come after. ``close()`` stops every server it started; it is idempotent.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from benchmarks.machine import describe_machine, versions
from kinesis_spout.testing.emulators import KinesaliteServer, http_answers
from kinesis_spout.testing.kinesis import KinesisEndpoint, put_records, wait_for_stream
from kinesis_spout.testing.process import ServerProcess, free_port
from kinesis_spout.testing.zookeeper import ZooKeeperServer

#: The ZooKeeper path under which every benchmark run keeps its checkpoints (one app name per consumer run).
ZK_PREFIX = "/kinesis-spout-bench"
_LETTERS = range(ord("a"), ord("z") + 1)


class BenchmarkError(Exception):
    """A benchmark could not measure what it should (a consumer read too little, a server failed); the message
    says which and why."""


@dataclass(frozen=True)
class LoadedStream:
    """A stream created and filled once per run, read many times from TRIM_HORIZON by the read benchmarks."""

    endpoint: KinesisEndpoint
    name: str
    shards: int
    records: int
    record_bytes: int
    shard_ids: tuple[str, ...]
    last_sequence: dict[str, str]  # shard id -> sequence number of its last record
    put_seconds: float

    @property
    def emulator(self) -> str:
        return self.endpoint.name


class MotoSubprocessServer:
    """moto's Kinesis server in a child process (so that its CPU time is not counted as the consumer's).

    The constructor does no I/O; ``start()`` launches it on a free loopback port and waits until it answers;
    ``close()`` is idempotent.
    """

    name = "moto"

    def __init__(self, start_timeout_s: float = 60.0) -> None:
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self._dir: Path | None = None
        self._process: ServerProcess | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MotoSubprocessServer":
        self.port = free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="kinesis-spout-bench-moto-"))
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        self._process = ServerProcess("moto server", argv, self._dir / "moto.log")
        self._process.start()
        self._process.wait_ready(lambda: http_answers(self.endpoint_url), self.start_timeout_s)
        return self

    def close(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None


@dataclass
class BenchContext:
    """What every benchmark gets: the mode, progress output, servers and shared streams.

    ``quick`` selects the shorter sizes of ``--quick`` (``smoke`` is passed to ``run`` separately);
    ``emulators`` lists the Kinesis emulators the read benchmark compares on (kinesalite first).
    """

    quick: bool = False
    emulators: tuple[str, ...] = ("kinesalite",)
    out: TextIO = sys.stdout
    started_at: float = field(default_factory=time.monotonic)
    shared: dict[str, Any] = field(default_factory=dict)  # figures one benchmark leaves for a later one
    _zookeeper: ZooKeeperServer | None = None
    _servers: dict[str, Any] = field(default_factory=dict)
    _streams: dict[tuple[str, int, int, int], LoadedStream] = field(default_factory=dict)
    _machine: dict[str, Any] | None = None

    def profile(self, smoke: bool) -> str:
        """Which sizes a benchmark uses: ``smoke`` (tiny, for the test suite), ``quick`` or ``full``."""
        return "smoke" if smoke else "quick" if self.quick else "full"

    # -- output -----------------------------------------------------------------------------------------------
    def progress(self, message: str) -> None:
        """One line of progress per benchmark step, with the time since the run started."""
        elapsed = time.monotonic() - self.started_at
        print(f"[bench {elapsed:6.1f}s] {message}", file=self.out, flush=True)

    # -- servers ----------------------------------------------------------------------------------------------
    @property
    def zookeeper_hosts(self) -> str:
        """The connect string of this run's private ZooKeeper, started on first use."""
        if self._zookeeper is None:
            self.progress("starting ZooKeeper")
            self._zookeeper = ZooKeeperServer().start()
        return self._zookeeper.hosts

    def endpoint(self, emulator: str = "kinesalite") -> KinesisEndpoint:
        """A Kinesis endpoint on ``emulator`` (``kinesalite`` or ``moto``), started on first use."""
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        server = self._servers.get(emulator)
        if server is None:
            self.progress(f"starting {emulator}")
            if emulator == "kinesalite":
                server = KinesaliteServer().start()
            elif emulator == "moto":
                server = MotoSubprocessServer().start()
            else:
                raise BenchmarkError(f"unknown emulator {emulator!r}: expected kinesalite or moto")
            self._servers[emulator] = server
        return KinesisEndpoint(emulator, server.endpoint_url, real_sequence_numbers=emulator != "moto")

    def unique_app(self, what: str) -> str:
        """A fresh application name, so that each consumer run starts without checkpoints."""
        return f"{what}-{uuid.uuid4().hex[:10]}"

    def stream(self, shards: int, records: int, record_bytes: int, emulator: str = "kinesalite") -> LoadedStream:
        """A stream of ``shards`` shards holding ``records`` records of ``record_bytes`` bytes, created and filled
        on first use (partition keys ``pk-0``, ``pk-1``, ... spread the records over the shards)."""
        cache_key = (emulator, shards, records, record_bytes)
        loaded = self._streams.get(cache_key)
        if loaded is not None:
            return loaded
        endpoint = self.endpoint(emulator)
        client = endpoint.client()
        name = f"bench-{shards}x{records}-{uuid.uuid4().hex[:6]}"
        client.create_stream(StreamName=name, ShardCount=shards)
        wait_for_stream(client, name, timeout_s=60)
        rng = random.Random(shards * 1_000_003 + records)
        # ASCII letters: valid text for the peers' string decoders; the spout and the loop read raw bytes
        payloads = [bytes(rng.choices(_LETTERS, k=record_bytes)) for _ in range(records)]
        self.progress(f"loading {records:,} records of {record_bytes} B into {name} ({shards} shards, {emulator})")
        t0 = time.perf_counter()
        placed = put_records(client, name, payloads)
        put_s = time.perf_counter() - t0
        last: dict[str, str] = {}
        for shard_id, seq in placed:
            if shard_id not in last or int(seq) > int(last[shard_id]):
                last[shard_id] = seq
        shard_ids = tuple(endpoint.shard_ids(name))
        loaded = LoadedStream(endpoint, name, shards, records, record_bytes, shard_ids, last, round(put_s, 3))
        self._streams[cache_key] = loaded
        return loaded

    # -- description ------------------------------------------------------------------------------------------
    def machine(self) -> dict[str, Any]:
        """The machine the figures were measured on (cores, CPU, memory, Python)."""
        if self._machine is None:
            self._machine = describe_machine()
        return self._machine

    def versions(self) -> dict[str, str]:
        """Versions of everything that takes part: the package, Python libraries, servers, peers."""
        zk = None
        if self._zookeeper is not None:
            from kinesis_spout.testing.zookeeper import four_letter

            reply = four_letter("127.0.0.1", self._zookeeper.port, "srvr")
            zk = next((line.split(":", 1)[1].strip().split("-")[0] for line in reply.splitlines()
                       if line.startswith("Zookeeper version")), None)
        return versions(zookeeper=zk)

    def close(self) -> None:
        """Stop every server this context started. Idempotent."""
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.close()
        zk, self._zookeeper = self._zookeeper, None
        if zk is not None:
            zk.close()
        self._streams.clear()
