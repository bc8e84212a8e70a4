"""``readMode=executors`` under real faults: attempts that race, tasks SIGKILLed mid-read, speculative copies.

Every attempt of a task ``(batch, shard)`` must yield exactly the records up to the end the first attempt to
record one wrote to ZooKeeper. The faults are real: a proxy in front of kinesalite holds one task's GetRecords call
(so an attempt is caught mid-read, records in hand and no end recorded), a TCP proxy in front of ZooKeeper holds
back its answers to one Python worker (so the end is recorded but the attempt never hears it), and the attempt's
Python worker process is SIGKILLed.

- Two attempts of one unread task, both mid-read at once, on threads calling ``read_task_batch``.
- A task killed before, then one killed after it recorded its end, retried by Spark: a driver in a subprocess on
  ``local[2,4]`` (``local[2]`` never retries a task: its task failure limit is 1).
- A speculative copy of a task whose first attempt recorded its end and then stalled. Spark never speculates in
  ``local[N]`` (``TaskSchedulerImpl.start`` starts the speculation checks only when not local), and in
  ``local-cluster`` both executors are on one host, where a copy may not run (``TaskSetManager`` launches a copy
  only on a host without an attempt of the task: the task is marked speculatable and never copied). So the test
  starts a standalone cluster: a master and two one-core workers bound to 127.0.0.1 and 127.0.0.2.

The Spark drivers are this module run as a script (``python test_executor_faults.py driver ...``); each batch's
rows and the ends recorded for it are logged, and the test checks that every batch holds exactly the records
between the ends recorded for it and for the batch before, and that the batches together hold every record once.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
from kinesis_spout.kinesis.client import make_client
from kinesis_spout.positions import TRIM_HORIZON, Position
from kinesis_spout.records import parse_message_id
from kinesis_spout.spark.bookkeeping.batch_store import batch_store_for
from kinesis_spout.spark.source import WORKER_CLIENTS, ExecutorStreamReader, ShardsTask, read_task_batch
from kinesis_spout.spark.source.executor_batches import PlannedBatch, recorded_ends
from kinesis_spout.spark.source.offsets import in_range
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.http_proxy import UpstreamRequest
from kinesis_spout.testing.kinesis import KinesisEndpoint, keys_on
from kinesis_spout.testing.process import ServerProcess, free_port, wait_until
from kinesis_spout.testing.spark import quick_start_env

APP = "executor-faults"
#: JVM options of the test's Spark processes: start fast on a busy 2-core machine (no C2 JIT, a serial GC).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
HERE = Path(__file__).resolve()
CHECKOUT = str(HERE.parents[3])  # the processes this test starts import kinesis_spout from here


# -- processes behind loopback connections ---------------------------------------------------------------------------
def client_pid(client_port: int, server_port: int) -> int | None:
    """The process that holds the client end of the loopback TCP connection ``client_port`` -> ``server_port``
    (from /proc: the socket's inode, then the process with a descriptor on it)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == client_port and int(remote.rsplit(":", 1)[1], 16) == server_port:
                inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                    return int(entry)
        except OSError:
            continue
    return None


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def parent_pid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def executor_jvm(pid: int) -> int | None:
    """The Spark executor JVM a Python worker runs under (its nearest ancestor running an executor backend)."""
    current: int | None = pid
    while current and current > 1:
        if "ExecutorBackend" in cmdline(current):
            return current
        current = parent_pid(current)
    return None


def kill_python_worker(pid: int | None) -> None:
    """SIGKILL a PySpark Python worker, after checking that the process is one (never anything else)."""
    assert pid is not None and pid != os.getpid(), f"no Python worker process to kill ({pid})"
    assert "pyspark" in cmdline(pid), f"process {pid} is not a PySpark worker: {cmdline(pid)!r}"
    os.kill(pid, signal.SIGKILL)


# -- a Kinesis proxy that holds data reads ---------------------------------------------------------------------------
@dataclass
class Hold:
    """One task read of ``shard_id`` to hold until :meth:`release`. A late hold takes the read after ``skip``
    reads that returned records, and holds its reply (fetched from kinesalite when the request came); an early
    hold takes the next read of the shard and holds its request (kinesalite answers after the release)."""

    shard_id: str
    skip: int = 0
    early: bool = False
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None
    records: int = 0

    def release(self) -> None:
        self.released.set()


@dataclass(frozen=True)
class DataRead:
    """A GetRecords call of a task (not a driver probe: those ask for one record) seen by the proxy."""

    shard_id: str | None
    records: int
    pid: int | None
    executor: int | None


class HoldingProxy(FaultProxy):
    """A :class:`FaultProxy` that can also hold a task's GetRecords call of one shard (see :class:`Hold`), and
    records every task read of the shards it holds reads of, with the reading process and its executor. Holds,
    watched shards and reads are shared by the test's thread and the proxy's connection threads: under
    ``holds_lock``."""

    def __init__(self, upstream_url: str) -> None:
        super().__init__(upstream_url)
        self.holds_lock = threading.Lock()
        self._holds: list[Hold] = []
        self._watched: set[str] = set()
        self.reads: list[DataRead] = []

    def __enter__(self) -> "HoldingProxy":
        self.start()
        return self

    def hold(self, shard_id: str, skip: int = 0, *, early: bool = False) -> Hold:
        hold = Hold(shard_id, skip, early)
        with self.holds_lock:
            self._holds.append(hold)
            self._watched.add(shard_id)
        return hold

    def _take(self, shard: str | None, records: int | None) -> Hold | None:
        """The hold a read of ``shard`` meets: an early one before the call (``records`` None), a late one after."""
        with self.holds_lock:
            for hold in self._holds:
                if hold.shard_id != shard or hold.early != (records is None) or records == 0:
                    continue
                if hold.skip:
                    hold.skip -= 1
                    continue
                self._holds.remove(hold)
                return hold
        return None

    def forward(self, request: UpstreamRequest) -> tuple[int, str, list[tuple[str, str]], bytes]:
        target = dict((k.lower(), v) for k, v in request.headers).get("x-amz-target", "")
        shard = self.shard_of("GetRecords", request.body) if target == "Kinesis_20131202.GetRecords" else None
        with self.holds_lock:
            watched = shard is not None and shard in self._watched
        if not watched or json.loads(request.body or b"{}").get("Limit", 10_000) <= 1:
            return super().forward(request)
        pid = client_pid(request.client_address[1], request.proxy_address[1])
        early = self._take(shard, None)
        if early is not None:
            self._wait(early, pid, 0)
        reply = super().forward(request)
        records = len(json.loads(reply[3]).get("Records", [])) if reply[0] == 200 else 0
        with self.holds_lock:
            self.reads.append(DataRead(shard, records, pid, executor_jvm(pid) if pid else None))
        late = self._take(shard, records)
        if late is not None:
            self._wait(late, pid, records)
        return reply

    @staticmethod
    def _wait(hold: Hold, pid: int | None, records: int) -> None:
        hold.pid, hold.records = pid, records
        hold.arrived.set()
        hold.released.wait(120)

    def close(self) -> None:
        with self.holds_lock:
            holds = list(self._holds)
        for hold in holds:
            hold.release()
        super().close()


# -- a ZooKeeper proxy that can stop answering one process -----------------------------------------------------------
class FreezingProxy:
    """A loopback TCP proxy in front of ZooKeeper whose answers to one client process can be held back.

    Who calls: tests. The constructor does no I/O; ``start()`` listens and serves on daemon threads; ``close()``
    closes every connection and joins the threads (idempotent). Connections are touched under ``_lock``.
    """

    def __init__(self, upstream_hosts: str) -> None:
        host, port = upstream_hosts.split(",")[0].rsplit(":", 1)
        self.upstream = (host, int(port))
        self._lock = threading.Lock()
        self._conns: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self._threads: list[threading.Thread] = []
        self._server: socket.socket | None = None
        self.port = 0

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "FreezingProxy":
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="zookeeper-proxy")
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            thawed = threading.Event()
            thawed.set()
            with self._lock:
                self._conns.append((client, upstream, thawed))
            self._spawn(self._pump, client, upstream, None)
            self._spawn(self._pump, upstream, client, thawed)

    def _pump(self, source: socket.socket, sink: socket.socket, gate: threading.Event | None) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if gate is not None:
                    gate.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def freeze(self, pid: int) -> int:
        """Hold back every answer to the connections of process ``pid`` from now on; returns how many."""
        frozen = 0
        with self._lock:
            conns = list(self._conns)
        for client, _, thawed in conns:
            try:
                port = client.getpeername()[1]
            except OSError:
                continue
            if client_pid(port, self.port) == pid:
                thawed.clear()
                frozen += 1
        return frozen

    def thaw(self) -> None:
        """Deliver the answers held back, and every answer from now on."""
        with self._lock:
            for _, _, thawed in self._conns:
                thawed.set()

    def answered(self, pid: int) -> int:
        """How many open connections of process ``pid`` get their answers (are not frozen)."""
        with self._lock:
            conns = [(client, thawed) for client, _, thawed in self._conns if thawed.is_set()]
        count = 0
        for client, _ in conns:
            try:
                port = client.getpeername()[1]
            except OSError:
                continue
            count += client_pid(port, self.port) == pid
        return count

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for client, upstream, thawed in conns:
            thawed.set()
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        for thread in threads:
            thread.join(10)


