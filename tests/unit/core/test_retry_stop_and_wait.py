"""The one stop rule (RetryPolicy.stop_reason), a Backoff's failed tries and the wait an interrupt ends, with a fake
clock, a fake sleep and a fake event: no real time passes."""

from __future__ import annotations

import threading

import pytest

from kinesis_spout.errors import ConfigError
from kinesis_spout.retry import POLL_S, Backoff, Failure, Interrupt, Outage, RetryPolicy, wait

from .fake_time import FakeTime


class FakeEvent:
    """An Event-like flag on a fake clock: ``wait`` moves the clock by the timeout, or to ``set_at`` when the flag
    is set before the timeout ends, and says whether it is set."""

    def __init__(self, t: FakeTime, set_at: float | None = None) -> None:
        self.t = t
        self.set_at = set_at
        self.waits: list[float | None] = []

    def is_set(self) -> bool:
        return self.set_at is not None and self.t.now >= self.set_at

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        assert timeout is not None
        end = self.t.now + timeout
        self.t.now = end if self.set_at is None else max(self.t.now, min(end, self.set_at))
        return self.is_set()


def test_the_stop_rule_names_the_tries_at_max_attempts_and_not_one_before() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.stop_reason(n, 0.0) for n in (1, 2, 3, 4)] == [None, None, "max_attempts", "max_attempts"]
    assert [policy.stops_after(n, 1e9) for n in (1, 2, 3)] == [False, False, True], "no deadline: time never stops"
    assert RetryPolicy(max_attempts=1).stop_reason(1, 0.0) == "max_attempts", "one try in all: no retry"


def test_the_stop_rule_stops_when_the_next_try_could_not_start_before_the_deadline() -> None:
    policy = RetryPolicy(deadline_s=10.0)
    assert policy.stop_reason(1, 8.0, 1.5) is None, "the next try starts at 9.5 s"
    assert policy.stop_reason(1, 8.5, 1.5) == "deadline_s", "a pause ending at the deadline is not made"
    assert policy.stop_reason(1, 9.0, 2.0) == "deadline_s"
    assert policy.stop_reason(1, 9.999) is None and policy.stop_reason(1, 10.0) == "deadline_s", "no pause counted"
    assert (policy.past_deadline(9.0, 0.5), policy.past_deadline(9.0, 1.0)) == (False, True)
    assert not RetryPolicy().past_deadline(1e9, 1e9), "no deadline"
    assert (policy.stops_after(1, 9.0, 0.5), policy.stops_after(1, 9.0, 1.0)) == (False, True)
    both = RetryPolicy(max_attempts=2, deadline_s=1.0)
    assert both.stop_reason(2, 5.0) == "max_attempts", "the tries are named first when both limits are reached"
    assert both.stop_reason(1, 5.0) == "deadline_s"


def test_a_backoff_says_the_pause_and_stops_at_the_last_try_with_no_pause() -> None:
    t = FakeTime(500.0)
    backoff = Backoff(RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=10.0, max_attempts=3), clock=t.clock,
                      sleep=t.sleep)
    seen = []
    while True:
        failure = backoff.failed()
        seen.append(failure)
        if failure.stop is not None:
            break
        assert backoff.wait(failure.pause_s)
    assert seen == [Failure(1, 1.0, 0.0, None), Failure(2, 2.0, 1.0, None), Failure(3, 4.0, 3.0, "max_attempts")]
    assert t.sleeps == [1.0, 2.0], "no pause after the last try"


def test_a_started_backoff_counts_its_deadline_from_the_first_try_and_the_tries_themselves_count() -> None:
    t = FakeTime(500.0)
    backoff = Backoff(RetryPolicy(initial_s=1.0, multiplier=1.0, max_s=1.0, deadline_s=5.0), clock=t.clock,
                      sleep=t.sleep)
    backoff.start()
    t.now += 3.0  # the first try takes 3 s
    first = backoff.failed()
    assert (first.elapsed_s, first.stop) == (3.0, None)
    backoff.wait(first.pause_s)
    t.now += 0.5  # the second try takes 0.5 s: 4.5 s since the start, a pause of 1 s would end at 5.5 s
    second = backoff.failed()
    assert (second.attempt, second.elapsed_s, second.stop) == (2, 4.5, "deadline_s")
    assert t.sleeps == [1.0]


def test_a_backoff_not_started_counts_its_deadline_from_the_first_failure_and_a_reset_forgets_both() -> None:
    t = FakeTime(500.0)
    backoff = Backoff(RetryPolicy(initial_s=1.0, multiplier=1.0, max_s=1.0, deadline_s=3.0), clock=t.clock,
                      sleep=t.sleep)
    assert not backoff.expired and backoff.failing_for() == 0.0
    t.now += 100.0  # before the first failure: not counted
    assert backoff.failed() == Failure(1, 1.0, 0.0, None)
    t.now += 1.0
    assert backoff.failed() == Failure(2, 1.0, 1.0, None)
    t.now += 1.0
    assert backoff.failed().stop == "deadline_s", "2 s + a pause of 1 s reaches the deadline"
    assert not backoff.expired, "the deadline itself has not passed yet"
    t.now += 1.0
    assert backoff.expired and backoff.exhausted
    backoff.start()
    backoff.reset()
    t.now += 50.0
    assert not backoff.expired and backoff.failed() == Failure(1, 1.0, 0.0, None), "a reset forgets the start too"


