"""A Spark standalone cluster on the node harness (:mod:`kinesis_spout.testing.nodes`) for the Spark scale run:
ZooKeeper, kinesalite (``--shardLimit`` the stream's shards, its requests counted by ``count_requests.js``), Spark's
master and three one-core workers, each on a node of its own. A worker's executor and the executor's Python workers
are its children, so they run inside the worker's namespace, bound to its address (``SPARK_LOCAL_IP``). The driver
is this process (PySpark), reached by the executors at the host's address on the nodes' bridge.

Who calls: :mod:`benchmarks.scale.spark`. The constructor does no I/O; ``start()`` starts everything and returns
the driver's SparkSession; ``close()`` stops the session, the servers and the network (idempotent). Where network
namespaces cannot be made, the nodes are loopback addresses (``network.reason`` says why) and no link can be cut.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.machine import ROOT
from benchmarks.scale.cluster import start_servers
from kinesis_spout.testing.emulators import KinesaliteServer
from kinesis_spout.testing.kinesis import wait_for_stream
from kinesis_spout.testing.nodes import Node, NodeNetwork, NodeProcess
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zookeeper import ZooKeeperServer

PREFIX = "/kinesis-spout-scale-spark"
MASTER_PORT = 7077
WORKERS = 3
#: the cluster's daemons live for the run: the client JIT only and a serial collector keep their start cheap; a
#: worker heartbeats the master every 5 s and is dropped after 20 s without one (Spark: 15 s and 60 s), set on both
#: sides (a worker derives its heartbeat interval from the same setting)
DAEMON_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dspark.worker.timeout=20"
#: how quickly a lost executor is noticed: heartbeats every 2 s, lost after 20 s without one (Spark: 10 s and 120 s)
LOSS_CONF = {"spark.executor.heartbeatInterval": "2s", "spark.network.timeout": "20s",
             "spark.network.timeoutInterval": "2s"}


class SparkNodes:
    """The nodes of one Spark scale run (see the module docstring)."""

    def __init__(self, *, shards: int, workers: int = WORKERS) -> None:
        self.shards = shards
        self.worker_count = workers
        self.network = NodeNetwork()
        self.directory = Path(tempfile.mkdtemp(prefix="kinesis-spout-scale-spark-"))
        self.counts_file = self.directory / "kinesalite-requests.json"
        self.stream = f"scale-spark-{uuid.uuid4().hex[:8]}"
        self.zookeeper: ZooKeeperServer | None = None
        self.kinesalite: KinesaliteServer | None = None
        self.master: NodeProcess | None = None
        self.workers: dict[str, tuple[Node, NodeProcess]] = {}
        self.spark: Any = None
        self._closed = False

    @property
    def isolated(self) -> bool:
        return self.network.can_cut_links

    @property
    def master_url(self) -> str:
        return f"spark://{self.network.nodes['spark-master'].address}:{MASTER_PORT}"

    def describe(self) -> str:
        if self.isolated:
            return (f"network namespaces on {self.network.subnet} (bridge {self.network.host_address}): "
                    + ", ".join(f"{n.name} {n.address}" for n in self.network.nodes.values())
                    + f"; the driver on the host ({self.network.host_address})")
        return f"loopback addresses ({self.network.reason})"

    def _spark_env(self, address: str) -> dict[str, str]:
        import pyspark

        return {"SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": address, "SPARK_DAEMON_JAVA_OPTS": DAEMON_JVM,
                "SPARK_DAEMON_MEMORY": "256m", "PYTHONPATH": str(ROOT),
                "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}

    def start(self, log: Any = print) -> Any:
        """Start the servers, the cluster and the driver; make the stream. Returns the SparkSession."""
        import pyspark

        self.network.start()
        self.zookeeper, self.kinesalite, client = start_servers(self.network, self.counts_file, self.stream,
                                                                self.shards)
        spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        master = self.network.add_node("spark-master")
        self.master = master.run([spark_class, "org.apache.spark.deploy.master.Master", "--host", master.address,
                                  "--port", str(MASTER_PORT), "--webui-port", "0"],
                                 log=self.directory / "master.log", env=self._spark_env(master.address))
        for i in range(1, self.worker_count + 1):
            node = self.network.add_node(f"spark-worker-{i}")
            process = node.run([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", node.address,
                                "--cores", "1", "--memory", "1g", "--webui-port", "0",
                                "--work-dir", str(self.directory / node.name), self.master_url],
                               log=self.directory / f"{node.name}.log", env=self._spark_env(node.address))
            self.workers[node.name] = (node, process)
        for name, (_, process) in self.workers.items():
            up = functools.partial(self._up, name, process)
            if not wait_until(up, 180, interval_s=0.5) or not process.running:
                raise RuntimeError(f"{name} did not register with the master: {self.log_tail(name)}")
        wait_for_stream(client, self.stream, timeout_s=900)
        log(f"cluster up: {self.describe()}")
        self.spark = self._driver()
        return self.spark

    def _up(self, name: str, process: NodeProcess) -> bool:
        """Worker ``name`` registered with the master, or ended."""
        path = self.directory / f"{name}.log"
        registered = path.exists() and "Successfully registered with master" in path.read_text(errors="replace")
        return registered or not process.running

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self.directory / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def _driver(self) -> Any:
        """The driver's SparkSession in this process: its JVM binds the host's bridge address, which the nodes
        reach; one one-core executor on each worker."""
        from pyspark.sql import SparkSession

        host = self.network.host_address
        os.environ.update({k: v for k, v in self._spark_env(host).items()
                           if k not in ("SPARK_DAEMON_JAVA_OPTS", "SPARK_DAEMON_MEMORY")})
        builder = (SparkSession.builder.master(self.master_url).appName("kinesis-spout-scale-spark")
                   .config("spark.driver.host", host).config("spark.driver.bindAddress", host)
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", str(self.worker_count))
                   .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
                   .config("spark.cores.max", str(self.worker_count))
                   .config("spark.executor.extraJavaOptions", "-XX:+UseSerialGC")
                   .config("spark.executorEnv.AWS_ACCESS_KEY_ID", "test")
                   .config("spark.executorEnv.AWS_SECRET_ACCESS_KEY", "test")
                   .config("spark.executorEnv.PYTHONPATH", str(ROOT))
                   .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
        for key, value in LOSS_CONF.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        deadline = time.monotonic() + 180
        while len(self.executor_hosts(spark)) < self.worker_count:  # every executor registered with the driver
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(self.executor_hosts(spark))} of {self.worker_count} executors registered "
                                   f"in 180 s")
            time.sleep(0.5)
        return spark

    @staticmethod
    def executor_hosts(spark: Any) -> list[str]:
        """The hosts of the executors the driver knows now (the driver's own block manager left out)."""
        infos = spark._jsc.sc().statusTracker().getExecutorInfos()
        hosts = [str(info.host()) for info in infos]
        driver = spark.conf.get("spark.driver.host")
        return [h for h in hosts if h != driver]

    def worker_pids(self) -> list[int]:
        """The pids of the worker JVMs (their executors and Python workers are their descendants)."""
        return [process.pid for _, process in self.workers.values()]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception:  # noqa: BLE001 - a cut cluster may fail the stop; the network goes anyway
                pass
        for _, process in self.workers.values():
            process.stop(5)
        if self.master is not None:
            self.master.stop(5)
        for server in (self.kinesalite, self.zookeeper):
            if server is not None:
                server.close()
        self.network.close()
        shutil.rmtree(self.directory, ignore_errors=True)
