"""Helpers for tests that read through a spout."""

from __future__ import annotations

import threading
import time

from kinesis_spout.records import SpoutTuple
from kinesis_spout.spout import KinesisSpout


def drain(spout: KinesisSpout, want: int, timeout_s: float = 20.0, ack: bool = True) -> list[SpoutTuple]:
    """Read until ``want`` tuples arrived or ``timeout_s`` passed, acking each unless ``ack`` is False.

    Returns what arrived (possibly fewer than ``want``: the caller asserts how many it expects).
    """
    got: list[SpoutTuple] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        for tup in spout.next_batch(max_records=want - len(got), timeout_s=0.5):
            got.append(tup)
            if ack:
                spout.ack(tup.message_id)
    return got


class ConsumerThread:
    """A spout read on its own thread, as a worker process would: batches are taken and acked at once, and each
    delivery is appended to ``log`` as ``(message_id, worker name)`` (under ``lock``) before its ack.

    ``start()`` opens the spout and starts the thread; ``stop()`` ends the thread and closes the spout
    (idempotent). An exception of the loop is kept in ``error``. For tests of several workers sharing a stream.
    """

    def __init__(self, spout: KinesisSpout, name: str, log: list[tuple[str, str]], lock: threading.Lock) -> None:
        self.spout = spout
        self.name = name
        self._log, self._lock = log, lock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"consumer-{name}", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> "ConsumerThread":
        self.spout.open()
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self.spout.next_batch(max_records=200, timeout_s=0.1)
                with self._lock:
                    self._log.extend((t.message_id, self.name) for t in batch)
                self.spout.ack_many(t.message_id for t in batch)
        except BaseException as exc:  # noqa: BLE001 - kept for the test to report
            self.error = exc

    @property
    def shards(self) -> list[str]:
        return self.spout.shard_ids

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        self.spout.close()
