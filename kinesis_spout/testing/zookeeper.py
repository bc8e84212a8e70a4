"""A private ZooKeeper server on a free loopback port.

The server jar is ``$KINESIS_SPOUT_ZOOKEEPER_JAR`` when set, else Debian's ``/usr/share/java/zookeeper.jar``
(package ``zookeeper``). A jar whose manifest does not name its dependencies (the ``lib/zookeeper-3.8.*.jar`` of
Apache's binary tarball) runs with the jars beside it on the class path.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import zipfile
from pathlib import Path
from types import TracebackType
from typing import Sequence

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing.process import ServerProcess, free_port, stop_all
from kinesis_spout.testing.tls import TlsFiles, make_tls_files

JAR_ENV = "KINESIS_SPOUT_ZOOKEEPER_JAR"
DEFAULT_JAR = Path("/usr/share/java/zookeeper.jar")
INSTALL_HINT = ("install Debian's zookeeper package (apt-get update && apt-get install -y zookeeper), or set "
                f"{JAR_ENV} to the server jar of a ZooKeeper 3.8 binary release (its lib/zookeeper-3.8.*.jar)")


def default_jar() -> Path:
    """The ZooKeeper server jar: ``$KINESIS_SPOUT_ZOOKEEPER_JAR`` when set, else Debian's. Checks nothing on disk."""
    env = os.environ.get(JAR_ENV)
    return Path(env).expanduser() if env else DEFAULT_JAR


def _manifest_names_dependencies(jar: Path) -> bool:
    """True when the jar's manifest has a ``Class-Path`` (Debian's does; Apache's release jar does not)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode(errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    return any(line.startswith("Class-Path:") for line in manifest.splitlines())


def check_runtime(jar: Path) -> None:
    """Raise ``ServerStartError`` saying what to install when the server ``jar`` or ``java`` is missing."""
    if not jar.exists():
        raise ServerStartError(f"ZooKeeper is not installed: {jar} is missing; {INSTALL_HINT}")
    if shutil.which("java") is None:
        raise ServerStartError("java is not on PATH: ZooKeeper needs a Java runtime (17 works)")


def server_classpath(jar: Path, tls: bool = False) -> str:
    """The server ``jar`` and its dependencies (named by its manifest, else the jars beside it: Apache's release
    layout) plus a simple slf4j binding for a readable log (Debian's; a release's lib folder has logback); with
    ``tls``, the Netty jars its connection factory needs that Debian's manifest does not name. Every server the
    library starts (one, or an ensemble's) runs on it."""
    if not _manifest_names_dependencies(jar):
        return ":".join([str(jar), str(jar.parent / "*")])
    extra = [jar.parent / "slf4j-simple.jar"]
    if tls:
        extra += [jar.parent / f"netty-{name}.jar" for name in ("codec", "resolver")]
    return ":".join([str(jar)] + [str(p) for p in extra if p.exists()])


def four_letter(host: str, port: int, command: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the reply ('' when the server does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(command.encode())
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """A standalone ZooKeeper 3.8 server with a temporary data dir.

    The constructor does no I/O. ``start()`` launches it and waits until ``srvr`` answers with a ``Mode:`` line;
    ``stop()`` and ``kill()`` end it, keeping the data dir so that ``start()`` again serves the same data on the same
    port (fault tests use that); ``close()`` stops it and removes the data dir.
    """

    def __init__(self, port: int | None = None, data_dir: Path | None = None, jar: Path | None = None,
                 start_timeout_s: float = 120.0, *, tls: bool = False, host: str = "127.0.0.1",
                 command_prefix: Sequence[str] = ()) -> None:
        self._port = port
        self.host = host  # the address it binds and is reached at: a node's (kinesis_spout.testing.nodes)
        self.command_prefix = list(command_prefix)  # e.g. ``ip netns exec NODE``: run it inside a node
        self.tls = tls
        self._tls_port: int | None = None
        self.tls_files: TlsFiles | None = None
        self._data_dir = data_dir
        self._owns_dir = data_dir is None
        self.jar = jar if jar is not None else default_jar()
        self.start_timeout_s = start_timeout_s
        self._process: ServerProcess | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("ZooKeeper server not started yet")
        return self._port

    @property
    def hosts(self) -> str:
        """The connect string, ``HOST:PORT`` (``127.0.0.1:PORT`` unless given another ``host``)."""
        return f"{self.host}:{self.port}"

    @property
    def tls_hosts(self) -> str:
        """The connect string of the TLS port (a server started with ``tls=True``); clients must present a
        certificate signed by ``tls_files.ca_cert`` (``tls_files.client_cert``)."""
        if self._tls_port is None:
            raise ServerStartError("this ZooKeeper server has no TLS port: create it with tls=True and start it")
        return f"127.0.0.1:{self._tls_port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    @property
    def pid(self) -> int | None:
        """The server's process id (None when not started): for tests that stop or kill it as a fault would."""
        return self._process.pid if self._process is not None else None

    def _write_config(self, data_dir: Path) -> Path:
        cfg = data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join([
                "tickTime=500",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={data_dir / 'data'}",
                f"clientPort={self._port}",
                f"clientPortAddress={self.host}",
                "maxClientCnxns=200",
                "admin.enableServer=false",
                "4lw.commands.whitelist=srvr,ruok,stat,mntr",
                "minSessionTimeout=1000",
                "maxSessionTimeout=60000",
                *self._tls_config(data_dir),
                "",
            ])
        )
        return cfg

    def _tls_config(self, data_dir: Path) -> list[str]:
        """Lines for a second, TLS-only client port with client certificates required (PEM stores)."""
        if not self.tls:
            return []
        if self.tls_files is None:
            self.tls_files = make_tls_files(data_dir / "tls")
        if self._tls_port is None:
            self._tls_port = free_port()
        return [
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"secureClientPort={self._tls_port}",
            "secureClientPortAddress=127.0.0.1",
            f"ssl.keyStore.location={self.tls_files.server_bundle}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={self.tls_files.ca_cert}",
            "ssl.trustStore.type=PEM",
            "ssl.clientAuth=need",
        ]

    def _classpath(self) -> str:
        return server_classpath(self.jar, self.tls)

    def start(self) -> "ZooKeeperServer":
        """Start (or restart on the same port and data) and wait until it serves."""
        if self.running:
            return self
        check_runtime(self.jar)
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="kinesis-spout-zk-"))
        if self._port is None:
            self._port = free_port()
        cfg = self._write_config(self._data_dir)
        argv = [
            *self.command_prefix, "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-cp", self._classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg),
        ]
        self._process = ServerProcess("ZooKeeper", argv, self._data_dir / "zookeeper.log")
        self._process.start()
        self._process.wait_ready(lambda: "Mode:" in four_letter(self.host, self.port, "srvr"),
                                 self.start_timeout_s)
        return self

    def stop(self) -> None:
        """Stop gracefully (SIGTERM); the data dir and port are kept for a restart. Idempotent."""
        if self._process is not None:
            self._process.stop()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would. Idempotent."""
        if self._process is not None:
            self._process.kill()

    def close(self) -> None:
        """Stop and remove the temporary data dir. Idempotent."""
        self.stop()
        if self._owns_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def log_tail(self, lines: int = 30) -> str:
        return self._process.log_tail(lines) if self._process else "(not started)"

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


atexit.register(stop_all)
