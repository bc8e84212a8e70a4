"""Hypothesis stateful test: the library's tracker (SpanTracker, exported as InflightRecordTracker) and the tests'
per-record reference tracker (PerRecordTracker), each against a plain, obviously-correct model.

The model keeps every emitted record, in emission order, with its state; the checkpoint is a linear scan.
Random emit/ack/fail/give_up/next_retry/expire calls, batches of them (emit_many, ack_many), dead letters written in
any order, random clock advances, sparse 56-digit keys with random gaps and KPL sub-sequences, keys passed as
SequenceKey, as ranks or mixed, retry limits 0..3, and tiny compaction thresholds (down to compacting on every ack,
and rebuilding the pending dict at every look; one-record open spans) so that the compaction paths run too.
Hypothesis switches rules on and off per example, so setup emits a first batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import kinesis_spout.tracking.retries as retries_mod
import kinesis_spout.tracking.span as span_mod
from kinesis_spout.records import SequenceKey
from kinesis_spout.tracker import FailOutcome, InflightRecordTracker, RetryBackoff

from ..mutation import PHASES, UNDER_MUTATION
from . import reference_records as inflight_mod
from .reference_tracker import PerRecordTracker

BASE = 49590338271490256608559692538361571095921575989136588898
# The trackers' tuning constants, shrunk per example and put back after it: (module, name).
_KNOBS = ((inflight_mod, "COMPACT_FACTOR"), (inflight_mod, "COMPACT_SLACK"), (retries_mod, "HEAP_SLACK"),
          (inflight_mod, "DICT_CHECK"), (inflight_mod, "DICT_SLACK"), (span_mod, "COMPACT_FACTOR"),
          (span_mod, "COMPACT_SLACK"), (span_mod, "OPEN_SPAN_LIMIT"))
_DEFAULTS = {knob: getattr(*knob) for knob in _KNOBS}

INFLIGHT, WAITING, DEAD, DONE = "inflight", "waiting", "dead", "done"  # DEAD: a dead letter not written yet
DT = st.one_of(st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 10.0]), st.floats(0.0, 20.0))
GAPS = st.one_of(st.integers(1, 3), st.integers(1, 10**30))  # sparse: tiny or huge gaps between sequence numbers


@dataclass
class ModelRecord:
    key: SequenceKey
    item: Any
    size: int
    emitted_at: float
    state: str = INFLIGHT
    attempt: int = 1
    due: float = 0.0


class TrackerMachine(RuleBasedStateMachine):
    """Drives one tracker and one model with the same calls and compares every answer and every counter. This class
    drives the library's tracker; :class:`ReferenceMachine` the per-record reference tracker."""

    def configure(self, compact_factor: int, compact_slack: int, heap_slack: int, dict_check: int,
                  dict_slack: int) -> None:
        """Shrink the tracker's tuning knobs for this example (compaction factor 5, 6, 9 -> 3, 4, 7)."""
        span_mod.COMPACT_FACTOR, span_mod.COMPACT_SLACK = compact_factor - 2, compact_slack
        retries_mod.HEAP_SLACK, span_mod.OPEN_SPAN_LIMIT = heap_slack, {1: 1, 3: 3}.get(dict_check, 4096)

    def new_tracker(self, **kwargs: Any) -> Any:
        return InflightRecordTracker("shardId-000000000001", **kwargs)

    def retained_within_bound(self, pending: int) -> bool:
        """The span tracker looks at its spans' size at least every 16 records done: in between, what those left."""
        factor = span_mod.COMPACT_FACTOR
        return self.tr.retained_count <= factor * pending + span_mod.COMPACT_SLACK + 17 * factor

    @initialize(
        retry_limit=st.integers(0, 3),
        timeout=st.sampled_from([None, 0.5, 1.0, 3.0]),
        initial_s=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
        multiplier=st.sampled_from([1.0, 2.0, 3.0]),
        extra_max=st.sampled_from([0.0, 0.4, 2.0]),
        initial=st.one_of(st.none(), st.integers(0, 10**40).map(lambda d: SequenceKey(BASE - d))),
        compact_factor=st.sampled_from([5, 6, 9]),
        compact_slack=st.sampled_from([0, 1, 3, 1024]),
        heap_slack=st.sampled_from([0, 2, 64]),
        dict_check=st.sampled_from([1, 3, 256]),
        dict_slack=st.sampled_from([0, 16384]),
        key_form=st.sampled_from(["keys", "ranks", "mixed"]),
        check_checkpoint_every_step=st.booleans(),
        first_batch=st.lists(st.tuples(GAPS, st.booleans(), st.integers(0, 5000)), max_size=20),
    )
    def setup(
        self,
        retry_limit: int,
        timeout: float | None,
        initial_s: float,
        multiplier: float,
        extra_max: float,
        initial: SequenceKey | None,
        compact_factor: int,
        compact_slack: int,
        heap_slack: int,
        dict_check: int,
        dict_slack: int,
        key_form: str,
        check_checkpoint_every_step: bool,
        first_batch: list[tuple[int, bool, int]],
    ) -> None:
        self.configure(compact_factor, compact_slack, heap_slack, dict_check, dict_slack)
        self.key_form = key_form
        self.backoff = RetryBackoff(initial_s, multiplier, initial_s + extra_max)
        self.retry_limit = retry_limit
        self.timeout = timeout
        self.tr = self.new_tracker(
            retry_limit=retry_limit,
            backoff=self.backoff,
            message_timeout_s=timeout,
            checkpoint=initial,
        )
        self.initial = initial
        self.records: list[ModelRecord] = []
        self.by_key: dict[SequenceKey, ModelRecord] = {}
        self.dead: list[tuple[SequenceKey, Any, int]] = []
        self.now = 1000.0
        self.last_checkpoint = initial
        self.every_step = check_checkpoint_every_step
        self.counts = {"acked": 0, "unknown_acks": 0, "unknown_fails": 0, "dead_lettered": 0, "timed_out": 0}
        for gap, kpl, size in first_batch:  # rules are switched on and off per example: start with records
            self._emit_one(gap, kpl, size)

    def teardown(self) -> None:
        for (module, name), value in _DEFAULTS.items():
            setattr(module, name, value)

    def k(self, key: SequenceKey) -> SequenceKey | int:
        """The key as this example passes it to the tracker: a SequenceKey, its rank, or either (by its parity)."""
        if self.key_form == "keys" or (self.key_form == "mixed" and (key.sequence + key.sub_sequence) % 2):
            return key
        return key.rank

    # ------------------------------------------------------------------ model

    def model_checkpoint(self) -> SequenceKey | None:
        checkpoint = self.initial
        for rec in self.records:
            if rec.state != DONE:
                break
            checkpoint = rec.key
        return checkpoint

    def model_fail(self, rec: ModelRecord | None, now: float) -> FailOutcome:
        if rec is None or rec.state != INFLIGHT:
            self.counts["unknown_fails"] += 1
            return FailOutcome.UNKNOWN
        if rec.attempt <= self.retry_limit:
            b = self.backoff
            rec.state, rec.due = WAITING, now + min(b.initial_s * b.multiplier ** (rec.attempt - 1), b.max_s)
            return FailOutcome.RETRY
        rec.state = DEAD
        self.dead.append((rec.key, rec.item, rec.attempt))
        return FailOutcome.DEAD_LETTER

    def pick_key(self, data: st.DataObject) -> SequenceKey:
        """An emitted key (any state) or, sometimes, a key never emitted."""
        rec = data.draw(st.sampled_from(self.records))
        if data.draw(st.booleans()) and data.draw(st.booleans()):
            unknown = SequenceKey(rec.key.sequence, rec.key.sub_sequence + 10**9)
            if unknown not in self.by_key:
                return unknown
        return rec.key

    # ------------------------------------------------------------------ rules

    def _emit_one(self, gap: int, kpl: bool, size: int) -> None:
        key = self._new_key(gap, kpl, self.records[-1].key if self.records else self.initial)
        item = ("item", key)
        assert self.tr.emit(self.k(key), self.now, item, size) is True
        self._add(key, item, size)

    def _add(self, key: SequenceKey, item: Any, size: int) -> None:
        rec = ModelRecord(key, item, size, self.now)
        self.records.append(rec)
        self.by_key[key] = rec

    def _new_key(self, gap: int, kpl: bool, last: SequenceKey | None) -> SequenceKey:
        if last is None:
            return SequenceKey(BASE + gap)
        if kpl:
            return SequenceKey(last.sequence, last.sub_sequence + 1)
        return SequenceKey(last.sequence + gap)

    @rule(batch=st.lists(st.tuples(GAPS, st.booleans(), st.integers(0, 5000)), min_size=1, max_size=8))
    def emit_new(self, batch: list[tuple[int, bool, int]]) -> None:
        for gap, kpl, size in batch:
            self._emit_one(gap, kpl, size)

    @rule(batch=st.lists(st.tuples(GAPS, st.booleans(), st.integers(0, 5000)), min_size=1, max_size=8),
          replays=st.integers(0, 3), as_ranks=st.booleans())
    def emit_batch(self, batch: list[tuple[int, bool, int]], replays: int, as_ranks: bool) -> None:
        """emit_many: new records in one call, after up to ``replays`` keys already emitted (a replay prefix)."""
        old = [r.key for r in self.records][-replays:] if replays else []
        last, keys = self.records[-1].key if self.records else self.initial, []
        for gap, kpl, _ in batch:
            last = self._new_key(gap, kpl, last)
            keys.append(last)
        items, sizes = [("item", key) for key in old + keys], [7] * len(old) + [size for _, _, size in batch]
        passed = [k.rank for k in old + keys] if as_ranks else old + keys
        before = self.tr.stats.duplicates_ignored
        assert self.tr.emit_many(passed, self.now, items, sizes) == len(old)
        assert self.tr.stats.duplicates_ignored == before + len(old)
        for key, item, size in zip(keys, items[len(old):], sizes[len(old):]):
            self._add(key, item, size)

    @rule(data=st.data())
    def emit_duplicate(self, data: st.DataObject) -> None:
        candidates = [r.key for r in self.records] + ([self.initial] if self.initial is not None else [])
        if not candidates:
            return
        key = data.draw(st.sampled_from(candidates))
        if data.draw(st.booleans()):  # below the key, never emitted, still a replay
            key = SequenceKey(key.sequence - data.draw(st.integers(1, 10**20)), 0)
        before = self.tr.stats.duplicates_ignored
        assert self.tr.emit(self.k(key), self.now, "dup", 7) is False
        assert self.tr.stats.duplicates_ignored == before + 1

    def _ack(self, key: SequenceKey) -> None:
        rec = self.by_key.get(key)
        expected = rec is not None and rec.state not in (DONE, DEAD)
        if expected:
            rec.state = DONE  # type: ignore[union-attr]
            self.counts["acked"] += 1
        else:
            self.counts["unknown_acks"] += 1
        assert self.tr.ack(self.k(key)) is expected

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        self._ack(self.pick_key(data))

    @precondition(lambda self: any(r.state != DONE for r in self.records))
    @rule(data=st.data())
    def ack_several(self, data: st.DataObject) -> None:
        """Ack a random subset of the records not done, in a random order (as a downstream batch would)."""
        pending = [r.key for r in self.records if r.state != DONE]
        for key in data.draw(st.permutations(pending))[: data.draw(st.integers(1, len(pending)))]:
            self._ack(key)

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def ack_batch(self, data: st.DataObject) -> None:
        """ack_many: emitted keys in any state and order, repeats and unknown keys included."""
        keys = [self.pick_key(data) for _ in range(data.draw(st.integers(1, 12)))]
        expected = 0
        for key in keys:
            rec = self.by_key.get(key)
            if rec is not None and rec.state not in (DONE, DEAD):
                rec.state = DONE
                self.counts["acked"] += 1
                expected += 1
            else:
                self.counts["unknown_acks"] += 1
        assert self.tr.ack_many([self.k(key) for key in keys]) == expected

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def give_up(self, data: st.DataObject) -> None:
        """The scheme refused a record: dead-letter it at once if it is in flight."""
        key = self.pick_key(data)
        rec = self.by_key.get(key)
        expected = rec is not None and rec.state == INFLIGHT
        if expected:
            rec.state = DEAD  # type: ignore[union-attr]
            self.dead.append((rec.key, rec.item, rec.attempt))  # type: ignore[union-attr]
        assert self.tr.give_up(self.k(key)) is expected

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def dead_letter_written(self, data: st.DataObject) -> None:
        """The spout's dead-letter thread wrote one letter (any key: unknown, pending or done ones too)."""
        self.observe_dead_letters()
        key = self.pick_key(data)
        rec = self.by_key.get(key)
        expected = rec is not None and rec.state == DEAD
        if expected:
            rec.state = DONE  # type: ignore[union-attr]
            self.counts["dead_lettered"] += 1
        assert self.tr.dead_letter_written(self.k(key)) is expected

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        key = self.pick_key(data)
        expected = self.model_fail(self.by_key.get(key), self.now)
        assert self.tr.fail(self.k(key), self.now) is expected

    @precondition(lambda self: any(r.state == INFLIGHT for r in self.records))
    @rule(data=st.data())
    def fail_several(self, data: st.DataObject) -> None:
        """Fail a random subset of the records in flight (a downstream outage)."""
        inflight = [r for r in self.records if r.state == INFLIGHT]
        for rec in data.draw(st.permutations(inflight))[: data.draw(st.integers(1, len(inflight)))]:
            assert self.tr.fail(self.k(rec.key), self.now) is self.model_fail(rec, self.now)

    @rule()
    def next_retry(self) -> None:
        due = [r for r in self.records if r.state == WAITING and r.due <= self.now]
        got = self.tr.next_retry(self.now)
        if not due:
            assert got is None
            return
        rec = min(due, key=lambda r: (r.due, r.key))
        rec.state, rec.attempt, rec.emitted_at = INFLIGHT, rec.attempt + 1, self.now
        assert got == (rec.key, rec.item, rec.attempt)

    @rule()
    def expire(self) -> None:
        expected: list[tuple[SequenceKey, FailOutcome]] = []
        if self.timeout is not None:
            overdue = [r for r in self.records if r.state == INFLIGHT and r.emitted_at + self.timeout <= self.now]
            expected = [(r.key, self.model_fail(r, self.now)) for r in overdue]
            self.counts["timed_out"] += len(expected)
        assert self.tr.expire(self.now) == expected

    @rule(dt=DT)
    def advance_clock(self, dt: float) -> None:
        self.now += dt

    @rule(dt=DT)
    def loop_tick(self, dt: float) -> None:
        """One turn of the spout's loop: time passes, overdue records fail, due retries go out again."""
        self.now += dt
        self.expire()
        while any(r.state == WAITING and r.due <= self.now for r in self.records):
            self.next_retry()
        assert self.tr.next_retry(self.now) is None

    @rule()
    def observe(self) -> None:
        """What an event loop asks between calls: next_due, has_due_retry, dead letters, the checkpoint."""
        times = [r.due for r in self.records if r.state == WAITING]
        if self.timeout is not None:
            times += [r.emitted_at + self.timeout for r in self.records if r.state == INFLIGHT]
        expected_due = max(0.0, min(times) - self.now) if times else None
        assert self.tr.next_due(self.now) == expected_due
        expected_has_due = any(r.state == WAITING and r.due <= self.now for r in self.records)
        assert self.tr.has_due_retry(self.now) is expected_has_due
        self.observe_dead_letters()
        self._check_checkpoint()

    def observe_dead_letters(self) -> None:
        got = self.tr.take_dead_letters()
        assert sorted(got) == sorted(self.dead)
        self.dead = []

    # ------------------------------------------------------------------ invariants

    def _check_checkpoint(self) -> None:
        checkpoint = self.tr.checkpoint
        assert checkpoint == self.model_checkpoint()
        if self.last_checkpoint is not None:
            assert checkpoint is not None and checkpoint >= self.last_checkpoint  # never moves backwards
        self.last_checkpoint = checkpoint
        for rec in self.records:
            if rec.state != DONE:
                assert checkpoint is None or rec.key > checkpoint  # never passes a pending record

    @invariant()
    def checkpoint_matches_model(self) -> None:
        if self.every_step:
            self._check_checkpoint()

    @invariant()
    def memory_follows_pending(self) -> None:
        """The keys the tracker retains in emission order follow what is pending, not what was acked; the pending
        dead letters are the model's."""
        pending = [r for r in self.records if r.state != DONE]
        assert self.tr.dead_letters_pending == sum(r.state == DEAD for r in self.records)
        assert self.retained_within_bound(len(pending)), (self.tr.retained_count, len(pending))

    @invariant()
    def counts_match_model(self) -> None:
        pending = [r for r in self.records if r.state != DONE]
        assert self.tr.inflight_count == len(pending)
        assert self.tr.inflight_bytes == sum(r.size for r in pending)
        assert self.tr.retry_queue_len == sum(r.state == WAITING for r in self.records)
        stats = self.tr.stats
        assert stats.emitted == len(self.records)
        for name, value in self.counts.items():
            assert getattr(stats, name) == value, name


