"""Helpers for tests that read through a spout."""

from __future__ import annotations

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
