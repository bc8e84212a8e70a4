"""The per-record reference tracker's memory (the tracker benchmark's baseline; the library's tracker has its own
in test_spans.py and test_tracker_model.py) follows what is pending: runs of acked records are compacted away
(keeping every checkpoint and timeout right), the keys it retains stay within their bound after every record done,
and the bytes it holds shrink with what is pending. Pure: no server, no clock, no sleep."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

import pytest

from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, RetryBackoff

from . import reference_records
from .keys import BASE, A, B, C, D, sparse_keys
from .reference_records import COMPACT_FACTOR, COMPACT_SLACK
from .reference_tracker import PerRecordTracker

T = TypeVar("T")


def test_acked_runs_do_not_accumulate() -> None:
    keys = sparse_keys(100_000, seed=11)
    tr = PerRecordTracker("s")
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
    tr = PerRecordTracker("s")
    for k in keys:
        tr.emit(k, 0.0)
        tr.ack(k)
    assert tr.retained_count < 2_000
    assert tr.checkpoint == keys[-1]


def test_compaction_keeps_checkpoints_and_timeouts_right() -> None:
    """Many records with every 30th pending: compaction must keep each pending key's predecessor and the
    timeout cursor."""
    keys = sparse_keys(9_000, seed=5)
    tr = PerRecordTracker("s", message_timeout_s=100.0)
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
    tr = PerRecordTracker("s", retry_limit=0)
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
    monkeypatch.setattr(reference_records, "COMPACT_SLACK", 0)
    tr = PerRecordTracker("s", retry_limit=0, message_timeout_s=None)
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


def _within_bound(tr: PerRecordTracker) -> bool:
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
    tr = PerRecordTracker("s", retry_limit=0, backoff=RetryBackoff(0.0, 1.0, 0.0), message_timeout_s=None)
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

    def full() -> PerRecordTracker:
        tr = PerRecordTracker("s")
        tr.emit_many(keys, 0.0, sizes=[1] * len(keys))
        return tr

    def after_acks() -> PerRecordTracker:
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
