"""The span tracker of one shard: batches as one span each, splits where a record fails or is acked alone,
out-of-order acks, failures, retries and timeouts inside spans, KPL sub-sequence ranges, the original's 3x3 ack
cases and its three bugs, compaction, and the spans a caller may no longer ack. Pure: no server, no clock."""

from __future__ import annotations

import random

import pytest

import kinesis_spout.tracking.span as span_mod
from kinesis_spout.errors import ConfigError
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, RetryBackoff
from kinesis_spout.tracking.spans import SpanTracker

from .keys import BASE, K0, A, B, C, D, sparse_keys

NO_WAIT = RetryBackoff(0.0, 1.0, 0.0)


def tracker(**kwargs: object) -> SpanTracker:
    return SpanTracker("shardId-000000000000", **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the original's 3x3 ack cases

ACK_TABLE = {  # (previous neighbour, next neighbour) of B -> (checkpoint after B's ack, records left in flight)
    ("none", "none"): (B, 0),
    ("none", "pending"): (B, 1),
    ("none", "acked"): (C, 0),
    ("pending", "none"): ("initial", 1),
    ("pending", "pending"): ("initial", 2),
    ("pending", "acked"): ("initial", 1),
    ("acked", "none"): (B, 0),
    ("acked", "pending"): (B, 1),
    ("acked", "acked"): (C, 0),
}


@pytest.mark.parametrize("as_span", [False, True], ids=["one-by-one", "one-span"])
@pytest.mark.parametrize("initial", [None, K0], ids=["no-initial", "initial"])
@pytest.mark.parametrize(("prev", "nxt"), list(ACK_TABLE), ids=[f"prev-{p}-next-{n}" for p, n in ACK_TABLE])
def test_ack_with_neighbours(prev: str, nxt: str, initial: SequenceKey | None, as_span: bool) -> None:
    """The original tracker's table: ack the middle record B with its neighbours A and C in each state, the three
    emitted one by one or as one span (then every ack splits the span)."""
    tr = tracker(checkpoint=initial)
    keys = ([A] if prev != "none" else []) + [B] + ([C] if nxt != "none" else [])
    if as_span:
        span = tr.emit_span(keys, 0.0)
        assert span is not None and tr.span_count == 1
    else:
        for key in keys:
            assert tr.emit(key, 0.0)
    if prev == "acked":
        assert tr.ack(A)
        assert tr.checkpoint == A
    if nxt == "acked":
        assert tr.ack(C)
        assert tr.checkpoint == (A if prev == "acked" else initial)
    assert tr.ack(B)
    checkpoint, remaining = ACK_TABLE[prev, nxt]
    assert tr.checkpoint == (initial if checkpoint == "initial" else checkpoint)
    assert tr.inflight_count == remaining
    tr.ack_many([A, C])
    assert tr.inflight_count == 0 and tr.span_count == 0
    assert tr.checkpoint == keys[-1]


def test_retry_limit_zero_still_tracks_and_checkpoints() -> None:
    """The original tracked nothing with recordRetryLimit = 0; here the first failure dead-letters."""
    tr = tracker(retry_limit=0)
    tr.emit_span([A, B, C], 0.0, items=["a", "b", "c"])
    assert tr.fail(B, 0.0) is FailOutcome.DEAD_LETTER
    assert tr.take_dead_letters() == [(B, "b", 1)]
    tr.ack_many([A, C])
    assert tr.checkpoint == A
    assert tr.dead_letter_written(B)
    assert tr.checkpoint == C


def test_fail_then_ack_before_its_retry_leaves_nothing_to_stall_the_shard() -> None:
    """The original kept a stale retry-queue entry for a record failed and then acked before its retry."""
    tr = tracker(backoff=NO_WAIT)
    span = tr.emit_span([A, B, C], 0.0)
    assert tr.fail(B, 0.0) is FailOutcome.RETRY
    assert tr.ack(B)
    assert tr.retry_queue_len == 0 and tr.next_retry(5.0) is None and not tr.has_due_retry(5.0)
    assert span is not None and tr.ack_span(span) == 2
    assert tr.checkpoint == C and tr.inflight_count == 0


def test_acking_the_tail_keeps_later_emits_right() -> None:
    """The original reset its tail pointer when the tail node was removed even with a predecessor."""
    tr = tracker()
    tr.emit_span([A, B], 0.0)
    assert tr.ack(B)
    assert tr.emit(C, 0.0) and tr.emit(D, 0.0)
    assert tr.ack(C) and tr.ack(A)
    assert tr.checkpoint == C
    assert tr.ack(D) and tr.checkpoint == D


# ------------------------------------------------------------------ spans

def test_a_batch_is_one_span_acked_whole() -> None:
    keys = sparse_keys(10_000, seed=3)
    tr = tracker(checkpoint=K0)
    span = tr.emit_span([k.rank for k in keys], 0.0, sizes=[10] * len(keys))
    assert span is not None and tr.span_count == 1 and len(span) == 10_000
    assert (span.first_key, span.last_key, span.pending) == (keys[0], keys[-1], 10_000)
    assert tr.inflight_bytes == 100_000 and tr.checkpoint == K0
    assert tr.ack_span(span) == 10_000
    assert tr.checkpoint == keys[-1]
    assert (tr.inflight_count, tr.inflight_bytes, tr.span_count, tr.retained_count) == (0, 0, 0, 0)
    assert tr.stats.acked == 10_000
    assert tr.ack_span(span) == 0 and span.first_key is None  # a done span acks nothing more


def test_out_of_order_span_acks_move_the_checkpoint_only_past_contiguous_done_spans() -> None:
    keys = sparse_keys(9, seed=1)
    tr = tracker()
    spans = [tr.emit_span(keys[i:i + 3], float(i)) for i in (0, 3, 6)]
    assert tr.span_count == 3
    assert tr.ack_span(spans[2]) == 3  # type: ignore[arg-type]
    assert tr.checkpoint is None
    assert tr.ack_span(spans[0]) == 3  # type: ignore[arg-type]
    assert tr.checkpoint == keys[2]
    assert tr.ack(keys[4]) and tr.checkpoint == keys[2]  # acked alone inside the middle span
    assert tr.ack_span(spans[1]) == 2  # type: ignore[arg-type]
    assert tr.checkpoint == keys[8]


@pytest.mark.parametrize("where", [0, 1, 4, 8, 9])
def test_a_record_acked_alone_splits_its_span_at_exactly_that_record(where: int) -> None:
    """Records on both sides of the split stay in flight; the checkpoint stops just before the first of them."""
    keys = sparse_keys(10, seed=5)
    tr = tracker(checkpoint=K0)
    span = tr.emit_span(keys, 0.0)
    assert tr.ack(keys[where])
    assert not tr.ack(keys[where])  # acked once only
    assert tr.checkpoint == (keys[0] if where == 0 else K0)
    assert tr.inflight_count == 9
    for i in range(where):  # the records before the split, in order
        assert tr.ack(keys[i])
        assert tr.checkpoint == keys[i + 1 if i + 1 == where else i]
    assert span is not None and tr.ack_span(span) == 9 - where
    assert tr.checkpoint == keys[9]


@pytest.mark.parametrize("where", [0, 1, 5, 9])
def test_a_failed_record_inside_a_span_holds_the_checkpoint_until_its_retry_is_acked(where: int) -> None:
    keys = sparse_keys(10, seed=6)
    tr = tracker(checkpoint=K0, backoff=RetryBackoff(1.0, 2.0, 10.0))
    span = tr.emit_span(keys, 0.0, items=[f"r{i}" for i in range(10)])
    assert span is not None
    assert tr.fail(keys[where], 0.0) is FailOutcome.RETRY
    assert tr.ack_span(span) == 9  # the whole span but the failed record
    assert tr.inflight_count == 1 and tr.span_count == 1
    assert tr.checkpoint == (K0 if where == 0 else keys[where - 1])  # never past the failed record
    assert tr.next_retry(0.5) is None  # not due yet
    assert tr.next_retry(1.0) == (keys[where], f"r{where}", 2)
    assert tr.ack_span(span) == 0  # a whole-span ack never acks a retried record
    assert tr.checkpoint == (K0 if where == 0 else keys[where - 1])
    assert tr.ack(keys[where])
    assert tr.checkpoint == keys[9] and tr.span_count == 0


def test_ack_span_except_leaves_the_excluded_records_in_flight() -> None:
    keys, above = sparse_keys(7, seed=7)[:6], sparse_keys(7, seed=7)[6]
    tr = tracker()
    span = tr.emit_span(keys, 0.0, sizes=[1, 2, 4, 8, 16, 32])
    assert span is not None
    # A (below the span) and ``above`` (past its last record) are not in the span: ignored
    assert tr.ack_span(span, exclude=[keys[1], keys[4].rank, A, above]) == 4
    assert tr.inflight_count == 2 and tr.inflight_bytes == 2 + 16
    assert tr.checkpoint == keys[0]
    assert tr.fail(keys[1], 0.0) is FailOutcome.RETRY  # still in its first emission: it can fail
    assert tr.ack_span(span) == 1  # keys[4]
    assert tr.checkpoint == keys[0] and tr.inflight_bytes == 2


def test_failures_in_a_span_go_out_in_due_order_and_dead_letter_after_the_retry_limit() -> None:
    keys = sparse_keys(5, seed=8)
    tr = tracker(retry_limit=1, backoff=RetryBackoff(1.0, 2.0, 10.0), message_timeout_s=None)
    span = tr.emit_span(keys, 0.0, items=list("abcde"))
    assert span is not None
    assert tr.fail(keys[3], 0.0) is FailOutcome.RETRY
    assert tr.fail(keys[1], 0.5) is FailOutcome.RETRY
    assert tr.fail(keys[1], 0.5) is FailOutcome.UNKNOWN  # waiting for its retry
    assert tr.next_retry(1.2) == (keys[3], "d", 2)
    assert tr.next_retry(1.5) == (keys[1], "b", 2)
    assert tr.fail(keys[3], 2.0) is FailOutcome.DEAD_LETTER
    assert tr.take_dead_letters() == [(keys[3], "d", 2)]
    assert not tr.ack(keys[3])  # a pending dead letter is done only once written
    assert tr.ack_span(span) == 3 and tr.ack(keys[1])
    assert tr.checkpoint == keys[2]
    assert tr.dead_letter_written(keys[3]) and tr.checkpoint == keys[4]


def test_timeouts_inside_spans_fail_only_the_overdue_records_in_their_first_emission() -> None:
    keys = sparse_keys(8, seed=9)
    tr = tracker(message_timeout_s=10.0, backoff=RetryBackoff(1.0, 2.0, 10.0))
    first = tr.emit_span(keys[:4], 0.0)
    second = tr.emit_span(keys[4:], 5.0)
    assert first is not None and second is not None
    assert tr.ack(keys[1])  # done: never times out
    assert tr.fail(keys[2], 1.0) is FailOutcome.RETRY  # waiting: does not time out
    assert tr.next_due(0.0) == 2.0  # keys[2]'s retry (failed at 1.0, 1 s backoff)
    assert tr.expire(9.9) == []
    assert tr.expire(10.0) == [(keys[0], FailOutcome.RETRY), (keys[3], FailOutcome.RETRY)]
    assert tr.expire(10.0) == []
    assert tr.next_due(10.0) == 0.0  # the retries are due
    assert tr.stats.timed_out == 2
    assert tr.expire(15.0) == [(k, FailOutcome.RETRY) for k in keys[4:]]  # the second span, whole
    assert tr.ack_span(second) == 0 and tr.inflight_count == 7


def test_re_emitted_records_time_out_from_their_re_emission() -> None:
    tr = tracker(message_timeout_s=3.0, backoff=RetryBackoff(1.0, 2.0, 10.0))
    tr.emit_span([A, B], 0.0)
    assert tr.fail(B, 0.0) is FailOutcome.RETRY
    assert tr.next_retry(1.0) == (B, None, 2)
    assert tr.expire(3.0) == [(A, FailOutcome.RETRY)]
    assert tr.expire(3.9) == []
    assert tr.expire(4.0) == [(B, FailOutcome.RETRY)]


def test_kpl_user_records_are_a_sub_sequence_range_within_a_span() -> None:
    """An aggregate's user records (one sequence number, sub-sequences 0..n) sit between plain records in one
    span; acks and failures of single user records split it, and the checkpoint lands on sub-sequence keys."""
    agg = [SequenceKey(B.sequence, sub) for sub in range(4)]
    keys = [A, *agg, C]
    tr = tracker(checkpoint=K0)
    span = tr.emit_span(keys, 0.0)
    assert span is not None and tr.span_count == 1
    assert tr.fail(agg[2], 0.0) is FailOutcome.RETRY
    assert tr.ack(agg[0].rank) and tr.ack(A)
    assert tr.checkpoint == agg[0]
    assert tr.ack_span(span) == 3  # agg[1], agg[3], C
    assert tr.checkpoint == agg[1]  # just before the failed user record
    assert tr.ack(agg[2]) and tr.checkpoint == C


def test_one_by_one_emits_share_an_open_span_and_replays_are_ignored() -> None:
    keys = sparse_keys(5, seed=10)
    tr = tracker()
    for i, key in enumerate(keys):
        assert tr.emit(key, float(i), item=i, size=3)
    assert tr.span_count == 1 and tr.inflight_bytes == 15
    assert not tr.emit(keys[2], 9.0) and tr.emit_span(keys[:3], 9.0) is None
    assert tr.stats.duplicates_ignored == 4
    assert tr.emit_many([keys[4], SequenceKey(keys[4].sequence + 1)], 9.0) == 1  # a replay prefix, then a new record
    assert tr.span_count == 2
    assert tr.expire(30.0) == [(keys[0], FailOutcome.RETRY)]  # emitted at 0.0; the next at 1.0


def test_an_open_span_takes_open_span_limit_one_by_one_emits_and_the_next_starts_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_mod, "OPEN_SPAN_LIMIT", 3)
    keys = sparse_keys(7, seed=12)
    tr = tracker()
    counts = []
    for i, key in enumerate(keys):
        assert tr.emit(key, float(i))
        counts.append(tr.span_count)
    assert counts == [1, 1, 1, 2, 2, 2, 3]
    assert tr.ack_many(keys[:3]) == 3 and (tr.span_count, tr.checkpoint) == (2, keys[2])  # the first span dropped


