"""Kinesis emulators from npm with real sequence numbers: kinesalite and kinesis-local (kinesis-mock).

They are installed into the project's ``emulators/node_modules`` by ``make setup``; point ``node_modules`` (or the
environment variable ``KINESIS_SPOUT_NODE_MODULES``) elsewhere to use another installation.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TypeVar
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing.process import ServerProcess, free_port

INSTALL_HINT = "run `make setup` (npm install --prefix emulators) or set KINESIS_SPOUT_NODE_MODULES"


def default_node_modules() -> Path:
    """Where the emulators are installed: $KINESIS_SPOUT_NODE_MODULES, else the source tree's emulators folder."""
    env = os.environ.get("KINESIS_SPOUT_NODE_MODULES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "emulators" / "node_modules"


def http_answers(url: str) -> bool:
    """True when something answers HTTP at ``url`` (any status)."""
    try:
        with urlopen(Request(url, method="GET"), timeout=1.0):
            return True
    except HTTPError:
        return True
    except (URLError, OSError):
        return False


_E = TypeVar("_E", bound="_NodeEmulator")


class _NodeEmulator:
    """A Kinesis emulator run with node on a free loopback port. Constructor does no I/O; close() is idempotent."""

    name = "emulator"
    package = ""

    def __init__(self, node_modules: Path | None = None, port: int | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.node_modules = node_modules or default_node_modules()
        self._port = port
        self.start_timeout_s = start_timeout_s
        self._workdir: Path | None = None
        self._process: ServerProcess | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError(f"{self.name} not started yet")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def _argv_env(self, package_dir: Path) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def start(self: _E) -> _E:
        if self.running:
            return self
        package_dir = self.node_modules / self.package
        if not package_dir.is_dir():
            raise ServerStartError(f"{self.name} is not installed: {package_dir} is missing; {INSTALL_HINT}")
        if shutil.which("node") is None:
            raise ServerStartError(f"node is not on PATH: {self.name} needs Node.js 18 or later")
        if self._port is None:
            self._port = free_port()
        self._workdir = Path(tempfile.mkdtemp(prefix=f"kinesis-spout-{self.package}-"))
        argv, env = self._argv_env(package_dir)
        self._process = ServerProcess(self.name, argv, self._workdir / "server.log", env=env, cwd=self._workdir)
        self._process.start()
        self._process.wait_ready(lambda: http_answers(self.endpoint_url), self.start_timeout_s)
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()  # kinesis-local ignores SIGTERM; both keep state in memory only

    def close(self) -> None:
        self.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def log_tail(self, lines: int = 30) -> str:
        return self._process.log_tail(lines) if self._process else "(not started)"

    def __enter__(self: _E) -> _E:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class KinesaliteServer(_NodeEmulator):
    """kinesalite 3.3: real 56-digit sequence numbers, correct split/merge, closed shards end; in memory."""

    name = "kinesalite"
    package = "kinesalite"

    def _argv_env(self, package_dir: Path) -> tuple[list[str], dict[str, str]]:
        argv = ["node", str(package_dir / "cli.js"), "--port", str(self.port),
                "--createStreamMs", "5", "--deleteStreamMs", "5", "--updateStreamMs", "5", "--shardLimit", "1000"]
        return argv, {}


class KinesisLocalServer(_NodeEmulator):
    """kinesis-local 0.6 (the kinesis-mock engine LocalStack uses): the most faithful emulator, ~1k puts/s."""

    name = "kinesis-local"
    package = "kinesis-local"

    def _argv_env(self, package_dir: Path) -> tuple[list[str], dict[str, str]]:
        env = {
            "KINESIS_MOCK_PLAIN_PORT": str(self.port),
            "KINESIS_MOCK_TLS_PORT": str(free_port()),
            "KINESIS_MOCK_CERT_PATH": str(package_dir / "server.json"),
            "CREATE_STREAM_DURATION": "5ms", "DELETE_STREAM_DURATION": "5ms",
            "MERGE_SHARDS_DURATION": "5ms", "SPLIT_SHARD_DURATION": "5ms", "UPDATE_SHARD_COUNT_DURATION": "5ms",
            "SHARD_LIMIT": "1000", "LOG_LEVEL": "WARN",
        }
        return ["node", str(package_dir / "main.js")], env
