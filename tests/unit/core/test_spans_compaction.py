"""A span compacted after most of its records were done keeps, for each record still pending, its item, its size,
its emission time, its state and the key emitted just before it: retries, dead letters, timeouts, the bytes in
flight and the checkpoint answer as before the compaction. Pure: no server, no clock."""

from __future__ import annotations

import random

import pytest

import kinesis_spout.tracking.span as span_mod
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, RetryBackoff
from kinesis_spout.tracking.spans import SpanTracker

from .keys import sparse_keys

WHOLE, ALONE = 200, 200  # records emitted as one span at 0.0, then one by one at 1.0, 2.0, ...
TIMEOUT = 50.0


def item(j: int) -> str:
    return f"item-{j}"


def size(j: int) -> int:
    return 10 + j


def emitted_at(j: int) -> float:
    return 0.0 if j < WHOLE else float(j - WHOLE + 1)


@pytest.fixture
def compacted(monkeypatch: pytest.MonkeyPatch) -> tuple[SpanTracker, list[SequenceKey], list[int]]:
    """A tracker whose two spans (one emitted whole with items and sizes, one of one-by-one emits with a time per
    record) were compacted down to 24 pending records, some of them in failure, one a pending dead letter."""
    monkeypatch.setattr(span_mod, "COMPACT_SLACK", 0)
    keys = sparse_keys(WHOLE + ALONE, seed=8)
    tr = SpanTracker("shardId-000000000000", retry_limit=1, backoff=RetryBackoff(1.0, 1.0, 1.0),
                     message_timeout_s=TIMEOUT)
    assert tr.emit_span(keys[:WHOLE], 0.0, [item(j) for j in range(WHOLE)], [size(j) for j in range(WHOLE)])
    for j in range(WHOLE, WHOLE + ALONE):
        assert tr.emit(keys[j], emitted_at(j), item(j), size(j))
    pending = sorted(random.Random(2).sample(range(1, WHOLE + ALONE), 24))
    before = tr.retained_count
    for j in range(WHOLE + ALONE):
        if j not in pending:
            assert tr.ack(keys[j])
    assert tr.retained_count < before // 4  # compacted: each pending record and the key before it, at most
    return tr, keys, pending


def test_a_compacted_span_keeps_the_bytes_and_the_checkpoint_of_its_pending_records(
        compacted: tuple[SpanTracker, list[SequenceKey], list[int]]) -> None:
    tr, keys, pending = compacted
    assert (tr.inflight_count, tr.inflight_bytes) == (len(pending), sum(size(j) for j in pending))
    assert tr.checkpoint == keys[pending[0] - 1]
    for n, j in enumerate(pending):  # done in key order: the checkpoint follows each one
        assert tr.ack(keys[j])
        assert tr.checkpoint == (keys[pending[n + 1] - 1] if n + 1 < len(pending) else keys[-1])
    assert (tr.inflight_count, tr.inflight_bytes, tr.retained_count) == (0, 0, 0)


def test_a_compacted_span_times_out_each_pending_record_from_its_own_emission(
        compacted: tuple[SpanTracker, list[SequenceKey], list[int]]) -> None:
    tr, keys, pending = compacted
    first_due = min(emitted_at(j) for j in pending) + TIMEOUT
    assert tr.next_due(0.0) == first_due
    assert tr.expire(first_due - 0.5) == []
    for now in (TIMEOUT, TIMEOUT + 30.0, TIMEOUT + 200.0):
        due = [j for j in pending if emitted_at(j) + TIMEOUT <= now]
        expired = tr.expire(now)
        assert [key for key, _ in expired] == [keys[j] for j in due]
        assert {outcome for _, outcome in expired} <= {FailOutcome.RETRY}
        pending = [j for j in pending if j not in due]
    assert tr.stats.timed_out == 24


def test_a_compacted_span_hands_back_the_items_of_its_retries_and_dead_letters(
        compacted: tuple[SpanTracker, list[SequenceKey], list[int]]) -> None:
    tr, keys, pending = compacted
    failing, given_up = pending[::3], pending[1]
    for j in failing:
        assert tr.fail(keys[j], 10.0) is FailOutcome.RETRY
    assert tr.give_up(keys[given_up])
    assert tr.take_dead_letters() == [(keys[given_up], item(given_up), 1)]
    assert tr.next_retry(10.5) is None
    retried = [tr.next_retry(11.0) for _ in failing]
    assert retried == [(keys[j], item(j), 2) for j in failing]
    for j in failing:
        assert tr.fail(keys[j], 12.0) is FailOutcome.DEAD_LETTER
    assert tr.take_dead_letters() == [(keys[j], item(j), 2) for j in failing]
    assert tr.inflight_bytes == sum(size(j) for j in pending)
    for j in failing + [given_up]:
        assert tr.dead_letter_written(keys[j])
    left = [j for j in pending if j not in failing and j != given_up]
    assert (tr.inflight_count, tr.inflight_bytes) == (len(left), sum(size(j) for j in left))
    assert tr.checkpoint == keys[left[0] - 1]  # every record before the first left is acked or dead-lettered


