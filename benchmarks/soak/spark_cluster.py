"""A standalone Spark cluster for the ``readstream-executors`` path: a master and two one-core workers bound to two
loopback addresses (127.0.0.1 and 127.0.0.2), or (``readstream-executors-network``) to the addresses of nodes they
run in, each a process of its own that dies with the harness. The executor
JVMs the workers launch, and their Python workers, are what that path kills."""

from __future__ import annotations

import sys
from pathlib import Path
from types import TracebackType
from typing import Sequence

from benchmarks.soak.environment import CHECKOUT
from kinesis_spout.testing.nodes import Node
from kinesis_spout.testing.process import ServerProcess, free_port, wait_until

HOSTS = ("127.0.0.1", "127.0.0.2")
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkCluster:
    """The master and workers. The constructor does no I/O; ``start()`` starts them and waits until every worker
    registered (up to ``timeout_s``); ``close()`` stops them. Who calls: the path's thread only."""

    def __init__(self, root: Path, timeout_s: float = 180.0, master_host: str = HOSTS[0],
                 workers: Sequence[tuple[str, Node | None]] | None = None) -> None:
        """``master_host``: the master's address; ``workers``: each worker's address and the node it runs in (None:
        this machine's network, a loopback address)."""
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.root = root
        self.timeout_s = timeout_s
        self.port = free_port()
        self.master_host = master_host
        env = {"SPARK_HOME": str(self.home), "PYSPARK_PYTHON": sys.executable, "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,
               "PYTHONPATH": str(CHECKOUT), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_DEFAULT_REGION": "us-east-1"}
        spark_class = str(self.home / "bin" / "spark-class")
        self.master = ServerProcess("spark master", [spark_class, "org.apache.spark.deploy.master.Master", "--host",
                                                     master_host, "--port", str(self.port), "--webui-port", "0"],
                                    root / "master.log", env={**env, "SPARK_LOCAL_IP": master_host})
        self.workers = [ServerProcess(f"spark worker {host}",
                                      _in(node, [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", host,
                                                 "--cores", "1", "--memory", "1g", "--webui-port", "0",
                                                 "--work-dir", str(root / host), self.url]),
                                      root / f"worker-{host}.log", env={**env, "SPARK_LOCAL_IP": host})
                        for host, node in (workers if workers is not None else [(h, None) for h in HOSTS])]

    @property
    def url(self) -> str:
        return f"spark://{self.master_host}:{self.port}"

    def worker_pids(self) -> list[int]:
        """The worker daemons' pids (the executor JVMs are their children)."""
        return [w.pid for w in self.workers if w.pid is not None]

    def start(self) -> "SparkCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self.master.start()
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            def registered(worker: ServerProcess = worker) -> bool:
                return "Successfully registered with master" in worker.log_path.read_text(errors="replace")

            if not wait_until(registered, self.timeout_s):
                raise RuntimeError(f"{worker.name} did not register within {self.timeout_s:g} s:\n"
                                   f"{worker.log_tail()}")
        return self

    def close(self) -> None:
        for process in [*self.workers, self.master]:
            process.stop()

    def __enter__(self) -> "SparkCluster":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _in(node: Node | None, argv: list[str]) -> list[str]:
    return node.command(argv) if node is not None else argv
