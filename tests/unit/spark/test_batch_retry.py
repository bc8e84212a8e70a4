"""The tries of a batch whose process() raised (kinesis_spout.spark.pipeline.batch_retry), without servers: when
they stop, what the final error says, and that a stop ends the wait between two tries."""

from __future__ import annotations

import logging
import threading

import pytest

from kinesis_spout import BatchFailedError, ConfigError, RetryBackoff
from kinesis_spout.retry import RetryPolicy
from kinesis_spout.spark.pipeline.batch_retry import BatchRetry, batch_retry_policy, summary
from kinesis_spout.spark.pipeline.loop import RunLoop
from kinesis_spout.spark.pipeline.metrics import MetricsRecorder

TINY = RetryBackoff(initial_s=0.001, multiplier=1.0, max_s=0.001)


def run_loop(stop: threading.Event | None = None) -> RunLoop:
    return RunLoop(MetricsRecorder(), stop or threading.Event(), lambda: 0, None, None, None)


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_tries_stop_at_batch_retry_limit_and_the_error_names_it_and_chains_the_cause() -> None:
    retry = BatchRetry(batch_retry_policy(2, None, TINY), run_loop(), 7, 12, "the next run reads them again")
    causes = [RuntimeError(f"the sink is down ({n})") for n in (1, 2, 3)]
    assert retry.attempt == 1 and retry.failed(causes[0]) and retry.attempt == 2
    assert retry.failed(causes[1]) and retry.attempt == 3
    with pytest.raises(BatchFailedError) as raised:
        retry.failed(causes[2])
    error = raised.value
    assert (error.batch_id, error.tries, error.__cause__, error.retriable) == (7, 3, causes[2], False)
    assert str(error).startswith("batch 7 failed 3 tries in ")
    assert "(batch_retry_limit=2); the last: process() raised RuntimeError: the sink is down (3)" in str(error)
    assert "no record of it was acked or dead-lettered" in str(error) and "its 12 records" in str(error)


def test_a_limit_of_zero_ends_at_the_first_exception() -> None:
    retry = BatchRetry(batch_retry_policy(0, 300.0, TINY), run_loop(), 1, 3, "replayed", kind="txid")
    with pytest.raises(BatchFailedError, match=r"^txid 1 failed 1 try in .*batch_retry_limit=0"):
        retry.failed(ValueError("bad"))


def test_the_tries_stop_when_the_next_could_not_start_before_batch_retry_deadline_s() -> None:
    clock = Clock()
    backoff = RetryBackoff(initial_s=0.001, multiplier=1.0, max_s=0.001)
    retry = BatchRetry(batch_retry_policy(1000, 10.0, backoff), run_loop(), 3, 1, "again", clock=clock)
    assert retry.failed(RuntimeError("down"))  # the first failure starts the deadline's clock
    clock.now += 9.0
    assert retry.failed(RuntimeError("down"))  # 9 s + the next wait < 10 s
    clock.now += 1.0
    with pytest.raises(BatchFailedError, match=r"batch 3 failed 3 tries in 10.0 s \(batch_retry_deadline_s=10\)"):
        retry.failed(RuntimeError("still down"))


def test_the_waits_are_jittered_within_the_backoff_and_logged_with_the_traceback_once(
        caplog: pytest.LogCaptureFixture) -> None:
    backoff = RetryBackoff(initial_s=0.001, multiplier=2.0, max_s=0.004)
    policy = batch_retry_policy(3, None, backoff)
    assert policy.jitter > 0 and policy.max_attempts == 4
    assert [policy.delay(n, lambda: 0.0) for n in (1, 2, 3)] == [0.001, 0.0015, 0.0025]
    assert [policy.delay(n, lambda: 1.0) for n in (1, 2, 3)] == [0.001, 0.002, 0.004]
    caplog.set_level(logging.WARNING, logger="kinesis_spout.spark")
    retry = BatchRetry(policy, run_loop(), 5, 2, "again")
    for n in (1, 2):
        try:
            raise RuntimeError(f"line one {n}\nline two")
        except RuntimeError as exc:
            assert retry.failed(exc)
    lines = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(";")[0] for r in lines] == [
        "batch 5: process() raised (try 1 of 4): RuntimeError: line one 1",
        "batch 5: process() raised (try 2 of 4): RuntimeError: line one 2"]
    assert lines[0].exc_info and not lines[1].exc_info


def test_a_stop_ends_the_wait_between_two_tries() -> None:
    stop = threading.Event()
    stop.set()
    retry = BatchRetry(batch_retry_policy(3, None, RetryBackoff(initial_s=60.0, multiplier=1.0, max_s=60.0)),
                       run_loop(stop), 2, 4, "the next run reads them again")
    assert retry.failed(RuntimeError("down")) is False


def test_settings_are_checked_and_an_exception_is_summed_up_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^batch_retry_backoff must be a RetryBackoff \(e.g. RetryBackoff\("):
        batch_retry_policy(1, None, RetryPolicy(initial_s=1.0, max_s=2.0, jitter=1.0))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="^RetryBackoff.max_s must be a finite number of seconds, got inf$"):
        RetryBackoff(initial_s=1.0, max_s=float("inf"))
    assert summary(KeyError("k")) == "KeyError: 'k'" and summary(RuntimeError()) == "RuntimeError"
    assert len(summary(ValueError("x" * 1000))) == len("ValueError: ") + 300



def test_a_run_limit_reached_during_the_wait_ends_it_and_the_deadline_counts_from_the_batch_s_first_failure() -> None:
    looks = 0

    def until() -> bool:  # the run's until(): true from its third look on, during a wait of a minute
        nonlocal looks
        looks += 1
        return looks >= 3

    loop = RunLoop(MetricsRecorder(), threading.Event(), lambda: 0, until, None, None)
    clock = Clock()
    retry = BatchRetry(batch_retry_policy(3, 300.0, RetryBackoff(initial_s=60.0, multiplier=1.0, max_s=60.0)), loop,
                       4, 1, "again", clock=clock)
    clock.now += 500.0  # the batch waited before its first try: that does not count against its deadline
    assert retry.failed(RuntimeError("down")) is False and looks >= 3
    assert retry.attempt == 2
