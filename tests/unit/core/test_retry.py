"""The retry policy and its two followers, with a fake clock and a fake sleep: no real time passes."""

from __future__ import annotations

import itertools

import pytest

from kinesis_spout import retry
from kinesis_spout.errors import ConfigError, KinesisError
from kinesis_spout.retry import Backoff, RetryError, RetryPolicy, call

from .fake_time import FakeTime


class Failing:
    """A function failing with the given errors in turn, then returning ``"done"``; counts its calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def always(error: BaseException) -> Failing:
    return Failing(*itertools.repeat(error, 10_000))


def test_delays_grow_by_the_multiplier_from_the_first_delay_up_to_the_cap() -> None:
    policy = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=1.0)
    assert [round(policy.delay(n), 9) for n in range(1, 8)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert RetryPolicy(initial_s=0.5, multiplier=3.0, max_s=100.0).delay(3) == pytest.approx(4.5)
    assert RetryPolicy(initial_s=0.0, multiplier=1.0, max_s=0.0).delay(50) == 0.0
    assert policy.delay(10**6) == 1.0, "a power too large for a float is the cap"
    with pytest.raises(ValueError, match="attempt must be >= 1"):
        policy.delay(0)


def test_jitter_stays_between_the_first_delay_and_the_ceiling_and_never_passes_the_cap() -> None:
    full = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=1.0, jitter=1.0)
    assert [round(full.delay(n, lambda: 1.0), 9) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert [round(full.delay(n, lambda: 0.5), 9) for n in range(1, 4)] == [0.1, 0.15, 0.25]
    assert [full.delay(n, lambda: 0.0) for n in range(1, 4)] == [0.1, 0.1, 0.1]
    half = RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=30.0, jitter=0.5)
    assert half.delay(4, lambda: 0.0) == pytest.approx(4.5), "half jitter: the top half of [initial, ceiling]"
    assert half.delay(4, lambda: 1.0) == pytest.approx(8.0)
    for policy in (full, half, RetryPolicy(initial_s=0.2, multiplier=5.0, max_s=7.0, jitter=0.3)):
        for n in (1, 2, 3, 5, 8, 40, 10**6):
            for r in (0.0, 0.25, 0.999999, 1.0, 1.5, -0.5):  # values out of [0, 1] from a bad source are clamped
                d = policy.delay(n, lambda r=r: r)  # type: ignore[misc]
                assert policy.initial_s <= d <= policy.max_s, f"delay({n}) with random {r} = {d}"
                assert d <= policy.ceiling(n)
    rounding = RetryPolicy(initial_s=0.1, multiplier=100.0, max_s=7.058328667684434, jitter=0.7215400323407826)
    assert rounding.delay(2, lambda: 1.0) == 7.058328667684434, "the sum rounds past the ceiling: the ceiling it is"
    no_jitter = RetryPolicy(initial_s=0.1, max_s=1.0)
    assert no_jitter.delay(3, lambda: pytest.fail("random drawn without jitter")) == pytest.approx(0.4)


@pytest.mark.parametrize("kwargs, message", [
    (dict(initial_s=-0.1), "RetryPolicy.initial_s must be >= 0, got -0.1"),
    (dict(initial_s=float("nan")), "RetryPolicy.initial_s must be >= 0"),
    (dict(multiplier=0.5), "RetryPolicy.multiplier must be >= 1, got 0.5"),
    (dict(initial_s=2.0, max_s=1.0), r"RetryPolicy.max_s must be >= initial_s \(2.0\), got 1.0"),
    (dict(max_s=float("inf")), "RetryPolicy.max_s must be a finite number of seconds"),
    (dict(jitter=1.5), "RetryPolicy.jitter must be a fraction from 0 to 1, got 1.5"),
    (dict(jitter=-0.1), "RetryPolicy.jitter must be a fraction"),
    (dict(max_attempts=0), r"RetryPolicy.max_attempts must be a whole number >= 1 \(or None"),
    (dict(max_attempts=2.5), "RetryPolicy.max_attempts must be a whole number"),
    (dict(max_attempts=True), "RetryPolicy.max_attempts must be a whole number"),
    (dict(deadline_s=0.0), r"RetryPolicy.deadline_s must be > 0 seconds \(or None"),
])
def test_a_bad_setting_is_a_config_error_naming_it(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_call_returns_at_once_without_sleeping_when_the_first_try_succeeds() -> None:
    t = FakeTime()
    fn = Failing()
    assert call(fn, RetryPolicy(), what="x", sleep=t.sleep, clock=t.clock) == "done"
    assert fn.calls == 1 and t.sleeps == []


def test_call_retries_with_the_policy_s_delays_and_returns_the_result() -> None:
    t = FakeTime()
    fn = Failing(OSError("a"), OSError("b"), OSError("c"))
    seen: list[tuple[str, int, float]] = []
    policy = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=0.3, max_attempts=4)
    result = call(fn, policy, what="x", retry_on=(OSError,), sleep=t.sleep, clock=t.clock,
                  on_retry=lambda exc, n, d: seen.append((str(exc), n, d)))
    assert result == "done" and fn.calls == 4
    assert t.sleeps == pytest.approx([0.1, 0.2, 0.3])
    assert seen == [("a", 1, pytest.approx(0.1)), ("b", 2, pytest.approx(0.2)), ("c", 3, pytest.approx(0.3))]


def test_call_stops_after_max_attempts_and_raises_an_error_naming_what_how_often_and_how_long() -> None:
    t = FakeTime()
    fn = always(OSError("connection refused"))
    policy = RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=10.0, max_attempts=3)
    with pytest.raises(RetryError) as raised:
        call(fn, policy, what="reading /checkpoints/shard-0", sleep=t.sleep, clock=t.clock)
    assert fn.calls == 3 and t.sleeps == [1.0, 2.0], "no sleep after the last try"
    error = raised.value
    assert str(error) == ("reading /checkpoints/shard-0: gave up after 3 tries in 3 s (max_attempts=3); last error: "
                          "OSError: connection refused")
    assert (error.attempts, error.elapsed_s) == (3, 3.0)
    assert error.__cause__ is error.last and isinstance(error.last, OSError)
    assert not error.retriable
    once = always(KinesisError("throttled", retriable=True))
    with pytest.raises(RetryError, match=r"^put: gave up after 1 try in 0 s \(max_attempts=1\); last error: "
                                         r"KinesisError: throttled$") as raised:
        call(once, RetryPolicy(max_attempts=1), what="put", sleep=t.sleep, clock=t.clock)
    assert raised.value.retriable, "the last error was retriable: so is the give-up"


def test_call_stops_at_the_deadline_without_a_sleep_that_would_cross_it() -> None:
    t = FakeTime()
    fn = always(TimeoutError("no answer"))
    policy = RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=4.0, deadline_s=10.0)  # no limit of tries
    with pytest.raises(RetryError) as raised:
        call(fn, policy, what="deleting /x", sleep=t.sleep, clock=t.clock)
    # tries at 0, 1, 3, 7 s; after the fourth the next delay (4 s) would end at 11 s: past the deadline
    assert t.sleeps == [1.0, 2.0, 4.0] and fn.calls == 4
    assert t.now - 1000.0 == 7.0 < 10.0
    assert str(raised.value) == ("deleting /x: gave up after 4 tries in 7 s (deadline_s=10); last error: "
                                 "TimeoutError: no answer")


def test_the_deadline_counts_the_time_the_tries_themselves_take() -> None:
    t = FakeTime()

    tries = 0

    def slow() -> str:
        nonlocal tries
        tries += 1
        t.now += 3.0  # each try takes 3 s of the clock
        if tries > 100:  # bounded even if the deadline were ignored
            return "done"
        raise OSError("slow")

    # tries at 0-3, 3.1-6.1 and 6.3-9.3 s: the third starts before the deadline, none starts after it
    with pytest.raises(RetryError, match=r"gave up after 3 tries in 9.3 s \(deadline_s=8\)"):
        call(slow, RetryPolicy(initial_s=0.1, deadline_s=8.0), what="x", sleep=t.sleep, clock=t.clock)
    assert t.sleeps == pytest.approx([0.1, 0.2])


def test_only_the_errors_retry_on_names_and_retry_if_accepts_are_retried_others_raise_at_once() -> None:
    t = FakeTime()
    policy = RetryPolicy(max_attempts=5)
    other = Failing(ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        call(other, policy, what="x", retry_on=(OSError,), sleep=t.sleep, clock=t.clock)
    assert other.calls == 1 and t.sleeps == []
    permanent = Failing(KinesisError("retriable", retriable=True), KinesisError("no such stream"))
    with pytest.raises(KinesisError, match="no such stream") as raised:
        call(permanent, policy, what="x", retry_on=(KinesisError,), retry_if=lambda e: getattr(e, "retriable", False),
             sleep=t.sleep, clock=t.clock)
    assert type(raised.value) is KinesisError, "an error not retried is raised as it is, not wrapped"
    assert permanent.calls == 2 and len(t.sleeps) == 1
    with pytest.raises(KeyboardInterrupt):  # not an Exception: never retried by default
        call(Failing(KeyboardInterrupt()), policy, what="x", sleep=t.sleep, clock=t.clock)


def test_call_draws_jitter_from_the_injected_random() -> None:
    t = FakeTime()
    draws = iter([1.0, 0.5])  # the first delay has nothing to spread: no draw
    policy = RetryPolicy(initial_s=1.0, multiplier=2.0, max_s=8.0, jitter=1.0, max_attempts=4)
    assert call(Failing(OSError(), OSError(), OSError()), policy, what="x", sleep=t.sleep, clock=t.clock,
                random=lambda: next(draws)) == "done"
    assert t.sleeps == [1.0, 2.0, 2.5]


def test_backoff_counts_failures_hands_out_growing_delays_and_starts_over_after_a_reset() -> None:
    t = FakeTime()
    backoff = Backoff(RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=0.5, max_attempts=4), clock=t.clock)
    assert (backoff.failures, backoff.exhausted, backoff.failing_for()) == (0, False, 0.0)
    assert (backoff.initial_s, backoff.max_s) == (0.1, 0.5)
    delays = []
    for _ in range(3):
        delays.append(backoff.next_delay())
        t.sleep(delays[-1])
    assert delays == pytest.approx([0.1, 0.2, 0.4]) and not backoff.exhausted
    assert backoff.failing_for() == pytest.approx(0.7)
    assert backoff.next_delay() == 0.5 and backoff.failures == 4
    assert backoff.exhausted, "four failures in a row with max_attempts=4"
    backoff.reset()
    assert (backoff.failures, backoff.exhausted, backoff.failing_for()) == (0, False, 0.0)
    assert backoff.next_delay() == pytest.approx(0.1), "a reset starts the delays over"


def test_backoff_is_exhausted_at_its_deadline_counted_from_the_first_failure_in_a_row() -> None:
    t = FakeTime()
    backoff = Backoff(RetryPolicy(initial_s=1.0, multiplier=1.0, max_s=1.0, deadline_s=5.0), clock=t.clock)
    t.now += 100.0  # time before the first failure does not count
    for _ in range(4):
        backoff.next_delay()
        t.sleep(1.0)
    assert not backoff.exhausted
    backoff.next_delay()
    t.sleep(1.0)
    assert backoff.exhausted and backoff.failing_for() == 5.0
    unlimited = Backoff(RetryPolicy(initial_s=0.0, multiplier=1.0, max_s=0.0))
    for _ in range(1000):
        unlimited.next_delay()
    assert not unlimited.exhausted


def test_backoff_jitter_comes_from_its_random() -> None:
    backoff = Backoff(RetryPolicy(initial_s=0.1, max_s=1.0, jitter=1.0), random=lambda: 0.5)
    assert [round(backoff.next_delay(), 9) for _ in range(3)] == [0.1, 0.15, 0.25]


def test_the_tracker_s_retry_backoff_gives_the_delays_of_its_policy() -> None:
    from kinesis_spout.tracker import RetryBackoff

    backoff = RetryBackoff(initial_s=0.5, multiplier=3.0, max_s=20.0)
    policy = backoff.policy()
    assert (policy.initial_s, policy.multiplier, policy.max_s, policy.jitter) == (0.5, 3.0, 20.0, 0.0)
    assert type(policy) is RetryPolicy and policy == RetryPolicy(initial_s=0.5, multiplier=3.0, max_s=20.0)
    assert [backoff.delay(n) for n in range(1, 8)] == [policy.delay(n) for n in range(1, 8)] == \
        [0.5, 1.5, 4.5, 13.5, 20.0, 20.0, 20.0]
    assert backoff.delay(10**6) == 20.0


def test_retry_backoff_is_a_retry_policy_that_a_backoff_and_call_follow_as_they_are() -> None:
    from kinesis_spout import RetryBackoff as exported
    from kinesis_spout.tracker import RetryBackoff

    assert exported is RetryBackoff is retry.RetryBackoff
    backoff = RetryBackoff(initial_s=0.5, multiplier=2.0, max_s=1.5)
    assert isinstance(backoff, RetryPolicy)
    assert (backoff.jitter, backoff.max_attempts, backoff.deadline_s, backoff.min_s) == (0.0, None, None, None)
    follow = Backoff(backoff, random=lambda: pytest.fail("no jitter: random is never drawn"))
    assert [follow.next_delay() for _ in range(4)] == [0.5, 1.0, 1.5, 1.5]
    assert follow.failed().stop is None  # no limit of tries, no deadline
    t = FakeTime()
    fn = Failing(*[TimeoutError("slow")] * 3)
    assert call(fn, backoff, what="x", sleep=t.sleep, clock=t.clock) == "done"
    assert t.sleeps == [0.5, 1.0, 1.5]


def test_retry_backoff_keeps_its_name_repr_equality_and_pickles() -> None:
    import pickle
    from dataclasses import replace

    backoff = retry.RetryBackoff(initial_s=0.25, multiplier=1.5, max_s=4.0)
    assert repr(backoff) == "RetryBackoff(initial_s=0.25, multiplier=1.5, max_s=4.0)"
    assert repr(retry.RetryBackoff()) == "RetryBackoff(initial_s=0.1, multiplier=2.0, max_s=10.0)"
    assert retry.RetryBackoff(0.25, 1.5, 4.0) == backoff and hash(retry.RetryBackoff(0.25, 1.5, 4.0)) == hash(backoff)
    assert backoff != RetryPolicy(initial_s=0.25, multiplier=1.5, max_s=4.0)  # a RetryBackoff, not any policy
    assert pickle.loads(pickle.dumps(backoff)) == backoff
    assert replace(backoff, max_s=8.0) == retry.RetryBackoff(0.25, 1.5, 8.0)


@pytest.mark.parametrize(("kwargs", "given"), [
    ({"jitter": 0.5}, "jitter=0.5"),
    ({"max_attempts": 3}, "max_attempts=3"),
    ({"deadline_s": 2.0, "min_s": 0.0}, "deadline_s=2.0, min_s=0.0"),
])
def test_retry_backoff_refuses_what_its_owners_would_not_follow(kwargs: dict[str, object], given: str) -> None:
    with pytest.raises(ConfigError, match=rf"^RetryBackoff holds delays only \(initial_s, multiplier, max_s\), got "
                                          rf"{given}: the tries are counted by the setting beside it \(retry_limit, "
                                          rf"batch_retry_limit\); give a RetryPolicy where a whole policy is taken$"):
        retry.RetryBackoff(**kwargs)  # type: ignore[arg-type]


def test_retry_backoff_errors_name_it_not_the_policy() -> None:
    with pytest.raises(ConfigError, match=r"^RetryBackoff.max_s must be a finite number of seconds, got inf$"):
        retry.RetryBackoff(max_s=float("inf"))
    with pytest.raises(ConfigError, match=r"^RetryBackoff.multiplier must be >= 1, got 0.5$"):
        retry.RetryBackoff(multiplier=0.5)
    with pytest.raises(ConfigError, match=r"^RetryPolicy.max_s must be a finite number of seconds, got inf$"):
        RetryPolicy(max_s=float("inf"))


def test_the_error_gives_long_waits_in_plain_seconds() -> None:
    t = FakeTime()

    def hung() -> None:
        t.now += 1234.5
        raise TimeoutError("no answer")

    with pytest.raises(RetryError, match=r"^x: gave up after 1 try in 1234.5 s \(max_attempts=1\); last error: "
                                         r"TimeoutError: no answer$"):
        call(hung, RetryPolicy(max_attempts=1), what="x", sleep=t.sleep, clock=t.clock)


def test_a_deadline_under_a_second_is_kept_and_no_sleep_ends_at_it() -> None:
    t = FakeTime()
    fn = always(TimeoutError("no answer"))
    short = RetryPolicy(initial_s=0.1, multiplier=2.0, max_s=1.0, deadline_s=0.5)  # a session's operation timeout
    with pytest.raises(RetryError, match=r"gave up after 3 tries in 0\.3 s \(deadline_s=0\.5\)"):
        call(fn, short, what="x", sleep=t.sleep, clock=t.clock)
    assert t.sleeps == pytest.approx([0.1, 0.2]), "tries at 0, 0.1, 0.3 s; a sleep of 0.4 s would pass 0.5 s"
    t, fn = FakeTime(), always(OSError("down"))
    with pytest.raises(RetryError):
        call(fn, RetryPolicy(initial_s=1.0, multiplier=1.0, max_s=1.0, deadline_s=2.0), what="x", sleep=t.sleep,
             clock=t.clock)
    assert t.sleeps == [1.0] and fn.calls == 2, "a sleep that would end at the deadline is not made"


@pytest.mark.parametrize(("waited", "said"), [(0.25, "0.25"), (0.125, "0.125"), (9.87, "9.87"), (10.04, "10"),
                                              (12.0, "12"), (0.0, "0"),
                                              (1.5e-10, "1.5e-10")])
def test_the_error_says_short_waits_to_three_significant_digits_and_long_ones_in_tenths(waited: float,
                                                                                         said: str) -> None:
    t = FakeTime()

    def hung() -> None:
        t.now += waited
        raise TimeoutError("no answer")

    with pytest.raises(RetryError) as raised:
        call(hung, RetryPolicy(max_attempts=1), what="x", sleep=t.sleep, clock=t.clock)
    assert f" in {said} s (" in str(raised.value)
