"""A private memcached server on a free loopback port (Debian's ``memcached``), for the state tests.

The binary is ``$KINESIS_SPOUT_MEMCACHED`` when set, else ``memcached`` on PATH (``/usr/bin/memcached`` from the
package ``memcached``). TCP only, 64 MB; run as the current user (``-u`` is passed when that is root).
"""

from __future__ import annotations

import atexit
import getpass
import os
import shutil
import socket
import tempfile
from pathlib import Path
from types import TracebackType

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing.process import ServerProcess, find_binary, free_port, stop_all

BINARY_ENV = "KINESIS_SPOUT_MEMCACHED"
INSTALL_HINT = ("install Debian's memcached package (apt-get update && apt-get install -y memcached; "
                "scripts/setup.sh does it), or set KINESIS_SPOUT_MEMCACHED to a memcached binary")


def memcached_binary() -> str | None:
    """The memcached to run, or None when there is none."""
    return find_binary(BINARY_ENV, "memcached")


def version(host: str, port: int, timeout_s: float = 1.0) -> str:
    """The server's ``version`` reply ('' when it does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"version\r\n")
            return sock.recv(128).decode(errors="replace")
    except OSError:
        return ""


class MemcachedServer:
    """A memcached server of this process (same life cycle as :class:`~kinesis_spout.testing.redis.RedisServer`).
    ``server`` is the ``host:port`` the state backend takes."""

    def __init__(self, port: int | None = None, memory_mb: int = 64, start_timeout_s: float = 60.0) -> None:
        self._port = port
        self.memory_mb = memory_mb
        self.start_timeout_s = start_timeout_s
        self._dir: Path | None = None
        self._process: ServerProcess | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("memcached server not started yet")
        return self._port

    @property
    def server(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def start(self) -> "MemcachedServer":
        if self.running:
            return self
        binary = memcached_binary()
        if binary is None:
            raise ServerStartError(f"memcached is not installed: no memcached binary found; {INSTALL_HINT}")
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="kinesis-spout-memcached-"))
        if self._port is None:
            self._port = free_port()
        argv = [binary, "-l", "127.0.0.1", "-p", str(self._port), "-U", "0", "-m", str(self.memory_mb), "-t", "2"]
        if os.geteuid() == 0:
            argv += ["-u", getpass.getuser()]
        self._process = ServerProcess("memcached", argv, self._dir / "memcached.log")
        self._process.start()
        self._process.wait_ready(lambda: version("127.0.0.1", self.port).startswith("VERSION"),
                                 self.start_timeout_s)
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()

    def close(self) -> None:
        self.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def log_tail(self, lines: int = 30) -> str:
        return self._process.log_tail(lines) if self._process else "(not started)"

    def __enter__(self) -> "MemcachedServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


atexit.register(stop_all)
