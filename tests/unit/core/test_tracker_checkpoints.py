"""The per-shard tracker's (InflightRecordTracker, the span tracker) emits, acks and checkpoint: the original's 3x3
ack cases, out-of-order acks, replays and unknown keys, sparse 56-digit keys and KPL sub-sequences, keys as
SequenceKeys, ranks or plain pairs, the keys it refuses, and emit_many / ack_many as emit / ack for each key. Pure: no
server, no clock, no sleep."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from kinesis_spout.records import WHOLE, SequenceKey
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff

from .keys import BASE, K0, A, B, C, D, sparse_keys

KEY = K0


# ------------------------------------------------------------------ the original's 3x3 ack cases

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


# ------------------------------------------------------------------ key forms: SequenceKeys, ranks, pairs


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


def test_a_plain_pair_of_ints_is_the_key_it_spells() -> None:
    """Anything that unpacks as ``(sequence, sub-sequence)`` ints is taken as that key; other tuples are refused."""
    tr = InflightRecordTracker("s", retry_limit=0, checkpoint=(BASE, 0))  # type: ignore[arg-type]
    assert tr.checkpoint == SequenceKey(BASE)
    assert tr.emit((BASE, 0), 0.0) is False  # type: ignore[arg-type]  # the initial checkpoint: a replay
    assert tr.emit((BASE, 1), 0.0, item="a") and tr.emit(SequenceKey(BASE, 2), 0.0)  # type: ignore[arg-type]
    assert tr.emit((BASE + 1, 0), 0.0, item="c") and tr.emit(SequenceKey(BASE + 2), 0.0)  # type: ignore[arg-type]
    assert tr.ack((BASE, 2))  # type: ignore[arg-type]
    assert tr.fail((BASE, 1), 1.0) is FailOutcome.DEAD_LETTER  # type: ignore[arg-type]
    assert tr.give_up((BASE + 1, 0))  # type: ignore[arg-type]
    assert tr.take_dead_letters() == [(SequenceKey(BASE, 1), "a", 1), (SequenceKey(BASE + 1), "c", 1)]
    assert tr.dead_letter_written((BASE, 1))  # type: ignore[arg-type]
    assert tr.checkpoint == SequenceKey(BASE, 2)
    assert tr.dead_letter_written((BASE + 1, 0)) and tr.ack((BASE + 2, 0))  # type: ignore[arg-type]
    assert tr.checkpoint == SequenceKey(BASE + 2) and tr.inflight_count == 0
    for bad in ((BASE,), (BASE, 0, 0)):
        with pytest.raises(TypeError, match=r"^a key is a SequenceKey or its rank \(an int\), got \("):
            tr.emit(bad, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [
    SequenceKey(str(BASE + 5)),  # type: ignore[arg-type]  # the sequence number in its string form
    SequenceKey(float(BASE + 5)),  # type: ignore[arg-type]
    SequenceKey(BASE + 5, 1.0),  # type: ignore[arg-type]
    SequenceKey(BASE + 5, "1"),  # type: ignore[arg-type]
], ids=["str-sequence", "float-sequence", "float-sub", "str-sub"])
def test_keys_with_parts_that_are_not_ints_are_refused_by_every_method(key: SequenceKey) -> None:
    """A part that is not an int is a TypeError naming the key, never a rank computed from it (a float rank would
    be a key that no ack ever matches)."""
    tr = InflightRecordTracker("s", checkpoint=SequenceKey(BASE))
    last = SequenceKey(BASE + 9)
    assert tr.emit(last.rank, 0.0)
    calls: list[Callable[[], object]] = [
        lambda: InflightRecordTracker("s", checkpoint=key),
        lambda: tr.emit(key, 0.0), lambda: tr.ack(key), lambda: tr.fail(key, 0.0), lambda: tr.give_up(key),
        lambda: tr.dead_letter_written(key), lambda: tr.emit_many([key], 0.0), lambda: tr.ack_many([key]),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"^no rank for key .*: its sequence and sub-sequence numbers must be ints"):
            call()
    assert tr.inflight_count == 1 and tr.stats.emitted == 1 and tr.checkpoint == SequenceKey(BASE)
    assert tr.ack(last.rank) and tr.checkpoint == last


# ------------------------------------------------------------------ batches: emit_many, ack_many


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


def test_emit_many_error_names_the_problem_and_the_fix_exactly() -> None:
    tr = InflightRecordTracker("s")
    with pytest.raises(ValueError, match=r"^emit_many needs strictly increasing keys \(the records of one shard in "
                                         r"read order\); emit them one by one otherwise$"):
        tr.emit_many([BASE + 2, BASE + 1], 0.0)
    assert tr.inflight_count == 0


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
