"""The schedule of ``readMode=executors``' probes of shards at their tip (pure), and the prober's threads making them
with a probe function of the test's (no Kinesis): when each shard is probed, what the planning sees."""

from __future__ import annotations

import threading

import pytest

from kinesis_spout.kinesis.retrieval.polling import idle_backoff
from kinesis_spout.positions import Position, after
from kinesis_spout.spark.source.probes import (
    PROBE_ERROR,
    PROBE_FOUND,
    PROBE_IDLE,
    PROBE_PASSED,
    ProbeSchedule,
    ReadStreaks,
    ShardProber,
)

RETRY_S = 0.2
START = after("100")


def schedule() -> ProbeSchedule[str]:
    """Idle pauses of 0.2 s doubling up to 0.8 s; the getter is a name saying which shard and position."""
    return ProbeSchedule(lambda: idle_backoff(0.2, 0.8), RETRY_S)


def getter(shard_id: str, position: Position) -> str:
    return f"{shard_id}@{position.encode()}"


def probe_round(sched: ProbeSchedule[str], now: float, seen: str, most: int = 100) -> list[str]:
    """Take the shards due at ``now`` and record ``seen`` for each; the shards probed."""
    taken = sched.take_due(now, most)
    for shard_id, position, _ in taken:
        sched.done(shard_id, position, seen, now)
    return [shard_id for shard_id, _, _ in taken]


def test_an_idle_shard_is_probed_at_once_then_ever_less_often_up_to_the_cap() -> None:
    sched = schedule()
    sched.track({"a": START}, getter, now=0.0)
    now, times = 0.0, []
    while len(times) < 6:
        if probe_round(sched, now, PROBE_IDLE) == ["a"]:
            times.append(round(now, 6))
        due = sched.next_due()
        assert due is not None and due > now, "a shard probed was due again at once"
        now = due
    assert times == [0.0, 0.2, 0.6, 1.4, 2.2, 3.0]  # pauses 0.2, 0.4, 0.8, then the cap 0.8


def test_nothing_is_probed_before_it_is_due_and_a_shard_found_is_not_probed_again_until_it_moves() -> None:
    sched = schedule()
    sched.track({"a": START, "b": START}, getter, now=0.0)
    assert sorted(probe_round(sched, 0.0, PROBE_IDLE)) == ["a", "b"]
    assert probe_round(sched, 0.19, PROBE_IDLE) == []  # not due yet: no probe
    taken = sched.take_due(0.2, 100)
    assert sorted(s for s, _, _ in taken) == ["a", "b"]
    sched.done("a", START, PROBE_FOUND, 0.2)
    sched.done("b", START, PROBE_IDLE, 0.2)
    for now in (0.6, 5.0, 50.0):
        assert "a" not in probe_round(sched, now, PROBE_IDLE)  # found: the next batch reads it, not the probes
    assert sched.sighting().found == {"a"}
    sched.track({"a": after("200"), "b": START}, getter, now=60.0)  # a batch read a: probed at its new end at once
    assert sched.sighting().unprobed == {"a"}
    assert probe_round(sched, 60.0, PROBE_IDLE) == ["a", "b"]  # the moved one first, then the one due


def test_a_moved_shard_starts_its_pauses_again_and_shards_left_out_are_forgotten() -> None:
    sched = schedule()
    sched.track({"a": START, "b": START}, getter, now=0.0)
    now = 0.0
    for _ in range(4):  # a's pause grows to the cap
        probe_round(sched, now, PROBE_IDLE)
        now = sched.next_due() or now
    sched.track({"a": after("200")}, getter, now=now)  # b is read on by tasks: no probe of it
    taken = sched.take_due(now, 100)
    assert [(s, g) for s, _, g in taken] == [("a", "a@" + after("200").encode())]
    sched.done("a", after("200"), PROBE_IDLE, now)
    assert sched.next_due() == pytest.approx(now + 0.2)  # the first pause again, not the cap
    sched.done("b", START, PROBE_FOUND, now)  # a probe of a forgotten shard that was in flight: ignored
    assert sched.sighting().found == frozenset() and sched.sighting().idle == {"a"}


