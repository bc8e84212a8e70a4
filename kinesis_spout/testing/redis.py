"""A private Redis server on a free loopback port (Debian's ``redis-server``), for the state tests.

The binary is ``$KINESIS_SPOUT_REDIS_SERVER`` when set, else ``redis-server`` on PATH (``/usr/bin/redis-server``
from the package ``redis-server``). Persistence is off (no RDB, no AOF): the server holds test data only.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import tempfile
from pathlib import Path
from types import TracebackType

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing.process import ServerProcess, find_binary, free_port, stop_all

BINARY_ENV = "KINESIS_SPOUT_REDIS_SERVER"
INSTALL_HINT = ("install Debian's redis-server package (apt-get update && apt-get install -y redis-server; "
                "scripts/setup.sh does it), or set KINESIS_SPOUT_REDIS_SERVER to a redis-server binary")


def redis_binary() -> str | None:
    """The redis-server to run, or None when there is none."""
    return find_binary(BINARY_ENV, "redis-server")


def ping(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when a Redis server answers PING on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """A Redis server of this process. The constructor does no I/O; ``start()`` launches it and waits for PING;
    ``stop()``/``kill()`` end it (``start()`` again serves on the same port, empty); ``close()`` also removes
    its directory. Idempotent."""

    def __init__(self, port: int | None = None, start_timeout_s: float = 60.0) -> None:
        self._port = port
        self.start_timeout_s = start_timeout_s
        self._dir: Path | None = None
        self._process: ServerProcess | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("Redis server not started yet")
        return self._port

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    def start(self) -> "RedisServer":
        if self.running:
            return self
        binary = redis_binary()
        if binary is None:
            raise ServerStartError(f"Redis is not installed: no redis-server found; {INSTALL_HINT}")
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="kinesis-spout-redis-"))
        if self._port is None:
            self._port = free_port()
        argv = [binary, "--port", str(self._port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self._dir), "--protected-mode", "no", "--loglevel", "warning"]
        self._process = ServerProcess("Redis", argv, self._dir / "redis.log")
        self._process.start()
        self._process.wait_ready(lambda: ping("127.0.0.1", self.port), self.start_timeout_s)
        return self

    def client(self) -> object:
        """A redis-py client of this server (the caller closes it)."""
        import redis

        return redis.Redis.from_url(self.url)

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

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


atexit.register(stop_all)
