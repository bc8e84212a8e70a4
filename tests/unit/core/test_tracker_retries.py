"""The per-shard tracker's (InflightRecordTracker, the span tracker) failures: retries in due order with a capped
backoff, dead letters after the retry limit (or at once when given up), message timeouts counted from the latest
emission, and the settings it refuses, each error naming the field. Pure: no server, no clock, no sleep."""

from __future__ import annotations

import pytest

from kinesis_spout.errors import ConfigError
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff

from .keys import K0, A, B, C, D

KEY = K0


# ------------------------------------------------------------------ bugs of the original

def test_retry_limit_zero_tracks_and_checkpoints() -> None:
    tr = InflightRecordTracker("s", retry_limit=0)
    assert tr.emit(A, 0.0, item="a")
    assert tr.emit(B, 0.0, item="b")
    assert tr.inflight_count == 2
    assert tr.fail(A, 1.0) is FailOutcome.DEAD_LETTER
    assert tr.retry_queue_len == 0
    assert tr.checkpoint is None  # a dead letter not written yet holds the checkpoint
    assert tr.take_dead_letters() == [(A, "a", 1)]
    assert tr.dead_letter_written(A)
    assert tr.checkpoint == A
    assert tr.ack(B)
    assert tr.checkpoint == B
    assert tr.inflight_count == 0


def test_fail_then_ack_before_retry_leaves_no_stale_queue_entry() -> None:
    tr = InflightRecordTracker("s", message_timeout_s=None)
    tr.emit(A, 0.0)
    tr.emit(B, 0.0)
    assert tr.fail(A, 0.0) is FailOutcome.RETRY
    assert tr.retry_queue_len == 1
    assert tr.ack(A)
    assert tr.retry_queue_len == 0
    assert tr.inflight_count == 1
    assert tr.checkpoint == A
    assert not tr.has_due_retry(1000.0)
    assert tr.next_retry(1000.0) is None
    assert tr.next_due(1000.0) is None
    # The shard is not stalled: later records still move the checkpoint.
    tr.ack(B)
    tr.emit(C, 1.0)
    tr.ack(C)
    assert tr.checkpoint == C
    # A late fail of the acked record changes nothing.
    assert tr.fail(A, 2.0) is FailOutcome.UNKNOWN
    assert tr.retry_queue_len == 0
    # The queue left no trace of A: a later failure is the only retry there is, and nothing is due after it.
    tr.emit(D, 3.0)
    assert tr.fail(D, 3.0) is FailOutcome.RETRY
    assert tr.next_retry(1000.0) == (D, None, 2)
    assert tr.next_retry(1000.0) is None and tr.retry_queue_len == 0 and tr.checkpoint == C


# ------------------------------------------------------------------ retries, backoff, dead letters


