"""Table and example tests of the pure per-shard InflightRecordTracker (no server, no clock, no sleep)."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

import pytest

from kinesis_spout.errors import ConfigError
from kinesis_spout.records import WHOLE, SequenceKey
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff
from kinesis_spout.tracking.inflight import COMPACT_FACTOR, COMPACT_SLACK

# A real Kinesis sequence number (56 digits); the keys below are sparse, with large gaps.
BASE = 49590338271490256608559692538361571095921575989136588898
K0 = SequenceKey(BASE)
A = SequenceKey(BASE + 10**20 + 17)
B = SequenceKey(BASE + 3 * 10**21 + 5)
C = SequenceKey(BASE + 7 * 10**24 + 1)
D = SequenceKey(BASE + 9 * 10**25 + 3)
T = TypeVar("T")


def sparse_keys(n: int, seed: int = 0, start: int = BASE) -> list[SequenceKey]:
    rng = random.Random(seed)
    keys, seq = [], start
    for _ in range(n):
        seq += rng.randint(1, 10**30)
        keys.append(SequenceKey(seq))
    return keys


# ------------------------------------------------------------------ the original's 3x3 ack cases

# (previous neighbour A, next neighbour C) -> (checkpoint after acking B, records left in flight).
# "initial" stands for the initial checkpoint (None or K0).
ACK_TABLE = {
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


@pytest.mark.parametrize("initial", [None, K0], ids=["no-initial", "initial"])
@pytest.mark.parametrize(("prev", "nxt"), list(ACK_TABLE), ids=[f"prev-{p}-next-{n}" for p, n in ACK_TABLE])
def test_ack_with_neighbours(prev: str, nxt: str, initial: SequenceKey | None) -> None:
    """Ack the middle record B with its previous neighbour A and next neighbour C in each state."""
    tr = InflightRecordTracker("shardId-000000000000", checkpoint=initial)
    if prev != "none":
        assert tr.emit(A, 0.0)
    assert tr.emit(B, 0.0)
    if nxt != "none":
        assert tr.emit(C, 0.0)
    if prev == "acked":
        assert tr.ack(A)
        assert tr.checkpoint == A
    if nxt == "acked":
        assert tr.ack(C)
        assert tr.checkpoint == (A if prev == "acked" else initial)  # B still pends

    assert tr.ack(B)

    checkpoint, remaining = ACK_TABLE[prev, nxt]
    assert tr.checkpoint == (initial if checkpoint == "initial" else checkpoint)
    assert tr.inflight_count == remaining
    # Finishing everything moves the checkpoint to the last emitted key.
    for key in (A, C):
        tr.ack(key)
    assert tr.inflight_count == 0
    assert tr.checkpoint == (C if nxt != "none" else B)


def test_nothing_emitted_checkpoint_is_initial() -> None:
    assert InflightRecordTracker("s").checkpoint is None
    assert InflightRecordTracker("s", checkpoint=K0).checkpoint == K0


def test_out_of_order_acks_checkpoint_moves_only_past_contiguous_done_records() -> None:
    keys = sparse_keys(6, seed=1)
    tr = InflightRecordTracker("s")
    for k in keys:
        tr.emit(k, 0.0)
    history = []
    for idx in (3, 1, 4, 0, 5, 2):
        tr.ack(keys[idx])
        history.append(tr.checkpoint)
    assert history == [None, None, None, keys[1], keys[1], keys[5]]


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


def test_removing_the_tail_keeps_the_structure_intact() -> None:
    tr = InflightRecordTracker("s")
    for k in (A, B, C):
        tr.emit(k, 0.0)
    tr.ack(C)  # the tail, which has a predecessor
    tr.emit(D, 0.0)
    tr.ack(B)
    tr.ack(A)
    assert tr.checkpoint == C
    tr.ack(D)
    assert tr.checkpoint == D
    assert tr.inflight_count == 0


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


@pytest.mark.parametrize("kwargs", [{"retry_limit": -1}, {"message_timeout_s": 0.0}, {"message_timeout_s": -5.0}])
def test_tracker_rejects_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        InflightRecordTracker("s", **kwargs)  # type: ignore[arg-type]


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


# ------------------------------------------------------------------ duplicates, unknown keys, counters


def test_duplicates_and_unknown_keys_are_counted_and_ignored() -> None:
    tr = InflightRecordTracker("s")
    assert tr.emit(B, 0.0, size=5)
    assert tr.emit(B, 0.0, size=5) is False
    assert tr.emit(A, 0.0, size=5) is False  # below the greatest emitted key: a replay
    assert tr.inflight_count == 1 and tr.inflight_bytes == 5
    assert tr.ack(C) is False
    assert tr.fail(C, 0.0) is FailOutcome.UNKNOWN
    assert tr.ack(B)
    assert tr.ack(B) is False
    s = tr.stats
    assert (s.emitted, s.duplicates_ignored, s.acked, s.unknown_acks, s.unknown_fails) == (1, 2, 1, 2, 1)
    assert tr.checkpoint == B and tr.inflight_bytes == 0


def test_initial_checkpoint_respected() -> None:
    tr = InflightRecordTracker("s", checkpoint=B)
    assert tr.checkpoint == B
    assert tr.emit(A, 0.0) is False
    assert tr.emit(B, 0.0) is False
    assert tr.emit(C, 0.0)
    assert tr.checkpoint == B
    tr.ack(C)
    assert tr.checkpoint == C


def test_sparse_56_digit_keys_compare_as_ints() -> None:
    nines = SequenceKey(10**56 - 1)  # as strings, "1000..." (57 digits) sorts before "999..." (56 digits)
    tr = InflightRecordTracker("s", checkpoint=SequenceKey(BASE))
    assert tr.emit(nines, 0.0)
    assert tr.emit(SequenceKey(10**56), 0.0)
    assert tr.emit(SequenceKey(10**56 + 1), 0.0)
    tr.ack(SequenceKey(10**56))
    assert tr.checkpoint == SequenceKey(BASE)
    tr.ack(nines)
    assert tr.checkpoint == SequenceKey(10**56)


def test_random_sparse_keys_with_big_gaps() -> None:
    keys = sparse_keys(500, seed=7)
    tr = InflightRecordTracker("s", checkpoint=K0)
    for k in keys:
        assert tr.emit(k, 0.0)
    order = list(range(500))
    random.Random(3).shuffle(order)
    done: set[int] = set()
    for idx in order:
        tr.ack(keys[idx])
        done.add(idx)
        n = 0
        while n in done:
            n += 1
        assert tr.checkpoint == (keys[n - 1] if n else K0)


def test_kpl_sub_sequence_keys() -> None:
    s = BASE + 12345
    k1, k2, k3 = SequenceKey(s, 1), SequenceKey(s, 2), SequenceKey(s, 3)
    nxt = SequenceKey(s + 10**22, 0)
    tr = InflightRecordTracker("s", checkpoint=SequenceKey(s - 10**20))
    for k in (k1, k2, k3):
        assert tr.emit(k, 0.0)
    assert tr.emit(SequenceKey(s, 2), 0.0) is False
    assert tr.emit(nxt, 0.0)
    tr.ack(k2)
    assert tr.checkpoint == SequenceKey(s - 10**20)
    tr.ack(k1)
    assert tr.checkpoint == k2
    tr.ack(nxt)
    assert tr.checkpoint == k2
    tr.ack(k3)
    assert tr.checkpoint == nxt


# ------------------------------------------------------------------ memory follows what is pending


def test_acked_runs_do_not_accumulate() -> None:
    keys = sparse_keys(100_000, seed=11)
    tr = InflightRecordTracker("s")
    for k in keys:
        tr.emit(k, 0.0)
        if k is not keys[0]:
            tr.ack(k)
    assert tr.inflight_count == 1
    assert tr.retained_count < 2_000
    assert tr.checkpoint is None
    assert (tr.stats.emitted, tr.stats.acked) == (100_000, 99_999)
    tr.ack(keys[0])
    assert tr.checkpoint == keys[-1]
    assert tr.retained_count < 2_000
    assert (tr.stats.emitted, tr.stats.acked) == (100_000, 100_000)


def test_in_order_acks_without_reading_the_checkpoint() -> None:
    keys = sparse_keys(5_000, seed=17)
    tr = InflightRecordTracker("s")
    for k in keys:
        tr.emit(k, 0.0)
        tr.ack(k)
    assert tr.retained_count < 2_000
    assert tr.checkpoint == keys[-1]


def test_compaction_keeps_checkpoints_and_timeouts_right() -> None:
    """Many records with every 30th pending: compaction must keep each pending key's predecessor and the
    timeout cursor."""
    keys = sparse_keys(9_000, seed=5)
    tr = InflightRecordTracker("s", message_timeout_s=100.0)
    for i, k in enumerate(keys):
        tr.emit(k, float(i // 1000))
    assert tr.next_due(0.0) == 100.0  # puts the timeout cursor on keys[0]
    tr.ack(keys[0])
    for i, k in enumerate(keys):
        if i % 30:
            tr.ack(k)
    assert tr.inflight_count == 299
    assert 2 * tr.retained_count <= COMPACT_FACTOR * 299 + 2 * COMPACT_SLACK  # compacted (9,001 otherwise)
    assert tr.checkpoint == keys[29]
    expired = tr.expire(101.0)  # those emitted at 0 and 1
    assert [k for k, _ in expired] == [k for i, k in enumerate(keys) if i % 30 == 0 and 0 < i < 2000]
    assert tr.next_due(101.0) == pytest.approx(0.1)  # the first retry
    for i in range(30, 9_000, 30):
        tr.ack(keys[i])
        assert tr.checkpoint == keys[i + 29]
    assert tr.retry_queue_len == 0 and tr.inflight_count == 0


@pytest.mark.parametrize("finish", ["ack", "dead_letter"])
def test_compaction_keeps_the_acked_tail(finish: str) -> None:
    """The last emitted key, acked before a compaction, is still the checkpoint once the rest is done."""
    keys = sparse_keys(2_000, seed=13)
    tr = InflightRecordTracker("s", retry_limit=0)
    for k in keys:
        tr.emit(k, 0.0)
    tr.ack(keys[-1])
    for k in keys[1:-1]:
        tr.ack(k)
    assert tr.retained_count < 1_000  # a compaction ran after the tail was acked
    assert tr.checkpoint is None
    if finish == "ack":
        tr.ack(keys[0])
    else:
        assert tr.fail(keys[0], 1.0) is FailOutcome.DEAD_LETTER
        assert tr.checkpoint is None
        assert tr.dead_letter_written(keys[0])
    assert tr.checkpoint == keys[-1]


def test_compaction_with_nothing_pending_keeps_the_last_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kinesis_spout.tracking.inflight.COMPACT_SLACK", 0)
    tr = InflightRecordTracker("s", retry_limit=0, message_timeout_s=None)
    for k in (A, B, C):
        tr.emit(k, 0.0)
    tr.ack(A)
    tr.ack(C)
    assert tr.fail(B, 0.0) is FailOutcome.DEAD_LETTER
    assert tr.checkpoint == A
    assert tr.dead_letter_written(B)
    assert tr.checkpoint == C
    tr.emit(D, 1.0)
    assert tr.checkpoint == C
    tr.ack(D)
    assert tr.checkpoint == D


# ------------------------------------------------------------------ ranks, batches


def test_ranks_and_sequence_keys_are_the_same_keys() -> None:
    """Keys may be passed as SequenceKey or as their rank, mixed; keys handed back are SequenceKeys."""
    tr = InflightRecordTracker("s", retry_limit=1, backoff=RetryBackoff(0.0, 1.0, 0.0), message_timeout_s=5.0,
                               checkpoint=K0.rank)  # type: ignore[arg-type]
    assert tr.checkpoint == K0 and isinstance(tr.checkpoint, SequenceKey)
    assert tr.emit(A.rank, 0.0, item="a", size=1)
    assert tr.emit(A, 0.0) is False and tr.emit(K0.rank, 0.0) is False  # replays, in either form
    assert tr.emit(B, 0.0, item="b", size=2) and tr.emit(C.rank, 0.0, item="c", size=4)
    assert tr.fail(B.rank, 1.0) is FailOutcome.RETRY
    got = tr.next_retry(1.0)
    assert got == (B, "b", 2) and isinstance(got[0], SequenceKey)
    assert tr.ack(A) and tr.checkpoint == A
    assert tr.expire(6.0) == [(B, FailOutcome.DEAD_LETTER), (C, FailOutcome.RETRY)]
    assert tr.take_dead_letters() == [(B, "b", 2)]
    assert tr.ack(C.rank) and tr.inflight_bytes == 2 and tr.checkpoint == A
    assert tr.dead_letter_written(B.rank) and tr.checkpoint == C and tr.inflight_count == 0


def test_kpl_keys_as_ranks_order_inside_their_record() -> None:
    """A checkpoint after a whole KPL record (sub-sequence WHOLE) stands after all its user records."""
    s = BASE + 12345
    tr = InflightRecordTracker("s", checkpoint=SequenceKey(s, WHOLE))
    assert tr.emit(SequenceKey(s, 7).rank, 0.0) is False  # a user record of the consumed aggregate
    assert tr.emit(SequenceKey(s + 1, 0).rank, 0.0)
    assert tr.emit(SequenceKey(s + 1, 1).rank, 0.0) and tr.emit(SequenceKey(s + 1, 2), 0.0)
    assert tr.ack(SequenceKey(s + 1, 1).rank) and tr.checkpoint == SequenceKey(s, WHOLE)
    assert tr.ack(SequenceKey(s + 1, 0)) and tr.checkpoint == SequenceKey(s + 1, 1)


@pytest.mark.parametrize(("key", "error", "message"), [
    ("49590338271490256608559692538361571095921575989136588898", TypeError, "SequenceKey or its rank"),
    (None, TypeError, "SequenceKey or its rank"),
    (SequenceKey(BASE, 1 << 64), ValueError, "sub-sequence number in 0 .. 2\\*\\*64 - 1"),
    (SequenceKey(-1, 0), ValueError, "sequence number must be >= 0"),
])
def test_bad_keys_are_refused_naming_the_problem(key: object, error: type[Exception], message: str) -> None:
    tr = InflightRecordTracker("s")
    for call in (lambda: tr.emit(key, 0.0), lambda: tr.ack(key), lambda: tr.fail(key, 0.0),  # type: ignore[arg-type]
                 lambda: tr.give_up(key), lambda: tr.dead_letter_written(key)):  # type: ignore[arg-type]
        with pytest.raises(error, match=message):
            call()
    assert tr.inflight_count == 0 and tr.stats.emitted == 0


def test_emit_many_is_emit_for_each_key() -> None:
    keys = sparse_keys(6, seed=21)
    ranks = [k.rank for k in keys]
    tr = InflightRecordTracker("s")
    assert tr.emit_many(ranks[:2], 0.0, ["i0", "i1"], [1, 2]) == 0
    assert tr.emit_many(ranks[:4], 1.0, ["x", "x", "i2", "i3"], [9, 9, 3, 4]) == 2  # a replayed prefix
    assert tr.emit_many(keys[3:5], 2.0) == 1  # SequenceKeys: no items, size 0
    assert tr.emit_many(ranks[:5], 3.0) == 5 and tr.emit_many([], 3.0) == 0
    s = tr.stats
    assert (s.emitted, s.duplicates_ignored, tr.inflight_count, tr.inflight_bytes) == (5, 8, 5, 10)
    tr.fail(ranks[2], 4.0)
    assert tr.next_retry(5.0) == (keys[2], "i2", 2)
    assert tr.next_due(6.0) == 24.0  # the first emission at 0.0 times out at 30.0
    assert tr.expire(31.0) == [(k, FailOutcome.RETRY) for k in (keys[0], keys[1], keys[3])]
    assert tr.expire(32.0) == [(keys[4], FailOutcome.RETRY)]  # emitted at 2.0
    assert tr.ack_many(ranks[:5]) == 5 and tr.checkpoint == keys[4] and tr.inflight_bytes == 0
    assert tr.emit_many(ranks[5:], 40.0, ["i5"], [5]) == 0 and tr.checkpoint == keys[4]


def test_emit_many_refuses_bad_batches_and_emits_nothing() -> None:
    a, b, c = (k.rank for k in sparse_keys(3, seed=22))
    tr = InflightRecordTracker("s")
    with pytest.raises(ValueError, match="strictly increasing keys"):
        tr.emit_many([a, c, b], 0.0)
    with pytest.raises(ValueError, match="strictly increasing keys"):
        tr.emit_many([a, a], 0.0)
    with pytest.raises(ValueError, match=r"as many items and sizes as keys \(2\), got 1 and None"):
        tr.emit_many([a, b], 0.0, ["one"])
    with pytest.raises(ValueError, match="strictly increasing keys"):
        tr.emit_many([a, SequenceKey.from_rank(c), b], 0.0)  # the forms may mix
    with pytest.raises(TypeError, match="a key is a SequenceKey or its rank"):
        tr.emit_many([a, str(b), c], 0.0)
    assert tr.inflight_count == 0 and tr.stats.emitted == 0 and tr.stats.duplicates_ignored == 0
    assert tr.emit_many([a, SequenceKey.from_rank(b), c], 0.0) == 0 and tr.checkpoint is None
    assert tr.ack_many([SequenceKey.from_rank(a), b, c]) == 3 and tr.checkpoint == SequenceKey.from_rank(c)


def test_ack_many_is_ack_for_each_key() -> None:
    keys = sparse_keys(5, seed=23)
    ranks = [k.rank for k in keys]
    tr = InflightRecordTracker("s", backoff=RetryBackoff(1.0, 1.0, 1.0), message_timeout_s=None)
    tr.emit_many(ranks, 0.0, list("abcde"), [1, 2, 3, 4, 5])
    assert tr.fail(ranks[1], 0.0) is FailOutcome.RETRY and tr.retry_queue_len == 1
    assert tr.fail(ranks[3], 0.0) is FailOutcome.RETRY and tr.next_retry(1.0) is not None  # back in flight
    unknown = SequenceKey(keys[0].sequence, 5).rank
    assert tr.ack_many([ranks[1], ranks[1], unknown, keys[2], ranks[3]]) == 3  # a repeat, an unknown key
    assert tr.stats.unknown_acks == 2 and tr.retry_queue_len == 0 and tr.next_retry(99.0) is None
    assert tr.inflight_bytes == 6 and tr.checkpoint is None
    # Nothing of the failures is left: neither a retry nor a re-emission timeout of the acked records.
    assert tr.next_due(99.0) is None and tr.expire(10**9) == [] and tr.stats.timed_out == 0
    assert tr.ack_many(iter([ranks[0], ranks[4]])) == 2 and tr.checkpoint == keys[4] and tr.ack_many([]) == 0


def held_bytes(run: Callable[[], T]) -> tuple[T, int]:
    """Run ``run`` under tracemalloc: what it returns, and the bytes it allocated that are still held after it.
    Leaves tracemalloc as it found it (tracing or not)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = run()
        return result, tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()


