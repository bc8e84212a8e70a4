"""Write ids: each operation call's id, made from the driver's clock so that a write started later sorts after an
earlier one, and the order of two ids (see "Writes are ordered" in :mod:`kinesis_spout.state.maps`).

Shared state: the clock part of the last id made in this process, guarded by one lock (any thread may make ids).
"""

from __future__ import annotations

import threading
import time
import uuid

__all__ = ["call_time", "new_call_id", "newer_call"]

_CALL_LOCK = threading.Lock()
_last_call_ns = 0  # the clock part of the last write id made in this process (guarded by _CALL_LOCK)


def new_call_id() -> str:
    """A new write id: the driver's clock in nanoseconds (16 hex digits, strictly increasing in this process, so
    that later writes' ids sort after earlier ones) and a random part. Called on the driver, once per operation
    call; any thread (the counter is guarded by a lock)."""
    global _last_call_ns
    with _CALL_LOCK:
        _last_call_ns = max(time.time_ns(), _last_call_ns + 1)
        ns = _last_call_ns
    return f"{ns:016x}.{uuid.uuid4().hex[:8]}"


def call_time(call: str | None) -> int | None:
    """The clock part of a write id made by new_call_id (None for other ids: those of a user, or older ones).
    Pure."""
    if call is None or len(call) != 25 or call[16] != ".":
        return None
    try:
        return int(call[:16], 16)
    except ValueError:
        return None


def newer_call(stored_call: str | None, call: str | None) -> bool:
    """Whether the write ``stored_call`` was started after the write ``call`` (both ids of new_call_id). Called by
    the map states before they take a stored txid for a replay."""
    stored_ns, ns = call_time(stored_call), call_time(call)
    return stored_ns is not None and ns is not None and stored_ns > ns
