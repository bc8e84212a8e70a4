"""The checkpoint writer's pauses between failed writes: they grow from the first delay to a cap and never past it,
and start over once a write lands. The store is the memory store, subclassed to fail the attempts a test names;
the writer's sleep is a spy that records each pause (and waits a moment, so the thread never spins)."""

from __future__ import annotations

import threading
import time

import pytest

from kinesis_spout import Checkpoint, CheckpointError, MemoryCheckpointStore
from kinesis_spout.checkpoint.writer import CHECKPOINT_WRITE_RETRY, CheckpointWriter
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.testing.process import wait_until

TIMEOUT_S = 20.0


class FailingAttempts(MemoryCheckpointStore):
    """Saves fail (retriable) at the attempts numbered in ``failing`` (from 1), or at every attempt from
    ``failing_from`` on; the others are stored."""

    def __init__(self, failing: set[int] = frozenset(), failing_from: int | None = None) -> None:  # type: ignore[assignment]
        super().__init__()
        self.failing = failing
        self.failing_from = failing_from
        self.attempts = 0

    def save(self, checkpoint: Checkpoint, *, force: bool = False) -> None:
        self.attempts += 1
        if self.attempts in self.failing or (self.failing_from is not None and self.attempts >= self.failing_from):
            raise CheckpointError(f"injected failure of attempt {self.attempts}", retriable=True)
        super().save(checkpoint, force=force)


class SleepSpy:
    """Records the pauses the writer's thread asks for; sleeps a millisecond instead."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, seconds: float) -> None:
        with self.lock:
            self.pauses.append(seconds)
        time.sleep(0.001)

    def taken(self) -> list[float]:
        with self.lock:
            return list(self.pauses)


def test_the_default_pause_is_a_tenth_of_a_second_doubling_up_to_five_seconds() -> None:
    policy = CHECKPOINT_WRITE_RETRY
    assert (policy.initial_s, policy.multiplier, policy.max_s, policy.jitter) == (0.1, 2.0, 5.0, 0.0)
    assert (policy.max_attempts, policy.deadline_s) == (None, None), "the writer never gives a value up"


def test_pauses_between_failed_writes_grow_to_the_cap_and_never_past_it() -> None:
    store = FailingAttempts(failing_from=1)
    sleep = SleepSpy()
    writer = CheckpointWriter(store, 0.0, "me", deadline_s=3600.0, sleep=sleep)
    writer.start()
    try:
        writer.offer(Checkpoint("a", "7"))
        assert wait_until(lambda: len(sleep.taken()) >= 12, TIMEOUT_S), f"pauses: {sleep.taken()}"
    finally:
        writer.close(0.5)
    pauses = sleep.taken()
    assert pauses[:12] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2] + [5.0] * 6)
    assert max(pauses) <= CHECKPOINT_WRITE_RETRY.max_s
    assert store.attempts >= 12 and store.load("a") is None


def test_a_write_that_lands_starts_the_pauses_over() -> None:
    store = FailingAttempts(failing={1, 2, 3, 5, 6})
    sleep = SleepSpy()
    writer = CheckpointWriter(store, 0.0, "me", sleep=sleep,
                              retry=RetryPolicy(initial_s=0.5, multiplier=3.0, max_s=60.0))
    writer.start()
    try:
        writer.offer(Checkpoint("a", "1"))
        assert writer.flush(TIMEOUT_S), "1 was not written"
        writer.offer(Checkpoint("a", "2"))
        assert writer.flush(TIMEOUT_S), "2 was not written"
    finally:
        writer.close(5.0)
    assert store.attempts == 7
    assert sleep.taken() == pytest.approx([0.5, 1.5, 4.5, 0.5, 1.5])
    stored = store.load("a")
    assert stored is not None and stored.sequence_number == "2"