def test_shards_not_probed_at_their_position_yet_come_before_overdue_idle_ones() -> None:
    sched = schedule()
    sched.track({"idle-1": START, "idle-2": START}, getter, now=0.0)
    probe_round(sched, 0.0, PROBE_IDLE)
    sched.track({"idle-1": START, "idle-2": START, "moved": START}, getter, now=10.0)
    assert [s for s, _, _ in sched.take_due(10.0, 1)] == ["moved"]
    assert sched.in_flight() == 1
    assert sched.sighting().unprobed == {"moved"}  # in flight, not probed yet


def test_a_probe_that_passed_dropped_user_records_or_failed_comes_again_after_the_retry_pause() -> None:
    sched = schedule()
    sched.track({"a": START, "b": START}, getter, now=0.0)
    for now in (0.0, 0.2, 0.6):
        probe_round(sched, now, PROBE_IDLE)  # a's pause is 0.8 s now
    taken = {s: p for s, p, _ in sched.take_due(1.4, 100)}
    sched.done("a", taken["a"], PROBE_PASSED, 1.4)
    sched.done("b", taken["b"], PROBE_ERROR, 1.4)
    assert sched.next_due() == pytest.approx(1.4 + RETRY_S)
    seen = sched.sighting()
    assert seen.passing == {"a"} and seen.idle == {"b"} and not seen.unprobed
    probe_round(sched, 1.6, PROBE_IDLE)
    assert sched.next_due() == pytest.approx(1.8)  # passing reset a's pauses: the first one again


class Probes:
    """A probe function of the test's: what each shard shows, the calls made, a failure to raise."""

    def __init__(self, shows: dict[str, str]) -> None:
        self.shows = shows
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.failure: Exception | None = None

    def __call__(self, shard_id: str, position: Position, getter: str) -> str:
        with self.lock:
            self.calls.append(shard_id)
        if self.failure is not None:
            raise self.failure
        return self.shows[shard_id]


def test_the_prober_probes_on_its_threads_and_the_planning_waits_only_for_what_it_asks() -> None:
    probes = Probes({"a": PROBE_IDLE, "b": PROBE_IDLE, "c": PROBE_FOUND})
    prober = ShardProber(schedule(), probes, threads=2)
    try:
        prober.track({"a": START, "b": START, "c": START}, getter)
        seen = prober.wait(lambda v: not v.unprobed, 10.0)
        assert seen.found == {"c"} and seen.idle == {"a", "b"}
        prober.wait(lambda v: probes.calls.count("a") >= 2, 10.0)  # a's probes go on at its pace, c's stop
        assert probes.calls.count("a") >= 2 and probes.calls.count("c") == 1, probes.calls
        probes.failure = RuntimeError("the stream is gone")
        with pytest.raises(RuntimeError, match="the stream is gone"):
            prober.wait(lambda v: False, 10.0)
    finally:
        prober.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("kinesis-spout-probe")]


def test_a_shard_is_known_busy_after_two_batches_in_a_row_with_records_and_no_longer_once_one_had_none() -> None:
    streaks = ReadStreaks()
    streaks.batch_read(0, {"a", "b"})  # a backlog batch: records everywhere, once
    assert not streaks.known_busy("a", 0) and not streaks.known_busy("b", 0)
    streaks.batch_read(1, {"a"})
    streaks.batch_read(1, {"a"})  # the same batch again (Spark asks again while nothing is planned): no change
    assert streaks.known_busy("a", 1) and not streaks.known_busy("b", 1)
    streaks.batch_read(2, {"a"})
    assert streaks.known_busy("a", 2) and not streaks.known_busy("a", 3)  # only up to the batch it read
    streaks.batch_read(3, set())  # its task read nothing: probed again, and two more batches make it busy again
    assert not streaks.known_busy("a", 3)
    streaks.batch_read(4, {"a"})
    assert not streaks.known_busy("a", 4)


def test_a_shard_a_batch_read_without_moving_it_is_probed_afresh_not_left_found() -> None:
    sched = schedule()
    sched.track({"a": START}, getter, now=0.0)
    probe_round(sched, 0.0, PROBE_FOUND)
    sched.track({"a": START}, getter, now=1.0)  # planned again before the batch that reads it completed: still found
    assert sched.sighting().found == {"a"} and sched.take_due(1.0, 100) == []
    sched.track({"a": START}, getter, now=2.0, renew={"a"})  # its task found nothing: a fresh probe at once
    assert sched.sighting().unprobed == {"a"} and [s for s, _, _ in sched.take_due(2.0, 100)] == ["a"]