def test_memory_follows_pending_records_after_random_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_mod, "COMPACT_SLACK", 0)
    keys = sparse_keys(3000, seed=11)
    tr = tracker()
    spans = [tr.emit_span(keys[i:i + 1000], 0.0) for i in range(0, 3000, 1000)]
    rng = random.Random(4)
    order = list(keys)
    rng.shuffle(order)
    for n, key in enumerate(order[:2900], 1):
        assert tr.ack(key)
        assert tr.retained_count <= span_mod.COMPACT_FACTOR * (3000 - n) + 17 * span_mod.COMPACT_FACTOR
    left = sorted(order[2900:])
    assert tr.checkpoint == keys[keys.index(left[0]) - 1]
    assert sum(tr.ack_span(s) for s in spans if s is not None) == 100
    assert tr.checkpoint == keys[-1] and tr.retained_count == 0


def test_a_span_of_another_tracker_acks_nothing() -> None:
    one, two = tracker(), tracker()
    span = one.emit_span([A, B], 0.0)
    two.emit_span([A, B], 0.0)
    assert span is not None and two.ack_span(span) == 0 and two.inflight_count == 2


def test_bad_batches_and_settings_are_refused_naming_the_problem() -> None:
    tr = tracker()
    with pytest.raises(ValueError, match="^emit_span needs strictly increasing keys"):
        tr.emit_span([B, A], 0.0)
    with pytest.raises(ValueError, match=r"^emit_span needs as many items and sizes as keys \(2\), got None and 1$"):
        tr.emit_span([A, B], 0.0, sizes=[1])
    with pytest.raises(ValueError, match="^emit_many needs strictly increasing keys"):
        tr.emit_many([B, A], 0.0)
    assert tr.inflight_count == 0
    with pytest.raises(ConfigError, match="retry_limit"):
        tracker(retry_limit=-1)
    with pytest.raises(ConfigError, match="message_timeout_s"):
        tracker(message_timeout_s=0.0)
    assert SpanTracker("s", checkpoint=SequenceKey(BASE)).checkpoint == SequenceKey(BASE)


