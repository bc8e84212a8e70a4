"""More of the tracker's edges, exactly: keys given as plain pairs or with parts that are not ints, the wording of
the emit_many error, and the bound on the keys retained that compaction keeps after every record done (not only at
the end of a run). Written against mutants the other tracker tests let survive (see benchmarks/results/mutation.md)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff
from kinesis_spout.tracking.inflight import COMPACT_FACTOR, COMPACT_SLACK

BASE = 49590338271490256608559692538361571095921575989136588898


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


def test_emit_many_error_names_the_problem_and_the_fix_exactly() -> None:
    tr = InflightRecordTracker("s")
    with pytest.raises(ValueError, match=r"^emit_many needs strictly increasing keys \(the records of one shard in "
                                         r"read order\); emit them one by one otherwise$"):
        tr.emit_many([BASE + 2, BASE + 1], 0.0)
    assert tr.inflight_count == 0


def _within_bound(tr: InflightRecordTracker) -> bool:
    """The bound compaction keeps: the keys retained in emission order at most 2.5 times what is pending, plus the
    slack."""
    return 2 * tr.retained_count <= COMPACT_FACTOR * tr.inflight_count + 2 * COMPACT_SLACK


@pytest.mark.parametrize("finish", ["ack", "ack_many", "dead_letter"])
def test_order_stays_within_its_bound_after_every_record_done(finish: str) -> None:
    """Every fourth record stays pending, the first one too (so cutting the done prefix frees nothing and only the
    pass over the pending ranks can): after each record done, the keys retained are back within its bound, and the
    checkpoint (read now and then) is the key before the first pending one."""
    n = 6_000
    ranks = [BASE + 3 * i for i in range(1, n + 1)]
    tr = InflightRecordTracker("s", retry_limit=0, backoff=RetryBackoff(0.0, 1.0, 0.0), message_timeout_s=None)
    assert tr.emit_many(ranks, 0.0) == 0
    done = [r for i, r in enumerate(ranks) if i % 4]
    if finish == "dead_letter":  # done through dead letters: those count as pending until written
        assert all(tr.fail(r, 1.0) is FailOutcome.DEAD_LETTER for r in done)
        assert len(tr.take_dead_letters()) == len(done)
    compacted = 0
    for j, r in enumerate(done):
        before = tr.retained_count
        if finish == "ack":
            assert tr.ack(r)
        elif finish == "ack_many":
            assert tr.ack_many([r]) == 1
        else:
            assert tr.dead_letter_written(r)
        compacted += tr.retained_count < before
        assert _within_bound(tr), (j, tr.retained_count, tr.inflight_count)
        if j % 500 == 0:
            assert tr.checkpoint is None  # ranks[0] still pends
    assert compacted > 0 and tr.inflight_count == n // 4
    for i in range(0, n, 4):
        assert tr.ack(ranks[i]) and _within_bound(tr)
        assert tr.checkpoint == SequenceKey.from_rank(ranks[min(i + 3, n - 1)])
    assert tr.inflight_count == 0 and tr.stats.emitted == n
