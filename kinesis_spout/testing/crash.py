"""Crash-and-resume tests: run a consumer in a child process and SIGKILL it at a point the test chooses.

The consumer is a function of yours, defined at the top level of an importable module (a test module is one): the
child is a fresh interpreter (``spawn``) that imports it and calls ``consumer(*args, crash)``. It reports its
progress with ``crash.acked()`` after each ack (or ``crash.acked(n)`` after ``n``); the call that reaches
``after_acks`` never returns: the child waits there until :func:`kill_at` SIGKILLs it. So the crash falls exactly
after that ack, wherever the spout's own threads are (a checkpoint write may be under way, or not yet due), as a
real crash would.

    import json
    from pathlib import Path

    from kinesis_spout import KinesisSpout, SpoutConfig
    from kinesis_spout.testing import CrashPoint, kill_at, stored_checkpoints

    def consume(config: SpoutConfig, log: str, crash: CrashPoint) -> None:
        with KinesisSpout(config) as spout, open(log, "a", buffering=1) as out:
            while True:
                for tup in spout.next_batch(max_records=10, timeout_s=0.5):
                    out.write(tup.message_id + "\\n")  # the effect, before the ack
                    spout.ack(tup.message_id)
                    crash.acked()  # the 25th call never returns: SIGKILL

    def test_a_crash_loses_nothing(kinesalite, zookeeper, tmp_path):
        ...  # a stream with 60 records, and config = SpoutConfig(...) for it
        run = kill_at(consume, config, str(tmp_path / "log"), after_acks=25)
        assert run.killed and run.acked == 25
        print(stored_checkpoints(config))  # where the next run resumes: at most the 25th record
        ...  # run the consumer again (in the test process): every record is seen at least once

``consume`` must be importable by name in the child (top level of its module, not a lambda or a nested function),
and its arguments picklable (a :class:`~kinesis_spout.SpoutConfig` is, unless a callable of yours in it is not).
The child inherits the test's environment (the fixtures' dummy AWS credentials among it).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["CrashPoint", "CrashRun", "kill_at"]


class CrashPoint:
    """The child's side: counts the acks its consumer reports and stops it at the chosen one.

    Who calls: the consumer, in the child, from one thread (the one that acks). ``acked()`` adds to a counter the
    parent reads; when it reaches ``after_acks`` it tells the parent and blocks until the SIGKILL. ``after_acks``
    None: never stops (the consumer runs until it returns)."""

    def __init__(self, after_acks: int | None, counter: Any, reached: Any) -> None:
        self.after_acks = after_acks
        self._counter = counter
        self._reached = reached

    @property
    def count(self) -> int:
        """The acks reported so far."""
        return int(self._counter.value)

    def acked(self, n: int = 1) -> None:
        """Report ``n`` more acks; blocks for good once ``after_acks`` is reached (the parent SIGKILLs the
        child)."""
        with self._counter.get_lock():
            self._counter.value += n
            count = self._counter.value
        if self.after_acks is not None and count >= self.after_acks:
            self._reached.set()
            threading.Event().wait()  # never set: the SIGKILL ends the process here


@dataclass(frozen=True)
class CrashRun:
    """What became of a child: ``killed`` (SIGKILLed at the crash point) or ended on its own with ``exit_code``
    (0 when the consumer returned, 1 when it raised: its traceback is on the test's stderr); ``acked`` is the
    count of acks it reported."""

    killed: bool
    exit_code: int | None
    acked: int


def _child(consumer: Callable[..., Any], args: tuple[Any, ...], after_acks: int | None, counter: Any,
           reached: Any) -> None:  # pragma: no cover - runs in the child
    consumer(*args, CrashPoint(after_acks, counter, reached))


def kill_at(consumer: Callable[..., Any], *args: Any, after_acks: int | None, timeout_s: float = 120.0
            ) -> CrashRun:
    """Run ``consumer(*args, crash)`` in a child process and SIGKILL it once its consumer has reported
    ``after_acks`` acks through ``crash.acked()`` (see the module's example); wait for it to end instead when
    ``after_acks`` is None or it returns first.

    Returns once the child is gone. Raises ``AssertionError`` when neither happened within ``timeout_s`` (the
    child is killed first, so nothing is left running). Who calls: tests, from the test's thread."""
    if after_acks is not None and after_acks < 1:
        raise ValueError(f"after_acks must be 1 or more (or None: no crash), got {after_acks!r}")
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no thread of the test is forked
    counter = context.Value("q", 0)
    reached = context.Event()
    child = context.Process(target=_child, args=(consumer, args, after_acks, counter, reached), daemon=True,
                            name=f"kill_at({getattr(consumer, '__name__', consumer)!s})")
    child.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not reached.wait(0.05):
            if not child.is_alive():
                break
            if time.monotonic() >= deadline:
                raise AssertionError(f"the consumer reported {counter.value} acks of the {after_acks} awaited "
                                     f"within {timeout_s:g} s, and did not end")
        killed = reached.is_set()
        if killed:
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
        child.join(30.0)
        return CrashRun(killed=killed, exit_code=None if killed else child.exitcode, acked=int(counter.value))
    finally:
        if child.is_alive():
            child.kill()
            child.join(10.0)
