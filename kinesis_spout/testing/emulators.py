"""Kinesis emulators from npm with real sequence numbers: kinesalite and kinesis-local (kinesis-mock).

Where they are looked up, first match wins (see :func:`node_modules_candidates`):

1. ``$KINESIS_SPOUT_NODE_MODULES``: a ``node_modules`` folder of your own; when it is set, it is the only place
   looked at, so a wrong path is an error rather than a silent fallback;
2. the source tree's ``emulators/node_modules`` (what ``make setup`` installs);
3. the user cache, ``$XDG_CACHE_HOME/kinesis-spout/emulators/node_modules`` (``~/.cache/...``), where
   ``kinesis-spout install-emulators`` puts them for a pip-installed package.

A server given ``node_modules=`` explicitly uses that folder alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Sequence, TypeVar
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing.process import ServerProcess, free_port

NODE_MODULES_ENV = "KINESIS_SPOUT_NODE_MODULES"
#: The npm packages and the versions the fixtures are tested with.
EMULATOR_PACKAGES = {"kinesalite": "3.3.3", "kinesis-local": "0.6.2"}
INSTALL_HINT = (f"run `kinesis-spout install-emulators` (npm, into the user cache), `make setup` in a source "
                f"checkout, or set {NODE_MODULES_ENV} to a node_modules folder that has them")
_SOURCE_TREE = Path(__file__).resolve().parents[2] / "emulators" / "node_modules"


def user_cache_dir() -> Path:
    """The package's user cache: ``$XDG_CACHE_HOME/kinesis-spout``, else ``~/.cache/kinesis-spout``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kinesis-spout"


def user_node_modules() -> Path:
    """Where ``kinesis-spout install-emulators`` installs the emulators."""
    return user_cache_dir() / "emulators" / "node_modules"


def node_modules_candidates() -> list[tuple[str, Path]]:
    """The folders searched for the emulators, in order, each with a label saying where it comes from.

    Pure apart from reading the environment: nothing is checked on disk.
    """
    env = os.environ.get(NODE_MODULES_ENV)
    if env:
        return [(f"${NODE_MODULES_ENV}", Path(env).expanduser())]
    return [("source tree", _SOURCE_TREE), ("user cache", user_node_modules())]


def find_package(package: str) -> Path:
    """The folder of an installed emulator package (``.../node_modules/<package>``), first candidate that has it.

    Raises :class:`ServerStartError` listing every place looked at and how to install it.
    """
    candidates = node_modules_candidates()
    for _label, folder in candidates:
        if (folder / package).is_dir():
            return folder / package
    looked = "; ".join(f"{folder / package} ({label})" for label, folder in candidates)
    raise ServerStartError(f"{package} is not installed: looked at {looked}; {INSTALL_HINT}")


def default_node_modules(package: str = "kinesalite") -> Path:
    """The ``node_modules`` folder that holds ``package``, else the first place that would be searched."""
    try:
        return find_package(package).parent
    except ServerStartError:
        return node_modules_candidates()[0][1]


def install_emulators(target: Path | None = None, *, npm: str = "npm", timeout_s: float = 600.0) -> Path:
    """Install the emulators with npm into ``target``'s parent (default: :func:`user_node_modules`).

    Runs ``npm install --prefix <parent> kinesalite@3.3.3 kinesis-local@0.6.2``; returns the ``node_modules``
    folder. Raises :class:`ServerStartError` when npm is missing or fails (with its output's tail).
    """
    node_modules = target or user_node_modules()
    prefix = node_modules.parent
    executable = shutil.which(npm)
    if executable is None:
        raise ServerStartError(f"{npm} is not on PATH: the emulators are npm packages; install Node.js 18+ with "
                               f"npm (Debian: apt-get install -y nodejs npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}@{version}" for name, version in EMULATOR_PACKAGES.items()]
    argv = [executable, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
            "--loglevel=error", *specs]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ServerStartError(f"npm install did not finish within {timeout_s:g} s: {' '.join(argv)}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise ServerStartError(f"npm install failed with code {done.returncode}: {' '.join(argv)}\n{tail}")
    return node_modules


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
                 start_timeout_s: float = 120.0, *, host: str = "127.0.0.1",
                 command_prefix: Sequence[str] = ()) -> None:
        self.node_modules = node_modules  # None: looked up at start() (see the module's docstring)
        self.host = host  # the address clients reach it at: a node's (kinesis_spout.testing.nodes)
        self.command_prefix = list(command_prefix)  # e.g. ``ip netns exec NODE``: run it inside a node
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
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    @property
    def pid(self) -> int | None:
        """The emulator's process id (None when not started): for tests that kill it as a crash would."""
        return self._process.pid if self._process is not None else None

    @property
    def argv(self) -> list[str]:
        """The command the emulator was started with (empty when not started)."""
        return list(self._process.argv) if self._process is not None else []

    def _argv_env(self, package_dir: Path) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def start(self: _E) -> _E:
        if self.running:
            return self
        if self.node_modules is None:
            package_dir = find_package(self.package)
        else:
            package_dir = self.node_modules / self.package
            if not package_dir.is_dir():
                raise ServerStartError(f"{self.name} is not installed: {package_dir} is missing; {INSTALL_HINT}")
        if shutil.which("node") is None:
            raise ServerStartError(f"node is not on PATH: {self.name} needs Node.js 18 or later")
        if self._port is None:
            self._port = free_port()
        self._workdir = Path(tempfile.mkdtemp(prefix=f"kinesis-spout-{self.package}-"))
        argv, env = self._argv_env(package_dir)
        argv = [*self.command_prefix, *argv]
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

    def __init__(self, node_modules: Path | None = None, port: int | None = None, start_timeout_s: float = 120.0,
                 *, host: str = "127.0.0.1", command_prefix: Sequence[str] = (), shard_limit: int = 1000) -> None:
        super().__init__(node_modules, port, start_timeout_s, host=host, command_prefix=command_prefix)
        self.shard_limit = shard_limit  # kinesalite's --shardLimit: the most shards its streams may have in all

    def _argv_env(self, package_dir: Path) -> tuple[list[str], dict[str, str]]:
        # the guard keeps a client killed mid-request from ending the server (see kinesalite_guard.js)
        argv = ["node", "-r", str(Path(__file__).with_name("kinesalite_guard.js")), str(package_dir / "cli.js"),
                "--port", str(self.port),
                "--createStreamMs", "5", "--deleteStreamMs", "5", "--updateStreamMs", "5",
                "--shardLimit", str(self.shard_limit)]
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