def test_backoff_grows_and_is_capped() -> None:
    b = RetryBackoff(initial_s=0.1, multiplier=2.0, max_s=1.0)
    assert [b.delay(n) for n in range(1, 7)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert b.delay(10_000) == 1.0  # no OverflowError
    with pytest.raises(ValueError):
        b.delay(0)


@pytest.mark.parametrize(
    "kwargs", [{"initial_s": -1.0}, {"multiplier": 0.5}, {"initial_s": 2.0, "max_s": 1.0}, {"max_s": float("nan")}]
)
def test_backoff_rejects_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RetryBackoff(**kwargs)


def test_backoff_errors_name_the_field_and_the_value() -> None:
    with pytest.raises(ConfigError, match=r"^RetryBackoff.initial_s must be >= 0, got -1$"):
        RetryBackoff(initial_s=-1)
    with pytest.raises(ConfigError, match=r"^RetryBackoff.multiplier must be >= 1, got 0.5$"):
        RetryBackoff(multiplier=0.5)
    with pytest.raises(ConfigError, match=r"^RetryBackoff.max_s must be >= initial_s \(2.0\), got 1.0$"):
        RetryBackoff(initial_s=2.0, max_s=1.0)
    with pytest.raises(ValueError, match=r"^attempt must be >= 1, got 0$"):
        RetryBackoff().delay(0)


@pytest.mark.parametrize("kwargs", [{"retry_limit": -1}, {"message_timeout_s": 0.0}, {"message_timeout_s": -5.0}])
def test_tracker_rejects_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        InflightRecordTracker("s", **kwargs)  # type: ignore[arg-type]


def test_defaults_and_constructor_errors() -> None:
    tracker = InflightRecordTracker("shard-7")
    assert (tracker.shard_id, tracker.retry_limit, tracker.message_timeout_s) == ("shard-7", 3, 30.0)
    assert tracker.emit(KEY, 0.0) and tracker.inflight_bytes == 0  # no size given: counts nothing
    with pytest.raises(ConfigError, match=r"^retry_limit must be an int >= 0, got -1$"):
        InflightRecordTracker("s", retry_limit=-1)
    with pytest.raises(ConfigError, match=r"^message_timeout_s must be > 0 or None, got 0$"):
        InflightRecordTracker("s", message_timeout_s=0)


def test_retries_come_out_in_due_order() -> None:
    tr = InflightRecordTracker("s", backoff=RetryBackoff(0.1, 2.0, 10.0), message_timeout_s=None)
    for k in (A, B, C):
        tr.emit(k, 0.0)
    tr.fail(B, 0.0)  # due 0.1
    tr.fail(A, 0.05)  # due 0.15
    assert tr.next_due(0.0) == pytest.approx(0.1)
    assert not tr.has_due_retry(0.09)
    assert tr.next_retry(0.09) is None
    assert tr.next_retry(0.12) == (B, None, 2)
    assert tr.next_retry(0.12) is None
    assert tr.has_due_retry(0.16)
    # B fails again on its 2nd attempt: backoff 0.2, due 0.32; C fails on its 1st at 0.2: due 0.3.
    tr.fail(B, 0.12)
    tr.fail(C, 0.2)
    assert [tr.next_retry(1.0)[0] for _ in range(3)] == [A, C, B]  # type: ignore[index]
    assert tr.retry_queue_len == 0


def test_backoff_in_tracker_capped_at_max() -> None:
    tr = InflightRecordTracker("s", retry_limit=10, backoff=RetryBackoff(1.0, 2.0, 5.0), message_timeout_s=None)
    tr.emit(A, 0.0)
    now, delays = 0.0, []
    for _ in range(6):
        assert tr.fail(A, now) is FailOutcome.RETRY
        delays.append(tr.next_due(now))
        now += 100.0
        assert tr.next_retry(now) is not None
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_next_retry_keeps_key_and_item_and_increments_attempt() -> None:
    tr = InflightRecordTracker("s", retry_limit=3, backoff=RetryBackoff(0.0, 1.0, 0.0))
    tr.emit(A, 0.0, item={"payload": 1}, size=10)
    for attempt in (2, 3, 4):
        assert tr.fail(A, 1.0) is FailOutcome.RETRY
        assert tr.inflight_count == 1 and tr.inflight_bytes == 10 and tr.retry_queue_len == 1
        assert tr.next_retry(1.0) == (A, {"payload": 1}, attempt)
        assert tr.retry_queue_len == 0
    assert tr.stats.retried == 3
    assert tr.ack(A)
    # Nothing left behind: no record, no retry, no timeout, and a late fail is of an unknown record.
    assert (tr.inflight_count, tr.inflight_bytes, tr.retry_queue_len, tr.checkpoint) == (0, 0, 0, A)
    assert tr.next_due(1.0) is None and tr.expire(10**9) == [] and tr.fail(A, 2.0) is FailOutcome.UNKNOWN


def test_dead_letter_after_retry_limit_moves_checkpoint() -> None:
    tr = InflightRecordTracker("s", retry_limit=2, backoff=RetryBackoff(0.0, 1.0, 0.0))
    tr.emit(A, 0.0, item="a", size=3)
    tr.emit(B, 0.0, item="b", size=4)
    tr.ack(B)
    outcomes = []
    for _ in range(3):
        outcomes.append(tr.fail(A, 1.0))
        tr.next_retry(1.0)
    assert outcomes == [FailOutcome.RETRY, FailOutcome.RETRY, FailOutcome.DEAD_LETTER]
    assert tr.checkpoint is None  # A's dead letter is not written yet
    assert tr.inflight_count == 1 and tr.inflight_bytes == 3 and tr.dead_letters_pending == 1
    assert tr.take_dead_letters() == [(A, "a", 3)]
    assert tr.take_dead_letters() == []
    assert tr.stats.dead_lettered == 0
    assert tr.ack(A) is False and tr.fail(A, 2.0) is FailOutcome.UNKNOWN  # a pending dead letter stays one
    assert tr.expire(1e9) == [] and tr.next_retry(1e9) is None and tr.next_due(1e9) is None
    assert tr.dead_letter_written(A)
    assert tr.checkpoint == B
    assert tr.inflight_count == 0 and tr.inflight_bytes == 0 and tr.dead_letters_pending == 0
    assert tr.stats.dead_lettered == 1 and tr.stats.failed == 3
    assert (tr.stats.emitted, tr.stats.acked, tr.stats.retried) == (2, 1, 2)
    assert tr.ack(A) is False  # already done
    assert tr.dead_letter_written(A) is False and tr.dead_letter_written(C) is False


def test_give_up_dead_letters_a_record_in_flight_at_once() -> None:
    """A record its scheme refused: a dead letter at its current attempt, done when written."""
    tr = InflightRecordTracker("s", retry_limit=5, backoff=RetryBackoff(0.0, 1.0, 0.0))
    tr.emit(A, 0.0, item="a")
    tr.emit(B, 0.0, item="b")
    assert tr.fail(B, 1.0) is FailOutcome.RETRY
    assert tr.give_up(B) is False  # waiting for its retry: not in flight
    assert tr.next_retry(1.0) == (B, "b", 2)
    assert tr.give_up(B) and tr.give_up(B) is False
    assert tr.give_up(A) and tr.give_up(C) is False
    assert tr.take_dead_letters() == [(B, "b", 2), (A, "a", 1)]
    assert tr.retry_queue_len == 0 and tr.checkpoint is None
    assert tr.dead_letter_written(B) and tr.checkpoint is None
    assert tr.dead_letter_written(A) and tr.checkpoint == B
    assert tr.stats.dead_lettered == 2 and tr.stats.acked == 0


def test_fail_of_a_record_waiting_for_retry_is_unknown() -> None:
    tr = InflightRecordTracker("s")
    tr.emit(A, 0.0)
    assert tr.fail(A, 0.0) is FailOutcome.RETRY
    assert tr.fail(A, 0.0) is FailOutcome.UNKNOWN
    assert tr.retry_queue_len == 1
    assert tr.stats.unknown_fails == 1 and tr.stats.failed == 1


# ------------------------------------------------------------------ message timeout


def test_message_timeout_expires_only_overdue_records_and_restarts_on_re_emit() -> None:
    tr = InflightRecordTracker("s", message_timeout_s=30.0, backoff=RetryBackoff(0.1, 2.0, 10.0))
    tr.emit(A, 0.0)
    tr.emit(B, 10.0)
    tr.emit(C, 12.0)
    tr.ack(C)
    assert tr.next_due(0.0) == 30.0
    assert tr.expire(29.9) == []
    assert tr.expire(30.0) == [(A, FailOutcome.RETRY)]
    assert tr.retry_queue_len == 1 and tr.inflight_count == 2
    assert tr.next_due(30.0) == pytest.approx(0.1)  # A's retry, before B's timeout at 40
    assert tr.next_retry(30.1) == (A, None, 2)
    assert tr.next_due(30.1) == pytest.approx(9.9)  # B's timeout
    assert tr.expire(45.0) == [(B, FailOutcome.RETRY)]  # not A: re-emitted at 30.1, deadline 60.1
    assert tr.next_retry(45.1) == (B, None, 2)
    assert tr.next_due(45.1) == pytest.approx(15.0)  # A's deadline 60.1
    assert tr.expire(60.0) == []
    assert tr.expire(60.1) == [(A, FailOutcome.RETRY)]
    assert tr.stats.timed_out == 3
    assert tr.checkpoint is None


def test_timeout_counts_from_the_latest_re_emission() -> None:
    tr = InflightRecordTracker("s", retry_limit=3, message_timeout_s=10.0, backoff=RetryBackoff(0.0, 1.0, 0.0))
    tr.emit(A, 0.0)
    tr.fail(A, 1.0)
    assert tr.next_retry(1.0) == (A, None, 2)
    tr.fail(A, 5.0)
    assert tr.next_retry(5.0) == (A, None, 3)
    assert tr.expire(11.0) == []  # the re-emission at 1.0 no longer counts
    assert tr.next_due(11.0) == 4.0
    assert tr.expire(15.0) == [(A, FailOutcome.RETRY)]


def test_a_record_retried_many_times_times_out_once_per_emission() -> None:
    tracker = InflightRecordTracker("s", retry_limit=1000, backoff=RetryBackoff(0.0, 1.0, 0.0), message_timeout_s=5.0)
    assert tracker.emit(KEY, 0.0, item="x")
    now = 0.0
    for attempt in range(2, 200):  # each re-emission leaves the previous one's entry stale in the heap
        now += 1.0
        assert tracker.fail(KEY, now) is FailOutcome.RETRY
        assert tracker.next_retry(now) == (KEY, "x", attempt)
    assert tracker.next_due(now) == 5.0
    assert tracker.expire(now + 4.9) == []
    assert tracker.expire(now + 5.0) == [(KEY, FailOutcome.RETRY)]
    assert tracker.next_retry(now + 5.0) == (KEY, "x", 200)
    assert tracker.ack(KEY) and tracker.checkpoint == KEY and tracker.inflight_count == 0
    assert tracker.next_due(now + 5.0) is None and tracker.expire(now + 100.0) == []


def test_waiting_records_do_not_time_out_and_acked_ones_never_expire() -> None:
    tr = InflightRecordTracker("s", message_timeout_s=5.0, backoff=RetryBackoff(100.0, 1.0, 100.0))
    tr.emit(A, 0.0)
    tr.emit(B, 0.0)
    tr.fail(A, 1.0)  # waits until 101
    tr.ack(B)
    assert tr.expire(50.0) == []
    assert tr.next_due(50.0) == 51.0
    assert tr.stats.timed_out == 0


def test_timeout_dead_letters_when_no_retries_left() -> None:
    tr = InflightRecordTracker("s", retry_limit=0, message_timeout_s=1.0)
    tr.emit(A, 0.0, item="a")
    tr.emit(B, 0.5, item="b")
    assert tr.expire(1.5) == [(A, FailOutcome.DEAD_LETTER), (B, FailOutcome.DEAD_LETTER)]
    assert tr.checkpoint is None
    assert tr.take_dead_letters() == [(A, "a", 1), (B, "b", 1)]
    assert tr.dead_letter_written(B) and tr.checkpoint is None
    assert tr.dead_letter_written(A) and tr.checkpoint == B


def test_timeout_disabled() -> None:
    tr = InflightRecordTracker("s", message_timeout_s=None)
    tr.emit(A, 0.0)
    assert tr.expire(1e12) == []
    assert tr.next_due(1e12) is None
    assert tr.inflight_count == 1
