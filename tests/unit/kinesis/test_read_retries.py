"""The one rule for retriable read errors (``read_backoff``, ``pause_after``): what is raised at once, how many
retriable errors in a row are tried again, what the error says when the reads give up, and how retries are logged.
No servers: errors are made here and the backoff's clock and draws are fixed."""

from __future__ import annotations

import logging

import pytest

from kinesis_spout.errors import KinesisError, StreamNotFoundError, ThrottledError
from kinesis_spout.kinesis.retrieval.read_retries import QUIET_RETRIES, pause_after, read_backoff, read_succeeded
from kinesis_spout.retry import RetryPolicy

POLICY = RetryPolicy(initial_s=0.5, multiplier=2.0, max_s=4.0, jitter=0.0)


def throttled() -> ThrottledError:
    return ThrottledError("GetRecords throttled (ProvisionedThroughputExceededException)",
                          code="ProvisionedThroughputExceededException")


def test_an_error_that_retrying_cannot_fix_is_raised_at_once_and_not_counted() -> None:
    backoff = read_backoff(POLICY, 3)
    gone = StreamNotFoundError("stream 's' not found", code="ResourceNotFoundException")
    with pytest.raises(StreamNotFoundError) as caught:
        pause_after(backoff, gone, "shardId-000000000000")
    assert caught.value is gone and backoff.failures == 0


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_retries_retriable_errors_in_a_row_are_tried_again_after_the_policy_s_delays_then_the_reads_give_up(
        retries: int) -> None:
    backoff = read_backoff(POLICY, retries)
    pauses = [pause_after(backoff, throttled(), "shardId-000000000000") for _ in range(retries)]
    assert pauses == [0.5, 1.0, 2.0][:retries]
    last = throttled()
    with pytest.raises(ThrottledError, match=rf"throttled .* \(gave up after {retries} retries\)$") as caught:
        pause_after(backoff, last, "shardId-000000000000")
    assert caught.value.code == last.code and caught.value.__cause__ is last
    assert caught.value.retriable, "a throttle given up on now may pass later"


def test_an_error_of_a_kind_made_otherwise_gives_up_as_a_kinesis_error() -> None:
    class Odd(KinesisError):
        def __init__(self, message: str, extra: int) -> None:
            super().__init__(message, code="Odd", retriable=True)

    with pytest.raises(KinesisError, match=r"^odd \(gave up after 0 retries\)$") as caught:
        pause_after(read_backoff(POLICY, 0), Odd("odd", 1), "shardId-000000000000")
    assert type(caught.value) is KinesisError and caught.value.code == "Odd" and caught.value.retriable


def test_a_read_that_succeeds_starts_the_count_again_and_ends_a_run_logged_at_warning_at_info(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kinesis_spout.kinesis")
    backoff = read_backoff(POLICY, 2)
    for _ in range(2):
        assert pause_after(backoff, throttled(), "shardId-000000000000") > 0
        assert pause_after(backoff, throttled(), "shardId-000000000000") > 0
        read_succeeded(backoff, "shardId-000000000000")
    assert not [r for r in caplog.records if r.levelname == "INFO"], "a short run ends quietly"
    backoff = read_backoff(POLICY, 30)
    for _ in range(QUIET_RETRIES + 1):
        pause_after(backoff, throttled(), "shardId-000000000003")
    read_succeeded(backoff, "shardId-000000000003")
    assert caplog.records[-1].levelname == "INFO"
    assert caplog.records[-1].getMessage() == (f"reads of shardId-000000000003 recovered after {QUIET_RETRIES + 1} "
                                               f"failed calls in a row")


def test_a_negative_number_of_retries_raises_the_first_retriable_error() -> None:
    with pytest.raises(ThrottledError, match=r"gave up after 0 retries"):
        pause_after(read_backoff(POLICY, -1), throttled(), "shardId-000000000000")


def test_the_first_retries_of_a_run_are_logged_at_debug_and_the_next_at_warning_with_the_shard(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kinesis_spout.kinesis")
    backoff = read_backoff(POLICY, 30)
    for _ in range(QUIET_RETRIES + 1):
        pause_after(backoff, throttled(), "shardId-000000000007")
    levels = [r.levelname for r in caplog.records if "shardId-000000000007" in r.getMessage()]
    assert levels == ["DEBUG"] * QUIET_RETRIES + ["WARNING"]
    last = caplog.records[-1].getMessage()
    assert last.startswith("GetRecords throttled (ProvisionedThroughputExceededException); ")
    assert f"{QUIET_RETRIES + 1} failed calls in a row on shardId-000000000007" in last


def test_a_long_run_of_retries_is_logged_at_warning_each_time_it_doubles(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kinesis_spout.kinesis")
    backoff = read_backoff(POLICY, 100)
    for _ in range(40):
        pause_after(backoff, throttled(), "shardId-000000000007")
    warned = [i + 1 for i, r in enumerate(caplog.records) if r.levelname == "WARNING"]
    assert len(caplog.records) == 40
    assert warned == [QUIET_RETRIES + 1, 2 * (QUIET_RETRIES + 1), 4 * (QUIET_RETRIES + 1), 8 * (QUIET_RETRIES + 1)]