def test_the_default_backoff_doubles_from_a_tenth_of_a_second_up_to_ten_seconds() -> None:
    keys = sparse_keys(1, seed=13)
    tr = SpanTracker("shardId-000000000000", retry_limit=20, message_timeout_s=None)
    assert tr.emit(keys[0], 0.0)
    now, delays = 0.0, []
    for _ in range(9):
        assert tr.fail(keys[0], now) is FailOutcome.RETRY
        delay = tr.next_due(now)
        assert delay is not None
        delays.append(round(delay, 6))
        now += delay
        assert tr.next_retry(now) is not None
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0]


def test_a_run_of_keys_given_partly_as_ranks_and_partly_as_sequence_keys_is_one_span() -> None:
    keys = sparse_keys(7, seed=14)
    tr = tracker()
    mixed = [keys[0].rank, keys[1], keys[2], keys[3].rank]  # ranks at both ends, keys inside
    assert tr.emit_many(mixed, 0.0) == 0 and (tr.span_count, tr.inflight_count) == (1, 4)
    with pytest.raises(ValueError, match="strictly increasing"):
        tr.emit_many([keys[6].rank, keys[5], keys[4].rank], 0.0)
    assert tr.ack_many(keys[:4]) == 4 and tr.checkpoint == keys[3]


