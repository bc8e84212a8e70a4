"""Child server processes that never outlive their parent, with readiness waits that never hang."""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import weakref
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Sequence

from kinesis_spout.errors import ServerStartError

_PR_SET_PDEATHSIG = 1
_live: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def in_background(call: Callable[[], Any], timeout_s: float = 30.0, what: str = "the call") -> Callable[[], Any]:
    """Start ``call`` on a thread of its own; the returned function joins it within ``timeout_s`` (an
    ``AssertionError`` naming ``what`` when it did not end) and returns its result, or raises its error. For a test
    that holds a reply with a fault proxy while the call waits on it."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that asks for the result
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name=f"in_background({what})")
    thread.start()

    def result() -> Any:
        thread.join(timeout_s)
        assert not thread.is_alive(), f"{what} did not end within {timeout_s:g} s"
        if "error" in out:
            raise out["error"]
        return out.get("value")

    return result


def find_binary(env_var: str, name: str) -> str | None:
    """A server binary: ``$env_var`` when set (None when that path does not exist), else ``name`` on PATH, else
    ``/usr/bin/name``; None when there is none."""
    given = os.environ.get(env_var)
    if given:
        return given if Path(given).exists() else None
    fallback = Path("/usr/bin") / name
    return shutil.which(name) or (str(fallback) if fallback.exists() else None)


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passed; returns whether it became true."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGKILL this child when the parent dies, so an interrupted run leaves no orphan server."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _Spawner:
    """Starts every server child from one long-lived daemon thread.

    Linux delivers the parent-death signal when the *thread* that forked the child ends, not the process: a server
    started from a short-lived helper thread would be killed as soon as that thread returned. Forking from a
    thread that lives as long as the process keeps the promise both ways: servers outlive the threads that asked
    for them, and die with the process. Who calls: :meth:`ServerProcess.start`, from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def popen(self, launch: Callable[[], "subprocess.Popen[bytes]"]) -> "subprocess.Popen[bytes]":
        """Run ``launch`` (which calls ``subprocess.Popen``) on the spawner thread and return its process."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="kinesis-spout-server-spawner", daemon=True)
                self._thread.start()
        done: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((launch, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            launch, done = self._requests.get()
            try:
                done.set_result(launch())
            except BaseException as exc:  # noqa: BLE001 - handed to the thread that asked
                done.set_exception(exc)


_spawner = _Spawner()


class ServerProcess:
    """One server child process with its log file.

    Who calls: the server classes of this package. ``start()`` launches, ``stop()`` terminates (SIGTERM, then
    SIGKILL after ``grace_s``), ``kill()`` sends SIGKILL at once. Both are idempotent. The child runs in a session
    of its own, so a Ctrl-C in the terminal interrupts the parent only (which then stops its servers), and it is
    SIGKILLed when the parent process dies.
    """

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        if self.running:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        try:
            self._proc = _spawner.popen(lambda: subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(self.env or {})}, cwd=self.cwd, preexec_fn=_die_with_parent,
                start_new_session=True,  # a terminal's Ctrl-C reaches the parent alone, which stops it in order
            ))
        except OSError as exc:
            raise ServerStartError(f"{self.name}: cannot run {self.argv[0]!r}: {exc}") from exc
        finally:
            log.close()
        _live.add(self)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def stop(self, grace_s: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def wait_ready(self, probe: Callable[[], bool], timeout_s: float) -> None:
        """Wait until ``probe()`` is true; on exit of the child or time-out raise with the log tail."""

        def ready_or_dead() -> bool:
            return not self.running or probe()

        ok = wait_until(ready_or_dead, timeout_s)
        if ok and self.running:
            return
        why = f"exited with code {self.exit_code()}" if not self.running else f"not ready after {timeout_s:.0f} s"
        tail = self.log_tail()
        self.stop()
        raise ServerStartError(f"{self.name} {why}; command: {' '.join(self.argv)}\n--- log tail ---\n{tail}")


def stop_all() -> None:
    """Stop every server process still running (used at interpreter exit)."""
    for server in list(_live):
        server.stop(grace_s=2.0)
