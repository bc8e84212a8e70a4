"""The registry's ``settled`` condition without servers: a hand-back waiting for its shard's records (``wait_settled``)
is counted while it waits and woken by the next ack's ``notify_settled``; with nobody waiting, acks notify nobody."""

from __future__ import annotations

import threading
import time

from kinesis_spout.kinesis.retrieval.reader import RoundRobinReader
from kinesis_spout.spout.registry import ShardRegistry
from kinesis_spout.testing.process import wait_until

WAIT_S = 30.0  # the waiter's own bound: far longer than the test waits for it


def test_a_waiting_hand_back_is_woken_by_the_next_notify_and_no_longer_counted() -> None:
    registry = ShardRegistry(RoundRobinReader(1))
    waited: list[float] = []

    def hand_back() -> None:
        with registry.lock:
            started = time.monotonic()
            registry.wait_settled(WAIT_S)
            waited.append(time.monotonic() - started)

    with registry.lock:
        registry.notify_settled()  # nobody waits: nothing to wake, nothing raised
    assert registry.waiting == 0
    waiter = threading.Thread(target=hand_back, daemon=True)
    waiter.start()
    assert wait_until(lambda: registry.waiting == 1, 5.0, interval_s=0.01), "the hand-back never started waiting"
    with registry.lock:  # the waiter released the lock inside wait_settled: an ack takes it and notifies
        registry.notify_settled()
    waiter.join(5.0)
    assert not waiter.is_alive(), "notify_settled did not wake the waiting hand-back"
    assert waited and waited[0] < WAIT_S and registry.waiting == 0