# -- streams, drivers and their logs ---------------------------------------------------------------------------------

def put_on(endpoint: KinesisEndpoint, stream: str, shard_id: str, prefix: str, n: int) -> list[tuple[str, str]]:
    placed = endpoint.put(stream, [f"{prefix}-{i}".encode() for i in range(n)],
                          keys_on(endpoint.client(), stream, shard_id, n))
    assert {s for s, _ in placed} == {shard_id}
    return placed


@dataclass
class Driver:
    """A Spark driver (this module as a script) running one ``readMode=executors`` query until told to stop."""

    process: subprocess.Popen[bytes]
    log: Path
    stop_file: Path
    output: Path

    def batches(self) -> list[dict[str, Any]]:
        """The batches logged so far: {"batch", "rows", "ends"}, in the order they completed."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.endswith("}")]

    def ids(self) -> set[str]:
        return {mid for batch in self.batches() for mid in batch["rows"]}

    def tail(self) -> str:
        return self.output.read_text(errors="replace")[-4000:] if self.output.exists() else "(no output)"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            self.process.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            raise AssertionError(f"the driver did not stop:\n{self.tail()}") from None


@pytest.fixture
def start_driver(tmp_path: Path) -> Iterator[Any]:
    """Start drivers; any still running at the end is SIGKILLed with its process group (JVM included)."""
    started: list[Driver] = []

    def start(master: str, options: dict[str, str], zookeeper: Any, stream: str, conf: dict[str, str]) -> Driver:
        name = f"driver-{len(started)}"
        log, stop_file, output = tmp_path / f"{name}.log", tmp_path / f"{name}.stop", tmp_path / f"{name}.out"
        argv = [sys.executable, str(HERE), "driver", "--master", master, "--log", str(log),
                "--checkpoint-location", str(tmp_path / f"{name}-checkpoint"), "--stop-file", str(stop_file),
                "--zookeeper", zookeeper.hosts, "--batches", f"{zookeeper.prefix}/{APP}/{stream}/batches"]
        argv += [f"--conf={k}={v}" for k, v in conf.items()] + [f"--option={k}={v}" for k, v in options.items()]
        env = quick_start_env({**os.environ, "PYTHONPATH": CHECKOUT, "AWS_ACCESS_KEY_ID": "test",
                               "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                               "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                               "SPARK_LOCAL_IP": "127.0.0.1"})  # the quick JVM options (and class archive)
        with open(output, "wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        driver = Driver(process, log, stop_file, output)
        started.append(driver)
        return driver

    yield start
    for driver in started:
        if driver.alive():
            os.killpg(driver.process.pid, signal.SIGKILL)
            driver.process.wait(10)


def options(endpoint_url: str, zookeeper_hosts: str, zookeeper: Any, stream: str, **extra: str) -> dict[str, str]:
    return {"streamName": stream, "appName": APP, "zookeeper": zookeeper_hosts, "zookeeperPrefix": zookeeper.prefix,
            "endpointUrl": endpoint_url, "region": "us-east-1", "initialPosition": "TRIM_HORIZON",
            "checkpointIntervalS": "0", "emptyRecordBackoffS": "0.2", "readMode": "executors",
            "zookeeperSessionTimeoutS": "30",  # a frozen connection is given up after 2/3 of it: keep it long
            **extra}


def check_exact_batches(batches: list[dict[str, Any]], placed: list[tuple[str, str]]) -> None:
    """Each batch holds, for each shard, exactly the records after the end recorded for the shard's previous
    batch (the stream's start at first) up to the end recorded for it; together they hold every record once."""
    ids_of: dict[str, list[str]] = defaultdict(list)
    for shard, seq in placed:
        ids_of[shard].append(f"{shard}:{seq}")
    ends: dict[str, Position] = {}
    seen: list[str] = []
    for batch in sorted(batches, key=lambda b: b["batch"]):
        rows: dict[str, list[str]] = defaultdict(list)
        for mid in batch["rows"]:
            rows[mid.split(":")[0]].append(mid)
        assert set(rows) <= set(batch["ends"]), f"batch {batch['batch']}: rows of shards without a recorded end"
        for shard, text in batch["ends"].items():
            start = ends.get(shard, TRIM_HORIZON)
            end = Position.parse(text)
            expected = [m for m in ids_of[shard] if in_range(parse_message_id(m)[1], start, end)]
            assert sorted(rows[shard]) == sorted(expected), \
                f"batch {batch['batch']}, {shard}: rows are not the records up to the recorded end {text}"
            ends[shard] = end
        seen += batch["rows"]
    assert sorted(seen) == sorted(f"{s}:{q}" for s, q in placed), "records lost or read twice"


def ends_in(client: Any, node: str) -> dict[str, str]:
    """The ends recorded under a batch's znode (shard id -> end), from the nodes its tasks recorded (``client``: a
    kazoo client)."""
    ends: dict[str, str] = {}
    for name in client.get_children(node):
        ends.update({s: e.end.encode() for s, e in recorded_ends(name, client.get(f"{node}/{name}")[0], node).items()})
    return ends


def batch_nodes(client: Any, zookeeper: Any, stream: str, shard_id: str) -> set[str]:
    """The batch znodes (``<query>/<batch>``) that hold an end of ``shard_id`` (``client``: a kazoo client)."""
    base = f"{zookeeper.prefix}/{APP}/{stream}/batches"
    if not client.exists(base):
        return set()
    out = set()
    for query in client.get_children(base):
        for batch in client.get_children(f"{base}/{query}"):
            if shard_id in ends_in(client, f"{base}/{query}/{batch}"):
                out.add(f"{query}/{batch}")
    return out


# -- two attempts at once, without Spark -----------------------------------------------------------------------------
@pytest.mark.parametrize("first", ["longer", "shorter"])
def test_two_attempts_mid_read_at_once_yield_the_end_recorded_first(kinesalite: KinesisEndpoint, zookeeper: Any,
                                                                    first: str) -> None:
    """Attempts S and L of one unread task are both mid-read (their GetRecords replies held), S with 20 records
    in hand and L with 30 (10 arrived in between), and neither recorded an end. The one released first records
    its end; the other finds it and yields exactly the same records: L trims in memory, S reads on to L's end."""
    stream = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(stream, [f"race-{i}".encode() for i in range(20)])
    shard = placed[0][0]
    opts = options(kinesalite.endpoint_url, zookeeper.hosts, zookeeper, stream)
    reader = ExecutorStreamReader(opts)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(1000))
    [task] = reader.partitions(start, end)
    assert isinstance(task, ShardsTask)
    results: dict[str, list[str]] = {}
    with HoldingProxy(kinesalite.endpoint_url) as short_proxy, HoldingProxy(kinesalite.endpoint_url) as long_proxy:
        holds, threads, stores = {}, {}, []
        for name, proxy in (("S", short_proxy), ("L", long_proxy)):
            holds[name] = proxy.hold(shard)
            store = ZooKeeperCheckpointStore.from_config(reader.config)  # each attempt: a process of its own
            store.open()
            stores.append(store)
            client = make_client("us-east-1", proxy.endpoint_url)

            def attempt(name: str = name, client: Any = client, store: Any = store) -> None:
                records = read_task_batch(client, batch_store_for(store), reader.config, task)
                results[name] = [r.message_id for r in records]

            threads[name] = threading.Thread(target=attempt, name=f"attempt-{name}")
            threads[name].start()
            assert holds[name].arrived.wait(30), f"attempt {name} did not read"
            if name == "S":
                placed += kinesalite.put(stream, [f"late-{i}".encode() for i in range(10)])
        assert (holds["S"].records, holds["L"].records) == (20, 30)
        batches = batch_store_for(WORKER_CLIENTS.checkpoints(reader.config))
        assert batches.batch_end(PlannedBatch.parse(end).query, 0, task.node) is None  # both mid-read
        order = ["L", "S"] if first == "longer" else ["S", "L"]
        for name in order:
            holds[name].release()
            threads[name].join(30)
            assert not threads[name].is_alive()
        reads = {"S": short_proxy.reads, "L": long_proxy.reads}
    for store in stores:
        store.close()
    winner = placed[:30] if first == "longer" else placed[:20]
    assert results["S"] == results["L"] == [f"{s}:{q}" for s, q in winner]
    if first == "longer":  # S recorded nothing of its own: it read on from Kinesis up to L's end
        assert sum(r.records for r in reads["S"]) > 20
    else:  # L cut its buffer to S's end without reading again
        assert [r.records for r in reads["L"]] == [30]
    reader.stop()


