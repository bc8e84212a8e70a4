"""The faults a :class:`~kinesis_spout.testing.faults.FaultProxy` can be scripted with, and the plan that hands
them out: which call gets which fault, first scripted first, and the counters of what was seen and delivered.

Shared state: a :class:`FaultPlan` is written by the test's thread (scripting faults, reading counters) and by the
proxy's handler threads (taking faults, counting calls); all of it is touched under the plan's one lock.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["DELAYED", "DROPPED", "SHARD_FILTERED_OPERATIONS", "TARGET_PREFIX", "Fault", "FaultPlan"]

#: The prefix of the ``X-Amz-Target`` header of the Kinesis JSON API; the operation name follows it.
TARGET_PREFIX = "Kinesis_20131202."
#: The code under which dropped connections are counted in :attr:`FaultProxy.injected`.
DROPPED = "ConnectionDropped"
#: The code under which calls held back before being forwarded are counted in :attr:`FaultProxy.injected`.
DELAYED = "Delayed"
#: The operations whose faults can be limited to one shard.
SHARD_FILTERED_OPERATIONS = frozenset({"GetRecords", "GetShardIterator"})


@dataclass
class Fault:
    """One scripted fault: answer the next ``remaining`` matching calls with an error, drop them, or forward them
    after ``delay_s``. ``remaining`` is counted down by :meth:`FaultPlan.take`, under the plan's lock."""

    operation: str
    error_code: str | None  # None: drop the connection (or, with delay_s, forward late)
    remaining: int
    status: int
    message: str
    shard_id: str | None
    delay_s: float = 0.0
    entry_codes: dict[int, str] | None = None  # PutRecords: refuse these entries (by index) with these codes

    @property
    def label(self) -> str:
        """The key under which the fault is counted in ``injected``: ``"Operation:Code"``."""
        return f"{self.operation}:{self.error_code or (DELAYED if self.delay_s else DROPPED)}"


class FaultPlan:
    """The scripted faults not yet delivered, in the order they were added, and the counters.

    ``calls`` counts every Kinesis operation seen (forwarded or not); ``injected`` counts the faults delivered, by
    ``"Operation:ErrorCode"``. Both are :class:`collections.Counter` objects, never rebound, updated under
    ``lock``. Who calls: the proxy (scripting methods from the test's thread, :meth:`take` from handler threads).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: collections.Counter[str] = collections.Counter()
        self.injected: collections.Counter[str] = collections.Counter()
        self._faults: list[Fault] = []  # under lock

    def add(self, fault: Fault) -> None:
        """Script ``fault`` after those already added. ``ValueError`` naming the bad argument when the operation is
        not a bare Kinesis operation name, ``times`` is below 1, an error's status is no HTTP error status, or a
        shard is given for an operation that names none."""
        if not fault.operation or fault.operation.startswith(TARGET_PREFIX):
            raise ValueError(f"operation must be a bare Kinesis operation name like 'GetRecords', "
                             f"got {fault.operation!r}")
        if fault.remaining < 1:
            raise ValueError(f"times must be at least 1, got {fault.remaining}")
        if fault.error_code is not None and not 400 <= fault.status <= 599:
            raise ValueError(f"status must be an HTTP error status (400-599), got {fault.status}")
        if fault.shard_id is not None and fault.operation not in SHARD_FILTERED_OPERATIONS:
            raise ValueError(f"shard_id can only limit faults of {sorted(SHARD_FILTERED_OPERATIONS)}, "
                             f"not {fault.operation!r}")
        with self.lock:
            self._faults.append(fault)

    def take(self, operation: str, shard_of: Callable[[], str | None]) -> Fault | None:
        """Count a call of ``operation`` and consume the first scripted fault that matches it, if any. A fault
        limited to a shard matches only when ``shard_of()`` (the call's shard, asked only when such a fault is
        waiting for the operation) names it. Called by a handler thread for each Kinesis call."""
        with self.lock:
            self.calls[operation] += 1
            candidates = [f for f in self._faults if f.operation == operation]
        if not candidates:
            return None
        shard = shard_of() if any(f.shard_id for f in candidates) else None
        with self.lock:
            for fault in self._faults:
                if fault.operation != operation or fault.remaining < 1:
                    continue
                if fault.shard_id is not None and fault.shard_id != shard:
                    continue
                fault.remaining -= 1
                if fault.remaining == 0:
                    self._faults.remove(fault)
                if fault.entry_codes is None:  # refused entries are counted one by one when answered
                    self.injected[fault.label] += 1
                return fault
        return None

    def count_refused(self, codes: Iterable[str]) -> None:
        """Count refused ``PutRecords`` entries, one per code, in ``injected``. Called by a handler thread once it
        answered the call."""
        with self.lock:
            for code in codes:
                self.injected[f"PutRecords:{code}"] += 1

    def clear(self) -> None:
        """Forget every fault not yet delivered."""
        with self.lock:
            self._faults.clear()

    def pending(self) -> int:
        """How many scripted faults are still to be delivered (summed over their ``times``)."""
        with self.lock:
            return sum(f.remaining for f in self._faults)