class ReferenceMachine(TrackerMachine):
    """The same calls and checks against the per-record reference tracker, the one the differential test holds the
    library's tracker to: a reference is only worth what its own test says."""

    def configure(self, compact_factor: int, compact_slack: int, heap_slack: int, dict_check: int,
                  dict_slack: int) -> None:
        inflight_mod.COMPACT_FACTOR, inflight_mod.COMPACT_SLACK = compact_factor, compact_slack
        retries_mod.HEAP_SLACK, inflight_mod.DICT_CHECK, inflight_mod.DICT_SLACK = heap_slack, dict_check, dict_slack

    def new_tracker(self, **kwargs: Any) -> Any:
        return PerRecordTracker("shardId-000000000001", **kwargs)

    def retained_within_bound(self, pending: int) -> bool:
        factor, slack = inflight_mod.COMPACT_FACTOR, inflight_mod.COMPACT_SLACK
        return 2 * self.tr.retained_count <= factor * pending + 2 * slack + 2


#: Under mutation testing (mutmut runs a copy of the tests in mutants/): fewer examples, none shrunk.
for machine in (TrackerMachine, ReferenceMachine):
    machine.TestCase.settings = settings(
        max_examples=10 if UNDER_MUTATION else 200,
        phases=PHASES,
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
TestTracker = TrackerMachine.TestCase
TestReferenceTracker = ReferenceMachine.TestCase