def test_expired_counts_from_the_start_without_any_failure() -> None:
    t = FakeTime(500.0)
    backoff = Backoff(RetryPolicy(deadline_s=2.0), clock=t.clock)
    backoff.start()
    t.now += 1.999
    assert not backoff.expired
    t.now += 0.001
    assert backoff.expired and backoff.failures == 0 and not backoff.exhausted


def test_a_wait_without_interrupt_sleeps_the_whole_pause() -> None:
    t = FakeTime(500.0)
    assert wait(2.5, sleep=t.sleep, clock=t.clock)
    assert t.sleeps == [2.5]


def test_a_callable_interrupt_is_asked_before_any_sleep() -> None:
    t = FakeTime(500.0)
    assert not wait(30.0, lambda: True, sleep=t.sleep, clock=t.clock)
    assert t.sleeps == [], "an interrupt already there: no sleep at all"
    backoff = Backoff(RetryPolicy(), clock=t.clock, sleep=t.sleep)
    assert not backoff.wait(30.0, lambda: True) and t.sleeps == []


def test_a_callable_interrupt_ends_the_wait_within_a_poll_and_otherwise_the_pause_is_made_in_full() -> None:
    t = FakeTime(500.0)
    stop_at = t.now + 0.5
    assert not wait(30.0, lambda: t.now >= stop_at, sleep=t.sleep, clock=t.clock)
    assert t.sleeps == pytest.approx([POLL_S, POLL_S, POLL_S]), "asked after each sleep of at most POLL_S"
    t = FakeTime(500.0)
    asked: list[float] = []

    def never() -> bool:
        asked.append(t.now)
        return False

    assert wait(0.5, never, sleep=t.sleep, clock=t.clock, poll_s=0.2)
    assert t.sleeps == pytest.approx([0.2, 0.2, 0.1]) and sum(t.sleeps) == pytest.approx(0.5)
    assert len(asked) == 4, "asked before the first sleep and after each"
    t = FakeTime(500.0)
    assert wait(0.0, lambda: False, sleep=t.sleep, clock=t.clock) and t.sleeps == []
    backoff = Backoff(RetryPolicy(), clock=t.clock, sleep=t.sleep)
    assert backoff.wait(1.0, lambda: False), "on the backoff's own clock and sleep"
    assert sum(t.sleeps) == pytest.approx(1.0) and max(t.sleeps) == pytest.approx(POLL_S)


def test_an_event_interrupt_is_looked_at_first_and_wakes_the_wait() -> None:
    t = FakeTime(500.0)
    already = FakeEvent(t, set_at=t.now)
    assert not wait(30.0, already, sleep=t.sleep, clock=t.clock)
    assert already.waits == [] and t.now == 500.0, "set before: no wait"
    later = FakeEvent(t, set_at=t.now + 2.0)
    assert not wait(30.0, later, sleep=t.sleep, clock=t.clock)
    assert later.waits == [30.0] and t.now == 502.0, "woken when set"
    never = FakeEvent(t)
    assert Backoff(RetryPolicy(), clock=t.clock, sleep=t.sleep).wait(4.0, never)
    assert never.waits == [4.0] and t.sleeps == [], "the event's wait is the sleep"
    assert isinstance(threading.Event(), Interrupt) and not isinstance(lambda: True, Interrupt)
    stopped = threading.Event()
    stopped.set()
    assert not wait(3600.0, stopped), "a set threading.Event ends the wait at once"


def test_min_s_lets_full_jitter_go_down_to_no_pause() -> None:
    policy = RetryPolicy(initial_s=0.002, multiplier=2.0, max_s=0.05, jitter=1.0, min_s=0.0)
    assert [policy.delay(n, lambda: 1.0) for n in (1, 2, 3, 6, 7)] == pytest.approx([0.002, 0.004, 0.008, 0.05, 0.05])
    assert [policy.delay(n, lambda: 0.0) for n in (1, 2, 7)] == [0.0, 0.0, 0.0]
    assert policy.delay(3, lambda: 0.5) == pytest.approx(0.004)
    with pytest.raises(ConfigError, match=r"RetryPolicy.min_s must be from 0 to initial_s \(0.1\) \(or None: "
                                          r"initial_s\), got 0.5"):
        RetryPolicy(initial_s=0.1, min_s=0.5)
    with pytest.raises(ConfigError, match="RetryPolicy.min_s must be from 0"):
        RetryPolicy(min_s=-1.0)
    assert RetryPolicy(initial_s=0.1, jitter=1.0, min_s=0.1).delay(2, lambda: 0.0) == 0.1, "min_s may be initial_s"


# ------------------------------------------------------------------ Outage: the alarm of a writer that never gives up


def test_an_outage_reaches_its_deadline_counted_from_the_first_failure_in_a_row() -> None:
    clock = FakeTime()
    outage = Outage(10.0, clock.clock)
    assert outage.failed() is None  # the clock starts here
    clock.now += 9.9
    assert outage.failed() is None
    clock.now += 0.1
    assert outage.failed() == pytest.approx(10.0)
    assert outage.recovered() and not outage.recovered()  # says once that writes had been failing
    clock.now += 50.0
    assert outage.failed() is None, "a write that succeeded starts the count again"


def test_an_outage_started_before_its_first_failed_write_counts_from_the_start() -> None:
    clock = FakeTime()
    outage = Outage(5.0, clock.clock)
    outage.start()  # e.g. the store reported a lost connection
    clock.now += 6.0
    outage.start()  # a second report does not move the start
    assert outage.failed() == pytest.approx(6.0)
