"""Retrying: one policy of delays between tries, and two ways to follow it.

:class:`RetryPolicy` is an immutable description: the first delay, how it grows from one failure to the next, its
ceiling, how much of it is randomised (jitter, so that many workers failing together do not retry together), and
when to stop (a number of tries, a deadline, or neither). It is pure: ``delay(attempt)`` is a number.

Two ways to follow a policy:

- :func:`call` runs a function and tries it again on the errors it is told to retry, sleeping the policy's delays,
  until it succeeds, the tries run out or the deadline passes; then it raises :class:`RetryError`, which says what
  was tried, how often and for how long, with the last error as its cause. ``sleep``, ``clock`` and ``random`` are
  injectable, so a test needs no real time.
- :class:`Backoff` is for loops that are not call-shaped (a reader polled by a pool, a writer thread): it counts
  consecutive failures, hands out the next delay, and is reset when a try succeeds.

Core layer: the standard library and :mod:`kinesis_spout.errors` only; no threads. Validation errors are
:class:`~kinesis_spout.errors.ConfigError` naming the setting. :class:`RetryError` belongs to the error tree
(:mod:`kinesis_spout.errors`) and is importable from here too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from random import random as _uniform
from typing import Callable, Protocol, TypeVar

from kinesis_spout.errors import ConfigError, RetryError

__all__ = ["Backoff", "Delays", "RetryError", "RetryPolicy", "call", "check_exponential", "exponential_delay"]

T = TypeVar("T")


class Delays(Protocol):
    """Anything that gives the delay after a failed try (``attempt`` 1 = the first try): a :class:`RetryPolicy`, or
    :class:`kinesis_spout.tracker.RetryBackoff`."""

    def delay(self, attempt: int) -> float:
        """Seconds to wait after try number ``attempt`` failed."""
        ...


def check_exponential(owner: str, initial_s: float, multiplier: float, max_s: float) -> None:
    """Raise a ConfigError naming ``owner.<field>`` unless ``initial_s >= 0``, ``multiplier >= 1`` and
    ``max_s >= initial_s`` (NaN fails every check). Called by the constructors of the backoff types."""
    if not initial_s >= 0:
        raise ConfigError(f"{owner}.initial_s must be >= 0, got {initial_s!r}")
    if not multiplier >= 1:
        raise ConfigError(f"{owner}.multiplier must be >= 1, got {multiplier!r}")
    if not max_s >= initial_s:
        raise ConfigError(f"{owner}.max_s must be >= initial_s ({initial_s!r}), got {max_s!r}")


def exponential_delay(initial_s: float, multiplier: float, max_s: float, attempt: int) -> float:
    """``initial_s * multiplier ** (attempt - 1)``, never more than ``max_s`` (also where the power overflows).
    ``attempt`` 1 is the first try; ValueError below 1."""
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt!r}")
    try:
        d = initial_s * multiplier ** (attempt - 1)
    except OverflowError:
        return max_s
    return d if d < max_s else max_s


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to wait between tries, and when to stop trying. Immutable; share it freely.

    After try number ``n`` failed the delay's ceiling is ``min(max_s, initial_s * multiplier ** (n - 1))``. With
    ``jitter`` (a fraction, 0..1) the delay is drawn uniformly from the top ``jitter`` part of the range
    ``[initial_s, ceiling]``: 0 gives the ceiling itself, 1 anything from ``initial_s`` to the ceiling ("full
    jitter" that keeps the first delay as its floor). A delay is never below ``initial_s`` nor above ``max_s``.

    ``max_attempts`` (tries in all, the first included; None: no limit) and ``deadline_s`` (seconds from the first
    try, or for a :class:`Backoff` from the first failure; None: no limit) say when to stop.
    """

    initial_s: float = 0.1
    multiplier: float = 2.0
    max_s: float = 10.0
    jitter: float = 0.0
    max_attempts: int | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        check_exponential("RetryPolicy", self.initial_s, self.multiplier, self.max_s)
        if not (math.isfinite(self.max_s)):
            raise ConfigError(f"RetryPolicy.max_s must be a finite number of seconds, got {self.max_s!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError(f"RetryPolicy.jitter must be a fraction from 0 to 1, got {self.jitter!r}")
        if self.max_attempts is not None and (isinstance(self.max_attempts, bool)
                                              or not isinstance(self.max_attempts, int) or self.max_attempts < 1):
            raise ConfigError(f"RetryPolicy.max_attempts must be a whole number >= 1 (or None for no limit), got "
                              f"{self.max_attempts!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ConfigError(f"RetryPolicy.deadline_s must be > 0 seconds (or None for no deadline), got "
                              f"{self.deadline_s!r}")

    def ceiling(self, attempt: int) -> float:
        """The delay after try ``attempt`` failed, before jitter: the most it can be."""
        return exponential_delay(self.initial_s, self.multiplier, self.max_s, attempt)

    def delay(self, attempt: int, random: Callable[[], float] = _uniform) -> float:
        """Seconds to wait after try number ``attempt`` (1 = the first) failed. ``random`` (values in [0, 1]) is
        called only when there is jitter; a value outside [0, 1] is clamped, so the delay stays within bounds."""
        top = self.ceiling(attempt)
        if not self.jitter or top <= self.initial_s:
            return top
        spread = top - self.initial_s
        r = min(1.0, max(0.0, random()))
        d = self.initial_s + (1.0 - self.jitter) * spread + self.jitter * spread * r
        return d if d < top else top  # rounding must not lift it past the ceiling (nor so past max_s)

    def stops_after(self, attempts: int, elapsed_s: float) -> bool:
        """True when no try may follow: ``attempts`` tries were made (and failed) and ``elapsed_s`` seconds passed
        since the first (see the class docstring)."""
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return True
        return self.deadline_s is not None and elapsed_s >= self.deadline_s


def call(fn: Callable[[], T], policy: RetryPolicy, *, what: str,
         retry_on: tuple[type[BaseException], ...] = (Exception,),
         retry_if: Callable[[BaseException], bool] | None = None,
         on_retry: Callable[[BaseException, int, float], None] | None = None,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
         random: Callable[[], float] = _uniform) -> T:
    """Call ``fn()`` until it returns, and return what it returned.

    An error that is an instance of ``retry_on`` (and for which ``retry_if``, when given, is true) is tried again
    after the policy's delay; any other error is raised at once, as it is. Before each sleep ``on_retry(error,
    attempt, delay)`` is called (to log it). Tries stop when ``policy.max_attempts`` were made, or when the next
    try could not start before ``policy.deadline_s`` (counted from the first try: the last sleep is not made when
    it would end at or past the deadline); then :class:`RetryError` is raised with the last error as its cause.
    ``what`` names the call in that error ("reading /checkpoints/shard-0"). ``sleep``, ``clock`` and ``random``
    are injectable for tests. Runs on the caller's thread; keeps no state between calls.
    """
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except retry_on as exc:
            if retry_if is not None and not retry_if(exc):
                raise
            elapsed = clock() - started
            pause = policy.delay(attempt, random)
            limit = ""
            if policy.max_attempts is not None and attempt >= policy.max_attempts:
                limit = f"max_attempts={policy.max_attempts}"
            elif policy.deadline_s is not None and elapsed + pause >= policy.deadline_s:
                limit = f"deadline_s={policy.deadline_s:g}"
            if limit:
                tries = "1 try" if attempt == 1 else f"{attempt} tries"
                raise RetryError(f"{what}: gave up after {tries} in {_seconds(elapsed)} s ({limit}); last error: "
                                 f"{type(exc).__name__}: {exc}", last=exc, attempts=attempt,
                                 elapsed_s=elapsed) from exc
            if on_retry is not None:
                on_retry(exc, attempt, pause)
            sleep(pause)


def _seconds(value: float) -> str:
    """Seconds for a message: three significant digits below 10 s ("0.25", "9.3"), tenths above ("1234.5")."""
    text = f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


class Backoff:
    """Consecutive failures under one :class:`RetryPolicy`, for retry loops that are not call-shaped.

    ``next_delay()`` counts one more failure and returns the delay before the next try; ``reset()`` is called when
    a try succeeds; ``exhausted`` says whether the policy allows no further try (``max_attempts`` failures in a row,
    or ``deadline_s`` since the first of them). Not thread-safe: the thread that makes the tries owns it (a reader's
    poll, one writer thread).
    """

    def __init__(self, policy: RetryPolicy, *, random: Callable[[], float] = _uniform,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.random = random
        self.clock = clock
        self.failures = 0  # consecutive failures since the last reset
        self._first_failure: float | None = None

    @property
    def initial_s(self) -> float:
        """The policy's first delay."""
        return self.policy.initial_s

    @property
    def max_s(self) -> float:
        """The policy's largest delay."""
        return self.policy.max_s

    def next_delay(self) -> float:
        """Count one more failure; the delay before the next try."""
        if self._first_failure is None:
            self._first_failure = self.clock()
        self.failures += 1
        return self.policy.delay(self.failures, self.random)

    def failing_for(self) -> float:
        """Seconds since the first failure in a row (0.0 when the last try succeeded)."""
        since = self._first_failure
        return 0.0 if since is None else max(0.0, self.clock() - since)

    @property
    def exhausted(self) -> bool:
        """True when the failures counted leave no try under the policy's ``max_attempts`` or ``deadline_s``."""
        return self.failures > 0 and self.policy.stops_after(self.failures, self.failing_for())

    def reset(self) -> None:
        """A try succeeded: the next failure starts from the first delay again."""
        self.failures = 0
        self._first_failure = None