# -- a retried task, on Spark ----------------------------------------------------------------------------------------
@pytest.mark.crash
def test_a_task_killed_mid_read_before_or_after_recording_its_end_is_retried_with_the_recorded_rows(
        kinesalite: KinesisEndpoint, zookeeper: Any, start_driver: Any) -> None:
    stream = kinesalite.create_stream(shards=2)
    a, b = kinesalite.shard_ids(stream)
    placed = put_on(kinesalite, stream, a, "early", 40) + put_on(kinesalite, stream, b, "other", 10)
    zk = zookeeper.client()
    with HoldingProxy(kinesalite.endpoint_url) as proxy, FreezingProxy(zookeeper.hosts) as zk_proxy:
        # killed before recording: a's task, at its second GetRecords call (10 records in hand)
        before = proxy.hold(a, skip=1)
        driver = start_driver("local[2,4]", options(proxy.endpoint_url, zk_proxy.hosts, zookeeper, stream,
                                                    maxRecordsPerCall="10"), zookeeper, stream, {})
        try:
            assert before.arrived.wait(180), driver.tail()
            assert not batch_nodes(zk, zookeeper, stream, a)
            kill_python_worker(before.pid)
            before.release()
            assert wait_until(lambda: len(driver.ids()) >= 50 or not driver.alive(), 120), driver.tail()
            # killed after recording: a's next task with records reads them; ZooKeeper records its end but its
            # answer never reaches the task, whose worker is killed; records that arrive meanwhile are not in it
            after = proxy.hold(a)
            placed += put_on(kinesalite, stream, a, "middle", 5)
            assert after.arrived.wait(60), driver.tail()
            assert zk_proxy.freeze(after.pid) >= 1  # type: ignore[arg-type]
            known = batch_nodes(zk, zookeeper, stream, a)
            late = put_on(kinesalite, stream, a, "late", 7)
            placed += late
            # the driver made the batch's node before its tasks ran, so a's end is one create (with the batch's
            # node to make, the create would wait for ZooKeeper's answer that the node is missing, and record
            # nothing); b has nothing new: no task, no end in this batch
            after.release()
            assert wait_until(lambda: bool(batch_nodes(zk, zookeeper, stream, a) - known), 30)
            [killed_batch] = batch_nodes(zk, zookeeper, stream, a) - known
            kill_python_worker(after.pid)
            assert wait_until(lambda: len(driver.ids()) >= len(placed) or not driver.alive(), 120), driver.tail()
        finally:
            driver.stop()
    batches = driver.batches()
    check_exact_batches(batches, placed)
    late_ids = {f"{s}:{q}" for s, q in late}
    killed = next(b for b in batches if b["batch"] == int(killed_batch.split("/")[1]))
    assert killed["rows"] and not late_ids & set(killed["rows"]), "the retry read past the recorded end"
    readers = {r.pid for r in proxy.reads if r.shard_id == a and r.records}
    assert {before.pid, after.pid} < readers, "the killed tasks were not retried by other worker processes"