def test_ack_many_of_a_span_s_records_with_gaps_acks_exactly_those() -> None:
    keys = sparse_keys(3, seed=15)
    tr = tracker()
    assert tr.emit_span(keys, 0.0) is not None
    assert tr.ack_many([keys[0].rank, keys[2].rank]) == 2  # the run of the span's records breaks after the first
    assert (tr.inflight_count, tr.checkpoint) == (1, keys[0])
    assert tr.ack(keys[1]) and tr.checkpoint == keys[2]


def test_ack_many_of_records_out_of_order_after_an_ack_alone_acks_exactly_those() -> None:
    """After an ack alone the next record is where ack_many looks first: keys given out of order from there are
    acked as given, none skipped and none taken for another."""
    keys = sparse_keys(5, seed=17)
    tr = tracker()
    assert tr.emit_span(keys, 0.0) is not None and tr.ack(keys[0])
    assert tr.ack_many([keys[1].rank, keys[4].rank, keys[2].rank]) == 3
    assert (tr.inflight_count, tr.checkpoint) == (1, keys[2])  # keys[3] alone in flight
    assert tr.ack(keys[3]) and (tr.inflight_count, tr.checkpoint) == (0, keys[4])


def test_ack_many_of_records_in_order_after_an_unknown_ack_inside_their_span_acks_them() -> None:
    """An ack of a key that falls inside a span but is none of its records (a stale or made-up message id) leaves
    that span where ack_many looks first, with no record of it done yet."""
    keys = sparse_keys(4, seed=18)
    tr = tracker()
    assert tr.emit_span([keys[0], keys[2], keys[3]], 0.0) is not None
    assert not tr.ack(keys[1]) and tr.stats.unknown_acks == 1
    assert tr.ack_many([keys[0].rank, keys[2].rank, keys[3].rank]) == 3
    assert (tr.inflight_count, tr.checkpoint) == (0, keys[3])


