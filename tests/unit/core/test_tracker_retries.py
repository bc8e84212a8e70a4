"""The tracker's less travelled paths, exactly: configuration errors that name the field, and a record retried
often enough that the heap of re-emission times drops its stale entries. Written against mutants the other tests
let survive (see benchmarks/results/mutation.md)."""

from __future__ import annotations

import pytest

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff

KEY = SequenceKey(49590338271490256608559692538361571095921575989136588898)


def test_backoff_errors_name_the_field_and_the_value() -> None:
    with pytest.raises(ConfigError, match=r"^RetryBackoff.initial_s must be >= 0, got -1$"):
        RetryBackoff(initial_s=-1)
    with pytest.raises(ConfigError, match=r"^RetryBackoff.multiplier must be >= 1, got 0.5$"):
        RetryBackoff(multiplier=0.5)
    with pytest.raises(ConfigError, match=r"^RetryBackoff.max_s must be >= initial_s \(2.0\), got 1.0$"):
        RetryBackoff(initial_s=2.0, max_s=1.0)
    with pytest.raises(ValueError, match=r"^attempt must be >= 1, got 0$"):
        RetryBackoff().delay(0)


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


def test_defaults_and_constructor_errors() -> None:
    tracker = InflightRecordTracker("shard-7")
    assert (tracker.shard_id, tracker.retry_limit, tracker.message_timeout_s) == ("shard-7", 3, 30.0)
    assert tracker.emit(KEY, 0.0) and tracker.inflight_bytes == 0  # no size given: counts nothing
    with pytest.raises(ConfigError, match=r"^retry_limit must be an int >= 0, got -1$"):
        InflightRecordTracker("s", retry_limit=-1)
    with pytest.raises(ConfigError, match=r"^message_timeout_s must be > 0 or None, got 0$"):
        InflightRecordTracker("s", message_timeout_s=0)


def test_ack_many_takes_any_iterable_of_keys_even_a_generator() -> None:
    tracker = InflightRecordTracker("s", retry_limit=3, backoff=RetryBackoff(0.0, 1.0, 0.0))
    keys = [SequenceKey(KEY.sequence + i) for i in range(4)]
    for key in keys:
        assert tracker.emit(key, 0.0, item=key)
    assert tracker.fail(keys[0], 1.0) is FailOutcome.RETRY  # a failed record: ack_many also forgets its failures
    assert tracker.next_retry(1.0) == (keys[0], keys[0], 2)
    assert tracker.ack_many(key.rank for key in keys[:2]) == 2  # ranks: the fast path
    assert tracker.checkpoint == keys[1]
    assert tracker.ack_many(key for key in keys[2:]) == 2  # SequenceKeys: one at a time
    assert tracker.checkpoint == keys[3] and tracker.inflight_count == 0
