"""The span tracker acks and fails one emission of a record: ``attempt_of`` (the attempt a record is in flight at),
``ack_attempt`` and ``fail_attempt`` (only that attempt), for records emitted one by one and in spans, waiting for
their retry, out again, dead letters and unknown keys. Pure: no server, no clock."""

from __future__ import annotations

import pytest

from kinesis_spout.tracker import FailOutcome, RetryBackoff
from kinesis_spout.tracking.spans import SpanTracker

from .keys import K0, A, B, C

NO_WAIT = RetryBackoff(0.0, 1.0, 0.0)


def tracker(**kwargs: object) -> SpanTracker:
    return SpanTracker("shardId-000000000000", retry_limit=3, backoff=NO_WAIT, checkpoint=K0,
                       **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("as_span", [False, True], ids=["one-by-one", "one-span"])
def test_a_record_out_again_is_acked_only_at_its_current_attempt(as_span: bool) -> None:
    """B fails at attempt 1 and 2 and is out at attempt 3: acks of attempts 1 and 2 change nothing (and count no
    unknown ack); the ack of attempt 3 makes it done and moves the checkpoint."""
    tr = tracker()
    if as_span:
        assert tr.emit_span([A, B, C], 0.0) is not None
    else:
        assert all(tr.emit(key, 0.0) for key in (A, B, C))
    assert [tr.attempt_of(key) for key in (A, B, C)] == [1, 1, 1]
    assert tr.ack_attempt(A, 1) and tr.ack_attempt(C, 1)
    for attempt in (1, 2):
        assert tr.fail(B, 0.0) is FailOutcome.RETRY
        assert tr.attempt_of(B) is None  # waiting for its retry: not in flight
        assert not tr.ack_attempt(B, attempt) and tr.retry_queue_len == 1
        assert tr.next_retry(0.0) is not None and tr.attempt_of(B) == attempt + 1
    for stale in (1, 2, 4):
        assert not tr.ack_attempt(B, stale)
    assert (tr.inflight_count, tr.checkpoint, tr.stats.unknown_acks) == (1, A, 0)
    assert tr.ack_attempt(B.rank, 3)  # a rank does as a key
    assert (tr.inflight_count, tr.checkpoint, tr.attempt_of(B)) == (0, C, None)
    assert not tr.ack_attempt(B, 3)  # done: nothing more to ack


def test_a_dead_letter_an_unknown_key_and_a_done_record_are_at_no_attempt() -> None:
    tr = tracker(message_timeout_s=None)
    span = tr.emit_span([A, B], 0.0)
    assert span is not None
    assert tr.give_up(A) and tr.attempt_of(A) is None and not tr.ack_attempt(A, 1)
    assert tr.attempt_of(C) is None and not tr.ack_attempt(C, 1)
    assert tr.ack_span(span) == 1 and tr.attempt_of(B) is None and not tr.ack_attempt(B, 1)
    assert (tr.inflight_count, tr.dead_letters_pending, tr.stats.unknown_acks) == (1, 1, 0)


def test_a_late_fail_of_an_emission_that_is_over_does_not_fail_the_later_attempt() -> None:
    """B fails at attempt 1 and is out at attempt 2: a fail of attempt 1 changes nothing (no unknown fail counted),
    the fail of attempt 2 queues attempt 3; while it waits, no attempt is failed; a dead letter neither."""
    tr = tracker(message_timeout_s=None)
    assert tr.emit_span([A, B, C], 0.0) is not None
    assert tr.fail_attempt(B, 2, 0.0) is FailOutcome.UNKNOWN and tr.attempt_of(B) == 1
    assert tr.fail_attempt(B, 1, 0.0) is FailOutcome.RETRY
    assert tr.fail_attempt(B, 1, 0.0) is FailOutcome.UNKNOWN  # waiting for its retry
    assert tr.next_retry(0.0) is not None and tr.attempt_of(B) == 2
    assert tr.fail_attempt(B, 1, 0.0) is FailOutcome.UNKNOWN and tr.attempt_of(B) == 2
    assert (tr.stats.failed, tr.stats.unknown_fails, tr.retry_queue_len) == (1, 0, 0)
    assert tr.fail_attempt(B, 2, 0.0) is FailOutcome.RETRY and tr.retry_queue_len == 1
    assert tr.give_up(C) and tr.fail_attempt(C, 1, 0.0) is FailOutcome.UNKNOWN
    assert (tr.stats.failed, tr.dead_letters_pending, tr.inflight_count) == (2, 1, 3)
