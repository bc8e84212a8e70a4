"""Hypothesis differential test: the library's tracker (SpanTracker) against the per-record reference tracker.

Random sequences of operations go to both trackers: one-by-one emits, batches emitted as spans (the per-record tracker
gets the same keys through emit_many), acks, fails, give-ups, dead letters written, whole-span acks with excluded
records (the per-record tracker gets ack_many of the same records: those of the span still in their first emission and
not excluded), acks and fails of one attempt of a record (ack_attempt, fail_attempt: the per-record tracker gets the ack
or fail only when the test's own model says the record is in flight at that attempt), retries, timeouts and clock
advances, with sparse 56-digit keys, KPL sub-sequences, keys as SequenceKey or rank, retry limits 0..3 and tiny
compaction thresholds. After every step the two must give the same safe checkpoint, and every call the same answer:
outcomes, retry order (next_retry), expired records, dead letters, next_due and every counter. So the safe-checkpoint
rule provably does not change with spans.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

import kinesis_spout.tracking.retries as retries_mod
import kinesis_spout.tracking.span as span_mod
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, RetryBackoff
from kinesis_spout.tracking.spans import Span, SpanTracker

from ..mutation import PHASES, UNDER_MUTATION
from .reference_tracker import PerRecordTracker

BASE = 49590338271490256608559692538361571095921575989136588898
_KNOBS = ((span_mod, "COMPACT_FACTOR"), (span_mod, "COMPACT_SLACK"), (span_mod, "OPEN_SPAN_LIMIT"),
          (retries_mod, "HEAP_SLACK"))
_DEFAULTS = {knob: getattr(*knob) for knob in _KNOBS}
DT = st.one_of(st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 10.0]), st.floats(0.0, 20.0))
GAPS = st.one_of(st.integers(1, 3), st.integers(1, 10**30))
RECORDS = st.lists(st.tuples(GAPS, st.booleans(), st.integers(0, 5000)), min_size=1, max_size=12)


class Differential(RuleBasedStateMachine):
    """Drives a per-record tracker (``old``) and a span tracker (``new``) with the same calls."""

    spans = Bundle("spans")

    @initialize(
        retry_limit=st.integers(0, 3),
        timeout=st.sampled_from([None, 0.5, 1.0, 3.0]),
        initial_s=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
        multiplier=st.sampled_from([1.0, 2.0]),
        initial=st.one_of(st.none(), st.integers(0, 10**40).map(lambda d: SequenceKey(BASE - d))),
        compact_factor=st.sampled_from([3, 4, 6]),
        compact_slack=st.sampled_from([0, 1, 3, 1024]),
        open_limit=st.sampled_from([1, 2, 3, 4096]),
        heap_slack=st.sampled_from([0, 2, 64]),
        as_ranks=st.booleans(),
    )
    def setup(self, retry_limit: int, timeout: float | None, initial_s: float, multiplier: float,
              initial: SequenceKey | None, compact_factor: int, compact_slack: int, open_limit: int,
              heap_slack: int, as_ranks: bool) -> None:
        span_mod.COMPACT_FACTOR, span_mod.COMPACT_SLACK = compact_factor, compact_slack
        span_mod.OPEN_SPAN_LIMIT, retries_mod.HEAP_SLACK = open_limit, heap_slack
        backoff = RetryBackoff(initial_s, multiplier, initial_s + 2.0)
        kwargs: dict[str, Any] = {"retry_limit": retry_limit, "backoff": backoff, "message_timeout_s": timeout,
                                  "checkpoint": initial}
        self.old = PerRecordTracker("shardId-000000000001", **kwargs)
        self.new = SpanTracker("shardId-000000000001", **kwargs)
        self.as_ranks = as_ranks
        self.keys: list[SequenceKey] = []  # every key emitted, in order
        self.last = initial
        self.first: set[SequenceKey] = set()  # keys in their first emission (never failed, not done)
        self.attempts: dict[SequenceKey, int] = {}  # keys in flight -> the attempt they are in flight at
        self.span_keys: dict[int, list[SequenceKey]] = {}  # id(span) -> its keys
        self.now = 1000.0
        self.last_checkpoint = initial

    def teardown(self) -> None:
        for (module, name), value in _DEFAULTS.items():
            setattr(module, name, value)

    def k(self, key: SequenceKey) -> SequenceKey | int:
        return key.rank if self.as_ranks else key

    def _new_keys(self, records: list[tuple[int, bool, int]]) -> list[SequenceKey]:
        out, last = [], self.last
        for gap, kpl, _ in records:
            if last is None:
                last = SequenceKey(BASE + gap)
            elif kpl:  # the next user record of the same KPL aggregate
                last = SequenceKey(last.sequence, last.sub_sequence + 1)
            else:
                last = SequenceKey(last.sequence + gap)
            out.append(last)
        return out

    def pick(self, data: st.DataObject) -> SequenceKey:
        key = data.draw(st.sampled_from(self.keys))
        if data.draw(st.integers(0, 5)) == 0:  # now and then a key never emitted
            return SequenceKey(key.sequence, key.sub_sequence + 10**9)
        return key

    def _failed(self, key: SequenceKey, outcome: FailOutcome) -> None:
        if outcome is not FailOutcome.UNKNOWN:
            self.first.discard(key)
            self.attempts.pop(key, None)

    def _retried(self, got: tuple[SequenceKey, Any, int] | None) -> None:
        if got is not None:
            self.attempts[got[0]] = got[2]

    # ------------------------------------------------------------------ emission

    @rule(records=RECORDS)
    def emit_one_by_one(self, records: list[tuple[int, bool, int]]) -> None:
        for key, (_, _, size) in zip(self._new_keys(records), records):
            item = ("item", key)
            assert self.old.emit(self.k(key), self.now, item, size) is True
            assert self.new.emit(self.k(key), self.now, item, size) is True
            self.keys.append(key)
            self.first.add(key)
            self.attempts[key] = 1
            self.last = key

    @rule(target=spans, records=RECORDS, replays=st.integers(0, 3), with_items=st.booleans())
    def emit_span(self, records: list[tuple[int, bool, int]], replays: int, with_items: bool) -> Span | None:
        old_keys = self.keys[-replays:] if replays else []
        keys = self._new_keys(records)
        passed = [self.k(key) for key in old_keys + keys]
        items = [("item", key) for key in old_keys + keys] if with_items else None
        sizes = [7] * len(old_keys) + [size for _, _, size in records]
        assert self.old.emit_many(passed, self.now, items, sizes) == len(old_keys)
        span = self.new.emit_span(passed, self.now, items, sizes)
        assert span is not None and span.first_key == keys[0] and span.last_key == keys[-1]
        assert len(span) == len(keys) and span.pending == len(keys)
        self.span_keys[id(span)] = keys
        self.keys.extend(keys)
        self.first.update(keys)
        self.attempts.update(dict.fromkeys(keys, 1))
        self.last = keys[-1]
        return span

    @rule(target=spans, records=RECORDS, replays=st.integers(0, 3), with_items=st.booleans())
    def emit_span_of_ends(self, records: list[tuple[int, bool, int]], replays: int, with_items: bool) -> Span | None:
        """A batch emitted by its ends, as the columnar batches emit theirs: the span tracker gets the first and last
        ranks and makes the others (and the sizes) only when it needs them; replays go the way of emit_span."""
        old_keys = self.keys[-replays:] if replays else []
        keys = self._new_keys(records)
        every = old_keys + keys
        items = [("item", key) for key in every] if with_items else None
        sizes = [7] * len(old_keys) + [size for _, _, size in records]
        made: list[int] = []

        def fill() -> tuple[list[int], list[int]]:
            made.append(1)
            return [key.rank for key in every], sizes

        assert self.old.emit_many([self.k(key) for key in every], self.now, items, sizes) == len(old_keys)
        span = self.new.emit_span_of_ends(len(every), every[0].rank, every[-1].rank, self.now, fill, items,
                                          sum(sizes))
        assert span is not None and span.first_key == keys[0] and span.last_key == keys[-1]
        assert len(span) == len(keys) and span.pending == len(keys)
        assert bool(made) == bool(old_keys)  # ranks made at once for replays only
        self.span_keys[id(span)] = keys
        self.keys.extend(keys)
        self.first.update(keys)
        self.attempts.update(dict.fromkeys(keys, 1))
        self.last = keys[-1]
        return span

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def emit_replay(self, data: st.DataObject) -> None:
        key = self.pick(data)
        if key > self.keys[-1]:
            return
        assert self.old.emit(self.k(key), self.now, "dup", 3) is False
        assert self.new.emit(self.k(key), self.now, "dup", 3) is False

    # ------------------------------------------------------------------ completion

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        key = self.pick(data)
        got = self.new.ack(self.k(key))
        assert got is self.old.ack(self.k(key))
        self.first.discard(key)
        if got:
            self.attempts.pop(key, None)

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def ack_many(self, data: st.DataObject) -> None:
        keys = [self.pick(data) for _ in range(data.draw(st.integers(1, 10)))]
        assert self.new.ack_many([self.k(k) for k in keys]) == self.old.ack_many([self.k(k) for k in keys])
        self.first.difference_update(keys)
        for key in keys:  # each one in flight was acked
            self.attempts.pop(key, None)

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def ack_many_in_order(self, data: st.DataObject) -> None:
        """A consumer acks a stretch of records in emission order, as ack_many of a batch's message ids (the runs
        the span tracker acks at once), with now and then a key left out, repeated or never emitted."""
        start = data.draw(st.integers(0, len(self.keys) - 1))
        keys: list[SequenceKey] = []
        for key in self.keys[start:start + data.draw(st.integers(1, 40))]:
            change = data.draw(st.integers(0, 11))
            if change != 0:  # 0: left out
                keys.append(key)
            if change == 1:
                keys.append(key)
            elif change == 2:
                keys.append(SequenceKey(key.sequence, key.sub_sequence + 10**9))
        assert self.new.ack_many([self.k(k) for k in keys]) == self.old.ack_many([self.k(k) for k in keys])
        self.first.difference_update(keys)
        for key in keys:
            self.attempts.pop(key, None)

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def ack_attempt(self, data: st.DataObject) -> None:
        """A batch acks one emission of a record: only the attempt the record is in flight at (by the model)."""
        key = self.pick(data)
        current = self.attempts.get(key)
        attempt = data.draw(st.sampled_from([1, 2, 3, 4] + ([current, current] if current else [])))
        assert self.new.attempt_of(self.k(key)) == current
        expected = current == attempt
        assert self.new.ack_attempt(self.k(key), attempt) is expected
        if expected:
            assert self.old.ack(self.k(key)) is True
            self.first.discard(key)
            del self.attempts[key]

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def fail_attempt(self, data: st.DataObject) -> None:
        """A consumer fails one emission of a record: only the attempt it is in flight at (by the model)."""
        key = self.pick(data)
        current = self.attempts.get(key)
        attempt = data.draw(st.sampled_from([1, 2, 3, 4] + ([current, current] if current else [])))
        outcome = self.new.fail_attempt(self.k(key), attempt, self.now)
        if current == attempt:
            assert outcome is self.old.fail(self.k(key), self.now)
            assert outcome is not FailOutcome.UNKNOWN
            self._failed(key, outcome)
        else:
            assert outcome is FailOutcome.UNKNOWN

    @rule(span=spans, data=st.data())
    def ack_span(self, span: Span | None, data: st.DataObject) -> None:
        """A consumer acks a batch whole, maybe except some of its records (ack_except)."""
        if span is None:
            return
        keys = self.span_keys[id(span)]
        exclude = data.draw(st.lists(st.sampled_from(keys), max_size=4)) if data.draw(st.booleans()) else []
        acked = [key for key in keys if key in self.first and key not in exclude]
        assert self.new.ack_span(span, [self.k(key) for key in exclude]) == len(acked)
        assert self.old.ack_many([self.k(key) for key in acked]) == len(acked)
        self.first.difference_update(acked)
        for key in acked:
            del self.attempts[key]
        assert self.new.ack_span(span, [self.k(key) for key in exclude]) == 0  # nothing left to ack but excluded

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        key = self.pick(data)
        outcome = self.new.fail(self.k(key), self.now)
        assert outcome is self.old.fail(self.k(key), self.now)
        self._failed(key, outcome)

    @rule(span=spans, data=st.data())
    def fail_inside_span(self, span: Span | None, data: st.DataObject) -> None:
        """Several records of one batch fail (its consumer's fail(ids))."""
        if span is None:
            return
        keys = self.span_keys[id(span)]
        for key in data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=5)):
            outcome = self.new.fail(self.k(key), self.now)
            assert outcome is self.old.fail(self.k(key), self.now)
            self._failed(key, outcome)

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def give_up(self, data: st.DataObject) -> None:
        key = self.pick(data)
        got = self.new.give_up(self.k(key))
        assert got is self.old.give_up(self.k(key))
        if got:
            self.first.discard(key)
            self.attempts.pop(key, None)

    @precondition(lambda self: self.keys)
    @rule(data=st.data())
    def dead_letter_written(self, data: st.DataObject) -> None:
        assert self.new.take_dead_letters() == self.old.take_dead_letters()
        key = self.pick(data)
        assert self.new.dead_letter_written(self.k(key)) is self.old.dead_letter_written(self.k(key))

    # ------------------------------------------------------------------ time

    @rule()
    def next_retry(self) -> None:
        got = self.new.next_retry(self.now)
        assert got == self.old.next_retry(self.now)
        self._retried(got)

    @rule()
    def expire(self) -> None:
        got = self.new.expire(self.now)
        assert got == self.old.expire(self.now)
        for key, outcome in got:
            self._failed(key, outcome)

    @rule(dt=DT)
    def advance_clock(self, dt: float) -> None:
        self.now += dt

    @rule(dt=DT)
    def loop_tick(self, dt: float) -> None:
        """One turn of the spout's loop: time passes, overdue records fail, due retries go out again."""
        self.now += dt
        self.expire()
        while True:
            got = self.new.next_retry(self.now)
            assert got == self.old.next_retry(self.now)
            self._retried(got)
            if got is None:
                break

    @rule()
    def observe(self) -> None:
        assert self.new.next_due(self.now) == self.old.next_due(self.now)
        assert self.new.has_due_retry(self.now) is self.old.has_due_retry(self.now)
        assert self.new.take_dead_letters() == self.old.take_dead_letters()

    # ------------------------------------------------------------------ invariants

    @invariant()
    def same_checkpoint(self) -> None:
        checkpoint = self.new.checkpoint
        assert checkpoint == self.old.checkpoint
        if self.last_checkpoint is not None:
            assert checkpoint is not None and checkpoint >= self.last_checkpoint
        self.last_checkpoint = checkpoint

    @invariant()
    def same_counts(self) -> None:
        new, old = self.new, self.old
        assert new.stats == old.stats
        assert (new.inflight_count, new.inflight_bytes, new.retry_queue_len, new.dead_letters_pending) == \
            (old.inflight_count, old.inflight_bytes, old.retry_queue_len, old.dead_letters_pending)

    @invariant()
    def memory_follows_pending(self) -> None:
        """The keys the spans hold follow what is pending (a look at the spans' size comes at least every 16 done
        records), and there are never more spans than pending records."""
        live = self.new.inflight_count
        factor, slack = span_mod.COMPACT_FACTOR, span_mod.COMPACT_SLACK
        assert self.new.retained_count <= factor * live + slack + factor * 17
        assert self.new.span_count <= live


#: Under mutation testing (mutmut runs a copy of the tests in mutants/): fewer examples, none shrunk.
Differential.TestCase.settings = settings(max_examples=15 if UNDER_MUTATION else 250, stateful_step_count=50,
                                          deadline=None, phases=PHASES,
                                          suppress_health_check=[HealthCheck.too_slow])
TestSpanTrackerAgainstPerRecordTracker = Differential.TestCase