def test_spans_acked_whole_but_a_few_records_are_compacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Acks of whole spans (the spout's batch acks) count towards the next look at the spans' size, as one-by-one
    acks do: three 1,000-record spans acked but 20 records each end up holding about those 60 records' keys."""
    monkeypatch.setattr(span_mod, "COMPACT_SLACK", 0)
    keys = sparse_keys(3000, seed=9)
    tr = SpanTracker("shardId-000000000000")
    spans = [tr.emit_span(keys[i:i + 1000], 0.0) for i in range(0, 3000, 1000)]
    rng = random.Random(6)
    held = [sorted(rng.sample(keys[i:i + 1000], 20)) for i in range(0, 3000, 1000)]
    for span, keep in zip(spans, held):
        assert span is not None and tr.ack_span(span, exclude=keep) == 980
    assert tr.inflight_count == 60
    assert tr.retained_count <= span_mod.COMPACT_FACTOR * 60 + 17 * span_mod.COMPACT_FACTOR  # 3,000 uncompacted
    first = keys.index(held[0][0])
    assert tr.checkpoint == (keys[first - 1] if first else None)
    # the middle span first: a compacted span that is not the first one leaves the tracker by its new first rank
    assert tr.ack_many(held[1]) == 20 and tr.span_count == 2 and tr.checkpoint == (keys[first - 1] if first else None)
    assert tr.ack_many(held[0] + held[2]) == 40 and tr.checkpoint == keys[-1]



def _spans_with_gaps(tr: SpanTracker, c_len: int, c_pending: list[int]) -> list[int]:
    """Spans A (100..104: 101 failed and waiting, 103 pending) and B (200..207: 201, 203, 205 pending), emitted whole;
    100 and 102 acked (the first look at the spans' size, which finds nothing to compact, at the 2nd record done with
    a slack of 1); then C (``c_len`` keys from 300, the offsets ``c_pending`` pending) emitted whole and every other
    record done one at a time: A's and B's, a record of C failed then acked, the rest of C's. Returns the records
    done, in order."""
    a, b, c = list(range(100, 105)), list(range(200, 208)), list(range(300, 300 + c_len))
    assert tr.emit_span(a, 0.0) is not None and tr.emit_span(b, 0.0) is not None
    assert tr.fail(101, 0.0) is FailOutcome.RETRY
    done = [100, 102]
    for key in done:
        assert tr.ack(key)
    assert tr.emit_span(c, 0.0) is not None
    rest = [k for k in c if k - 300 not in c_pending]
    assert tr.fail(rest[0], 0.0) is FailOutcome.RETRY  # done through its ack after a failure
    for key in [104, 200, 202, 204, 206, 207, *rest]:
        assert tr.ack(key)
        done.append(key)
    return done


def test_compaction_is_decided_every_17_done_records_span_by_span_at_twice_its_pending_plus_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a slack of 1 key, the spans' size is first looked at the 2nd record done, then 17 records later (16 at
    least between looks): at the 19th, 6 records pending, the 25 keys held exceed 3 x 6 + 1, so each span holding
    more than twice its pending records plus one is compacted to its pending records and their predecessors: B (8
    keys, 3 pending) to 6, C (12 keys, its first pending) to 1; A (5 keys, 2 pending, one of them failed) stays."""
    monkeypatch.setattr(span_mod, "COMPACT_SLACK", 1)
    tr = SpanTracker("shardId-000000000000", backoff=RetryBackoff(1.0, 1.0, 1.0))
    done = _spans_with_gaps(tr, 12, [0])
    assert len(done) == 19 and tr.inflight_count == 6
    assert tr.retained_count == 5 + 6 + 1
    assert tr.checkpoint == SequenceKey(0, 100)  # 101 still pending: compaction moves no checkpoint


def test_spans_holding_exactly_the_compaction_bound_are_not_compacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the 19th record done (slack 1) the spans hold 28 keys for 9 pending records: 3 x 9 + 1, not more, so
    nothing is compacted (not even C, which holds far more than its pending records)."""
    monkeypatch.setattr(span_mod, "COMPACT_SLACK", 1)
    tr = SpanTracker("shardId-000000000000", backoff=RetryBackoff(1.0, 1.0, 1.0))
    done = _spans_with_gaps(tr, 15, [0, 5, 10, 14])
    assert len(done) == 19 and tr.inflight_count == 9
    assert tr.retained_count == 5 + 8 + 15


def test_a_span_acked_down_to_exactly_the_records_left_before_the_next_look_is_not_compacted_yet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first look (the 2nd record done, slack 1) 16 more records may be done before the next: a span acked
    whole but its last two, 16 records, is left as it is; the next record done looks, and compacts it to its two
    pending records and the one before them."""
    monkeypatch.setattr(span_mod, "COMPACT_SLACK", 1)
    tr = SpanTracker("shardId-000000000000")
    span = tr.emit_span(list(range(100, 121)), 0.0)
    assert span is not None and tr.ack(100) and tr.ack(101)
    assert tr.ack_span(span, exclude=[118, 119, 120]) == 16
    assert tr.retained_count == 21
    assert tr.ack(118) and tr.retained_count == 3
