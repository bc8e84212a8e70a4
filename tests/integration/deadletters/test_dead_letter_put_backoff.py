"""The pauses between puts of refused dead-letter entries, and between failed writes of the dead-letter thread:
they follow the writers' retry policies. The fault proxy refuses chosen entries in front of the emulators; the
Kinesis writer's sleep is a spy that records the pauses instead of sleeping them."""

from __future__ import annotations

import threading
import time
from typing import Sequence

import pytest

from kinesis_spout.deadletters import DeadLetter, DeadLetterError, DeadLetterWorker, DeadLetterWriter
from kinesis_spout.deadletters.kinesis import PUT_RETRY, KinesisDeadLetterWriter
from kinesis_spout.deadletters.worker import DEAD_LETTER_BACKOFF
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

PTEE = "ProvisionedThroughputExceededException"
TIMEOUT_S = 20.0


def letter(n: int) -> DeadLetter:
    seq = str(49_000_000_000_000_000_000 + n)
    record = Record("shardId-000000000000", seq, None, f"pk-{n}", b"letter %d" % n, None,
                    SequenceKey.parse(seq, None))
    return DeadLetter(record, "poison record: test", 1, "source", "backoff", 1_780_000_000.0)


def test_the_default_policies_are_the_documented_ones() -> None:
    assert (PUT_RETRY.initial_s, PUT_RETRY.multiplier, PUT_RETRY.jitter) == (0.05, 2.0, 0.0)
    assert [PUT_RETRY.delay(n) for n in (1, 2, 3, 4)] == [0.05, 0.1, 0.2, 0.4]
    assert (DEAD_LETTER_BACKOFF.initial_s, DEAD_LETTER_BACKOFF.multiplier, DEAD_LETTER_BACKOFF.max_s) == (0.1, 2.0, 5.0)
    assert (DEAD_LETTER_BACKOFF.max_attempts, DEAD_LETTER_BACKOFF.deadline_s) == (None, None)


def test_refused_entries_are_put_again_after_growing_pauses_and_no_pause_follows_the_last_attempt(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    dlq = kinesis_backend.create_stream(shards=1)
    pauses: list[float] = []
    writer = KinesisDeadLetterWriter(dlq, through.region, through.endpoint_url, 4, sleep=pauses.append)
    proxy.refuse_records({0: PTEE}, {0: PTEE}, {0: "InternalFailure"})
    try:
        writer.write([letter(0), letter(1)])  # the fourth attempt puts the refused letter
        assert pauses == [0.05, 0.1, 0.2]
        assert writer.puts == 2
        pauses.clear()
        proxy.refuse_records({0: PTEE}, {0: PTEE})
        short = KinesisDeadLetterWriter(dlq, through.region, through.endpoint_url, 2, sleep=pauses.append)
        try:
            with pytest.raises(DeadLetterError, match=r"refused 1 dead letters 2 times \(Provisioned") as raised:
                short.write([letter(2)])
        finally:
            short.close()
        assert raised.value.written == ()
        assert pauses == [0.05], "one pause between two attempts, none after the last"
    finally:
        writer.close()
    assert proxy.injected == {f"PutRecords:{PTEE}": 4, "PutRecords:InternalFailure": 1}


class FailingWrites(DeadLetterWriter):
    """A destination whose first ``failures`` writes fail; records when each write was tried."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.tried: list[float] = []
        self.written: list[DeadLetter] = []
        self.lock = threading.Lock()

    def write(self, letters: Sequence[DeadLetter]) -> None:
        with self.lock:
            self.tried.append(time.monotonic())
            if len(self.tried) <= self.failures:
                raise OSError(f"destination down (write {len(self.tried)})")
            self.written.extend(letters)

    def close(self) -> None:
        pass


def test_the_dead_letter_thread_waits_at_least_the_policy_s_growing_delays_between_failed_writes() -> None:
    destination = FailingWrites(failures=4)
    done: list[DeadLetter] = []
    policy = RetryPolicy(initial_s=0.05, multiplier=2.0, max_s=0.2)
    worker = DeadLetterWorker(destination, done.extend, deadline_s=60.0, backoff=policy)
    worker.start()
    try:
        worker.put([letter(0)])
        assert wait_until(lambda: len(done) == 1, TIMEOUT_S), "the letter was never written"
    finally:
        worker.close(5.0)
    assert worker.failures == 4 and worker.written == 1 and worker.unreachable is None
    gaps = [b - a for a, b in zip(destination.tried, destination.tried[1:])]
    for gap, least in zip(gaps, (0.05, 0.1, 0.2, 0.2), strict=True):
        assert gap >= least - 0.005, f"waited {gap:.3f} s where the policy says {least} s (gaps {gaps})"