def test_ack_many_of_a_run_holding_a_record_waiting_for_its_retry_takes_it_off_the_retry_queue() -> None:
    keys = sparse_keys(8, seed=20)
    tr = tracker(backoff=NO_WAIT)
    span = tr.emit_span(keys[:7], 0.0)
    assert span is not None and tr.ack_span(span, exclude=keys[:4]) == 3  # e, f, g done; a, b, c, d in flight
    assert tr.fail(keys[2], 0.0) is FailOutcome.RETRY and tr.retry_queue_len == 1
    assert not tr.ack(keys[1].rank + 1)  # no record: the span is where ack_many looks first, at its start
    assert tr.ack_many([keys[0].rank, keys[1].rank, keys[2].rank]) == 3
    assert (tr.inflight_count, tr.retry_queue_len, tr.checkpoint) == (1, 0, keys[2])
    assert tr.next_retry(10.0) is None


def test_ack_many_of_a_run_broken_by_one_key_acks_the_run_then_the_others_alone() -> None:
    keys = sparse_keys(6, seed=19)
    tr = tracker()
    assert tr.emit_span(keys, 0.0) is not None and tr.ack(keys[0])
    assert tr.ack_many([keys[1].rank, keys[2].rank, keys[5].rank, keys[4].rank]) == 4
    assert (tr.inflight_count, tr.checkpoint) == (1, keys[2])  # keys[3] alone in flight
    assert tr.ack(keys[3]) and tr.checkpoint == keys[5]


def test_the_next_timeout_is_that_of_the_oldest_record_still_in_its_first_emission() -> None:
    keys = sparse_keys(2, seed=16)
    tr = tracker(message_timeout_s=30.0)
    assert tr.emit(keys[0], 0.0) and tr.emit(keys[1], 10.0)  # one open span, a time per record
    assert tr.ack(keys[0])
    assert tr.next_due(10.0) == 30.0  # keys[1]'s, emitted at 10.0, not the done keys[0]'s
    assert tr.expire(39.0) == [] and tr.expire(40.0) == [(keys[1], FailOutcome.RETRY)]