# -- a speculative copy, on a standalone cluster ---------------------------------------------------------------------
@dataclass
class SparkCluster:
    master_url: str
    processes: list[ServerProcess]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone Spark cluster: a master and two one-core workers on two loopback hosts (127.0.0.1 and
    127.0.0.2), so that Spark may run a task's speculative copy on the other "host"."""
    import pyspark

    home = Path(pyspark.__file__).parent
    root = tmp_path_factory.mktemp("spark-cluster")
    port = free_port()
    base_env = {"SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable,
                "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM, "PYTHONPATH": CHECKOUT,  # the executors run this checkout's code
                "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    spark_class = str(home / "bin" / "spark-class")
    master = ServerProcess("spark master", [spark_class, "org.apache.spark.deploy.master.Master", "--host",
                                            "127.0.0.1", "--port", str(port), "--webui-port", "0"],
                           root / "master.log", env={**base_env, "SPARK_LOCAL_IP": "127.0.0.1"})
    workers = [ServerProcess(f"spark worker {host}",
                             [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1",
                              "--memory", "1g", "--webui-port", "0", "--work-dir", str(root / host),
                              f"spark://127.0.0.1:{port}"],
                             root / f"worker-{host}.log", env={**base_env, "SPARK_LOCAL_IP": host})
               for host in ("127.0.0.1", "127.0.0.2")]
    processes = [master, *workers]
    try:
        master.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready(functools.partial(registered, worker.log_path), 120)
        yield SparkCluster(f"spark://127.0.0.1:{port}", processes)
    finally:
        for process in reversed(processes):
            process.stop()


def registered(log: Path) -> bool:
    """Whether a Spark worker's log says it registered with the master."""
    return "Successfully registered with master" in log.read_text(errors="replace")


SPECULATION = {"spark.speculation": "true", "spark.speculation.interval": "100ms",
               "spark.speculation.quantile": "0.5", "spark.speculation.multiplier": "1.5",
               "spark.speculation.minTaskRuntime": "100ms", "spark.speculation.efficiency.enabled": "false",
               "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
               "spark.executorEnv.AWS_ACCESS_KEY_ID": "test", "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "test",
               "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


@pytest.mark.slow
def test_a_speculative_copy_on_another_executor_yields_the_rows_its_slow_original_recorded(
        spark_cluster: SparkCluster, kinesalite: KinesisEndpoint, zookeeper: Any, start_driver: Any) -> None:
    """Under the default readMode (auto: the executors, on a cluster), the first attempt of a's task reads 30 records
    and records its end, but ZooKeeper's answer never reaches it:
    it is slow. Spark runs a copy on the other executor, whose read is let through only once that end is
    recorded; 5 more records arrived before, yet the copy, which completes the batch, yields exactly the 30."""
    stream = kinesalite.create_stream(shards=2)
    a, b = kinesalite.shard_ids(stream)
    placed = put_on(kinesalite, stream, a, "slow", 30) + put_on(kinesalite, stream, b, "quick", 10)
    zk = zookeeper.client()
    with HoldingProxy(kinesalite.endpoint_url) as proxy, FreezingProxy(zookeeper.hosts) as zk_proxy:
        slow = proxy.hold(a)  # the first read of a: its reply is held
        copy = proxy.hold(a, 1, early=True)  # the second: its request is held (the first attempt reads no more)
        # a task per shard: b's task records its end while a's first attempt is held
        on_cluster = options(proxy.endpoint_url, zk_proxy.hosts, zookeeper, stream, shardsPerTask="1")
        del on_cluster["readMode"]  # the default, auto, reads on the executors of a cluster
        driver = start_driver(spark_cluster.master_url, on_cluster, zookeeper, stream, SPECULATION)
        try:
            assert slow.arrived.wait(240), driver.tail()
            original = executor_jvm(slow.pid)  # type: ignore[arg-type]
            assert zk_proxy.freeze(slow.pid) >= 1  # type: ignore[arg-type]
            placed += put_on(kinesalite, stream, a, "meanwhile", 5)
            # b records first: then a's end is one create (see the test above)
            assert wait_until(lambda: bool(batch_nodes(zk, zookeeper, stream, b)), 60), driver.tail()
            slow.release()
            assert wait_until(lambda: bool(batch_nodes(zk, zookeeper, stream, a)), 30)  # by the first attempt: the
            copy.release()  # other one waits for its first GetRecords call
            # the batch completes while its first attempt on a still waits for ZooKeeper: the copy completed it
            assert wait_until(lambda: driver.batches() or not driver.alive(), 120), driver.tail()
            assert not zk_proxy.answered(slow.pid), "the first attempt reconnected to ZooKeeper"  # type: ignore[arg-type]
            zk_proxy.thaw()
            assert wait_until(lambda: len(driver.ids()) >= len(placed) or not driver.alive(), 120), driver.tail()
        finally:
            driver.stop()
    batches = driver.batches()
    check_exact_batches(batches, placed)
    first = min(batches, key=lambda batch: batch["batch"])
    assert sum(1 for mid in first["rows"] if mid.startswith(a + ":")) == 30, \
        "the copy did not stop at the end its original recorded"
    assert copy.arrived.is_set() and copy.pid not in (None, slow.pid)
    [copy_executor] = {r.executor for r in proxy.reads if r.pid == copy.pid}
    assert original is not None and copy_executor not in (None, original), "the copy did not run on the other executor"


# -- the driver (this module as a script) ----------------------------------------------------------------------------
def driver_main(argv: list[str]) -> int:
    """Run one query reading on the executors (``readMode=executors``, or ``auto`` on a cluster) with foreachBatch until
    the stop file appears; log each batch."""
    p = argparse.ArgumentParser(prog="test_executor_faults.py driver")
    p.add_argument("--master", required=True)
    p.add_argument("--conf", action="append", default=[])
    p.add_argument("--option", action="append", default=[])
    p.add_argument("--log", required=True)
    p.add_argument("--checkpoint-location", required=True)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--batches", required=True, help="the stream's batches znode")
    args = p.parse_args(argv)

    from kazoo.client import KazooClient
    from pyspark.sql import SparkSession

    from kinesis_spout.spark import register

    builder = (SparkSession.builder.master(args.master).appName("executor-faults")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for item in args.conf:
        key, value = item.split("=", 1)
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)  # records the master: readMode=auto reads on the executors of a cluster
    zk = KazooClient(hosts=args.zookeeper)
    zk.start(15)
    log = open(args.log, "a")  # noqa: SIM115 - open for the life of the process

    def sink(df: Any, batch_id: int) -> None:
        rows = [r.message_id for r in df.select("message_id").collect()]
        ends: dict[str, str] = {}
        for query in zk.get_children(args.batches):
            node = f"{args.batches}/{query}/{batch_id}"
            if zk.exists(node):
                ends = ends_in(zk, node)
        log.write(json.dumps({"batch": batch_id, "rows": rows, "ends": ends}) + "\n")
        log.flush()

    source_options = dict(item.split("=", 1) for item in args.option)
    query = (spark.readStream.format("kinesis_spout").options(**source_options).load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", args.checkpoint_location).start())
    while not Path(args.stop_file).exists():
        if query.awaitTermination(1):  # raises when the query failed
            break
    query.stop()
    zk.stop()
    log.close()
    spark.stop()
    return 0


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "driver":
    sys.exit(driver_main(sys.argv[2:]))