def test_memory_follows_pending_after_random_acks() -> None:
    """After many random acks without new records, the memory the tracker holds is cut down to what is pending
    (its emission order compacted, its dict of pending records rebuilt: a dict keeps the room of everything it held
    until it grows again), and its emission order keeps within its bound."""
    keys = [k.rank for k in sparse_keys(40_000, seed=24)]
    left = sorted(random.Random(25).sample(range(len(keys)), 10_000))
    gone = sorted(set(range(len(keys))) - set(left))
    random.Random(26).shuffle(gone)

    def full() -> InflightRecordTracker:
        tr = InflightRecordTracker("s")
        tr.emit_many(keys, 0.0, sizes=[1] * len(keys))
        return tr

    def after_acks() -> InflightRecordTracker:
        tr = full()
        for i in gone:
            assert tr.ack(keys[i])
        return tr

    _, full_bytes = held_bytes(full)
    tr, left_bytes = held_bytes(after_acks)
    assert tr.inflight_count == 10_000 and tr.inflight_bytes == 10_000
    # All in flight: about 105 B a record. The quarter left: about 170 B each (240 B with the dict of pending
    # records kept at its full size, 190 B with the emission order not compacted).
    assert left_bytes < 200 * 10_000 and left_bytes < full_bytes / 2, (left_bytes, full_bytes)
    assert 2 * tr.retained_count <= COMPACT_FACTOR * 10_000 + 2 * COMPACT_SLACK
    assert tr.checkpoint == SequenceKey.from_rank(keys[left[0] - 1]) if left[0] else tr.checkpoint is None
    for i in left:
        tr.ack(keys[i])
    assert tr.checkpoint == SequenceKey.from_rank(keys[-1]) and tr.retained_count <= COMPACT_SLACK + 1
