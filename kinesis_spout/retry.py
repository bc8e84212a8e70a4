"""Retrying: one policy of delays between tries with one stop rule, and one way to follow it.

:class:`RetryPolicy` is an immutable description: the first delay, how it grows from one failure to the next, its
ceiling, how much of it is randomised (jitter, so that many workers failing together do not retry together), and
when to stop (a number of tries, a deadline, or neither). It is pure: ``delay(attempt)`` is a number, and
:meth:`RetryPolicy.stop_reason` is THE stop rule every retry loop of the library asks.

Following a policy:

- :class:`Backoff` counts the consecutive failures of one loop: :meth:`Backoff.failed` counts a failed try and
  says (a :class:`Failure`) how long to pause and whether a try may follow; :meth:`Backoff.wait` makes the pause,
  ended early by an interrupt hook (a ``threading.Event``-like :class:`Interrupt` or a callable); ``reset()`` after
  a success. Its deadline counts from the first failure in a row, or from :meth:`Backoff.start` (the first try).
  Used by the readers, the checkpoint writer, the dead-letter worker, the pipeline's batch retries, the putter, the
  state maps' conflict rounds and consumer registration.
- :func:`call` runs a function under a Backoff: it tries it again on the errors it is told to retry until it
  succeeds, or raises :class:`RetryError`, which says what was tried, how often and for how long, with the last
  error as its cause.
- :func:`wait` is the interruptible sleep on its own.
- :class:`Outage` is the alarm clock of a writer that never gives up (the checkpoint writer, the dead-letter
  worker): how long its writes have kept failing, and whether that passed its deadline.

``sleep``, ``clock`` and ``random`` are injectable everywhere, so a test needs no real time. Core layer: the
standard library and :mod:`kinesis_spout.errors` only; no threads (an interrupt is passed in). Validation errors
are :class:`~kinesis_spout.errors.ConfigError` naming the setting. :class:`RetryError` belongs to the error tree
(:mod:`kinesis_spout.errors`) and is importable from here too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from random import random as _uniform
from typing import TYPE_CHECKING, Callable, Literal, Protocol, TypeVar, Union, cast, runtime_checkable

from kinesis_spout.errors import ConfigError, RetryError

__all__ = ["POLL_S", "Backoff", "Delays", "Failure", "Interrupt", "InterruptHook", "Outage", "RetryBackoff",
           "RetryError", "RetryPolicy", "StopReason", "call", "check_exponential", "exponential_delay", "wait"]

T = TypeVar("T")

#: Which limit of a policy ended the tries: its ``max_attempts`` or its ``deadline_s``.
StopReason = Literal["max_attempts", "deadline_s"]
#: The longest sleep between two looks at an interrupt that is a callable (an :class:`Interrupt` wakes a wait).
POLL_S = 0.2


class Delays(Protocol):
    """Anything that gives the delay after a failed try (``attempt`` 1 = the first try): a :class:`RetryPolicy`
    (a :class:`RetryBackoff` among them)."""

    def delay(self, attempt: int) -> float:
        """Seconds to wait after try number ``attempt`` failed."""
        ...


@runtime_checkable
class Interrupt(Protocol):
    """A flag that ends a wait as soon as it is set: a ``threading.Event`` (a close or stop event), or anything with
    the same two methods."""

    def is_set(self) -> bool:
        """True once the wait must end."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the flag; True when it is set."""
        ...


#: What may end a wait early: an :class:`Interrupt`, or a callable that returns True when the wait must end (looked
#: at before the wait and at least every :data:`POLL_S`).
InterruptHook = Union[Interrupt, Callable[[], bool]]


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
    ``[min_s, ceiling]``, where ``min_s`` is ``initial_s`` unless given: 0 gives the ceiling itself, 1 anything
    from ``min_s`` to the ceiling ("full jitter"; with ``min_s=0`` down to no delay at all). A delay is never below
    ``min_s`` nor above ``max_s``.

    ``max_attempts`` (tries in all, the first included; None: no limit) and ``deadline_s`` (seconds from the first
    try, or for a :class:`Backoff` not started from the first failure; None: no limit) say when to stop: see
    :meth:`stop_reason`.
    """

    initial_s: float = 0.1
    multiplier: float = 2.0
    max_s: float = 10.0
    jitter: float = 0.0
    max_attempts: int | None = None
    deadline_s: float | None = None
    min_s: float | None = None

    def __post_init__(self) -> None:
        check_exponential(type(self).__name__, self.initial_s, self.multiplier, self.max_s)
        if not (math.isfinite(self.max_s)):
            raise ConfigError(f"{type(self).__name__}.max_s must be a finite number of seconds, got {self.max_s!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError(f"RetryPolicy.jitter must be a fraction from 0 to 1, got {self.jitter!r}")
        if self.max_attempts is not None and (isinstance(self.max_attempts, bool)
                                              or not isinstance(self.max_attempts, int) or self.max_attempts < 1):
            raise ConfigError(f"RetryPolicy.max_attempts must be a whole number >= 1 (or None for no limit), got "
                              f"{self.max_attempts!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ConfigError(f"RetryPolicy.deadline_s must be > 0 seconds (or None for no deadline), got "
                              f"{self.deadline_s!r}")
        if self.min_s is not None and not 0 <= self.min_s <= self.initial_s:
            raise ConfigError(f"RetryPolicy.min_s must be from 0 to initial_s ({self.initial_s!r}) (or None: "
                              f"initial_s), got {self.min_s!r}")

    def ceiling(self, attempt: int) -> float:
        """The delay after try ``attempt`` failed, before jitter: the most it can be."""
        return exponential_delay(self.initial_s, self.multiplier, self.max_s, attempt)

    def delay(self, attempt: int, random: Callable[[], float] = _uniform) -> float:
        """Seconds to wait after try number ``attempt`` (1 = the first) failed. ``random`` (values in [0, 1]) is
        called only when there is jitter; a value outside [0, 1] is clamped, so the delay stays within bounds."""
        top = self.ceiling(attempt)
        floor = self.initial_s if self.min_s is None else self.min_s
        if not self.jitter or top <= floor:
            return top
        spread = top - floor
        r = min(1.0, max(0.0, random()))
        d = floor + (1.0 - self.jitter) * spread + self.jitter * spread * r
        return d if d < top else top  # rounding must not lift it past the ceiling (nor so past max_s)

    def stop_reason(self, attempts: int, elapsed_s: float, pause_s: float = 0.0) -> StopReason | None:
        """THE stop rule: which limit leaves no try after ``attempts`` tries failed, ``elapsed_s`` seconds after the
        deadline's start, when the next try would come after ``pause_s`` more: ``"max_attempts"`` (that many tries
        were made), ``"deadline_s"`` (:meth:`past_deadline`), or None (a try may follow). The tries are named first
        when both limits are reached."""
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return "max_attempts"
        if self.past_deadline(elapsed_s, pause_s):
            return "deadline_s"
        return None

    def past_deadline(self, elapsed_s: float, pause_s: float = 0.0) -> bool:
        """Whether a try ``pause_s`` seconds from now, ``elapsed_s`` after the deadline's start, could not start
        before ``deadline_s``: a pause that would end at or past it is not made (False without a deadline)."""
        return self.deadline_s is not None and elapsed_s + pause_s >= self.deadline_s

    def stops_after(self, attempts: int, elapsed_s: float, pause_s: float = 0.0) -> bool:
        """True when no try may follow (:meth:`stop_reason` names a limit)."""
        return self.stop_reason(attempts, elapsed_s, pause_s) is not None


@dataclass(frozen=True, slots=True, repr=False)
class RetryBackoff(RetryPolicy):
    """A :class:`RetryPolicy` of delays alone: ``delay(1) == initial_s``, ``delay(n) == initial_s * multiplier **
    (n - 1)``, never more than ``max_s``; no jitter, no limit of tries, no deadline.

    The form of the settings that give delays and leave the counting to their owner: the tracker's
    ``TrackingSettings.retry_backoff`` (the delay between a record's failure and its re-emission; ``retry_limit``
    counts the tries) and ``SpoutPipeline(batch_retry_backoff=...)`` (``batch_retry_limit`` and
    ``batch_retry_deadline_s`` count, the pipeline adds its jitter). Being a policy, it goes wherever one goes (a
    :class:`Backoff`, :func:`call`, the dead-letter worker). Refuses ``jitter``, ``max_attempts``, ``deadline_s`` and
    ``min_s``, which its owners would not follow: give a :class:`RetryPolicy` where a whole policy is taken.
    """

    if TYPE_CHECKING:  # the three delays are what it takes (the other fields, given, are refused)
        def __init__(self, initial_s: float = 0.1, multiplier: float = 2.0, max_s: float = 10.0) -> None: ...

    def __post_init__(self) -> None:
        RetryPolicy.__post_init__(self)
        given = [f"{name}={value!r}" for name, value in (("jitter", self.jitter), ("max_attempts", self.max_attempts),
                                                           ("deadline_s", self.deadline_s), ("min_s", self.min_s))
                 if value is not None and not (name == "jitter" and value == 0)]
        if given:
            raise ConfigError(f"RetryBackoff holds delays only (initial_s, multiplier, max_s), got {', '.join(given)}: "
                              f"the tries are counted by the setting beside it (retry_limit, batch_retry_limit); "
                              f"give a RetryPolicy where a whole policy is taken")

    def __repr__(self) -> str:
        return f"RetryBackoff(initial_s={self.initial_s!r}, multiplier={self.multiplier!r}, max_s={self.max_s!r})"

    def policy(self) -> RetryPolicy:
        """The same delays as a plain :class:`RetryPolicy` (to add jitter or limits with ``dataclasses.replace``)."""
        return RetryPolicy(initial_s=self.initial_s, multiplier=self.multiplier, max_s=self.max_s)


def wait(seconds: float, interrupt: InterruptHook | None = None, *, sleep: Callable[[float], object] = time.sleep,
         clock: Callable[[], float] = time.monotonic, poll_s: float = POLL_S) -> bool:
    """Wait ``seconds``; False when ``interrupt`` ended the wait (or was set before it), True when it was all made.

    No interrupt: ``sleep(seconds)``. An :class:`Interrupt` (a close or stop event) is looked at first, then waited
    on for ``seconds`` (it wakes the wait when set). A callable is asked before any sleep and after each, the sleeps
    (``sleep``) at most ``poll_s`` long and ending at ``clock() + seconds``. Runs on the caller's thread."""
    if interrupt is None:
        sleep(seconds)
        return True
    if isinstance(interrupt, Interrupt):
        return not interrupt.is_set() and not interrupt.wait(seconds)
    end = clock() + seconds
    while True:
        if interrupt():
            return False
        left = end - clock()
        if left <= 0:
            return True
        sleep(min(left, poll_s))


@dataclass(frozen=True, slots=True)
class Failure:
    """What :meth:`Backoff.failed` says about a failed try: ``attempt`` tries have failed in a row (this one
    included), ``elapsed_s`` seconds passed since the deadline's start, the next try would come after ``pause_s``,
    and ``stop`` names the policy's limit that leaves no further try (None: try again after ``pause_s``)."""

    attempt: int
    pause_s: float
    elapsed_s: float
    stop: StopReason | None


class Backoff:
    """The consecutive failed tries of one retry loop under one :class:`RetryPolicy`.

    ``failed()`` counts a failed try and returns a :class:`Failure` (the pause before the next try, or the limit
    that ends the tries); ``wait(pause, interrupt)`` makes the pause; ``reset()`` is called when a try succeeds.
    The deadline counts from the first failure in a row, or from ``start()`` when the loop calls it before its
    first try. Loops that stop once the deadline has passed rather than before a pause that would cross it use
    ``next_delay()`` with :attr:`exhausted` or :attr:`expired`. ``random``, ``clock`` and ``sleep`` are injectable
    for tests. Not thread-safe: the thread that makes the tries owns it.
    """

    def __init__(self, policy: RetryPolicy, *, random: Callable[[], float] = _uniform,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep) -> None:
        self.policy = policy
        self.random = random
        self.clock = clock
        self.sleep = sleep
        self.failures = 0  # consecutive failures since the last reset
        self._since: float | None = None  # the deadline's start: start(), else the first failure in a row

    @property
    def initial_s(self) -> float:
        """The policy's first delay."""
        return self.policy.initial_s

    @property
    def max_s(self) -> float:
        """The policy's largest delay."""
        return self.policy.max_s

    def start(self) -> None:
        """The first try starts now: the deadline counts from here, not from the first failure."""
        self._since = self.clock()

    def next_delay(self) -> float:
        """Count one more failure; the delay before the next try."""
        if self._since is None:
            self._since = self.clock()
        self.failures += 1
        return self.policy.delay(self.failures, self.random)

    def failed(self) -> Failure:
        """Count one more failed try; the pause before the next, and whether the policy allows one
        (:meth:`RetryPolicy.stop_reason`, the pause counted: no pause is made that would end at the deadline)."""
        pause = self.next_delay()
        elapsed = self.failing_for()
        return Failure(self.failures, pause, elapsed, self.policy.stop_reason(self.failures, elapsed, pause))

    def wait(self, seconds: float, interrupt: InterruptHook | None = None) -> bool:
        """:func:`wait` with this backoff's sleep and clock: False when ``interrupt`` ended it."""
        return wait(seconds, interrupt, sleep=self.sleep, clock=self.clock)

    def failing_for(self) -> float:
        """Seconds since the deadline's start (``start()`` or the first failure in a row; 0.0 when neither)."""
        since = self._since
        return 0.0 if since is None else max(0.0, self.clock() - since)

    @property
    def exhausted(self) -> bool:
        """True when the failures counted leave no try under the policy's ``max_attempts`` or ``deadline_s`` (the
        deadline passed, no pause counted)."""
        return self.failures > 0 and self.policy.stops_after(self.failures, self.failing_for())

    @property
    def expired(self) -> bool:
        """True when the policy's deadline has passed since ``start()`` or the first failure (tries not counted)."""
        return self._since is not None and self.policy.past_deadline(self.failing_for())

    def reset(self) -> None:
        """A try succeeded: the next failure starts from the first delay again (and the deadline with it)."""
        self.failures = 0
        self._since = None


class Outage:
    """How long a writer that never gives up has kept failing, against ``deadline_s``: the clock starts at the
    first failure in a row (:meth:`failed`), or earlier at :meth:`start` (a lost connection seen before a write),
    and stops at :meth:`recovered`. The writer raises its alarm when :meth:`failed` answers a duration, and clears
    it when a write succeeds. Not thread-safe: the writer's thread owns it."""

    def __init__(self, deadline_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.deadline_s = deadline_s
        self.clock = clock
        self._since: float | None = None

    def start(self) -> None:
        """Writes are failing from now, unless they already were."""
        if self._since is None:
            self._since = self.clock()

    def failed(self) -> float | None:
        """A write failed: the seconds writes have kept failing when that reached ``deadline_s``, else None."""
        self.start()
        elapsed = self.clock() - cast(float, self._since)
        return elapsed if elapsed >= self.deadline_s else None

    def recovered(self) -> bool:
        """A write succeeded: the clock stops. True when writes had been failing."""
        failing, self._since = self._since is not None, None
        return failing


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
    backoff = Backoff(policy, random=random, clock=clock, sleep=sleep)
    backoff.start()
    while True:
        try:
            return fn()
        except retry_on as exc:
            if retry_if is not None and not retry_if(exc):
                raise
            failure = backoff.failed()
            if failure.stop is not None:
                limit = (f"max_attempts={policy.max_attempts}" if failure.stop == "max_attempts" else
                         f"deadline_s={policy.deadline_s:g}")
                tries = "1 try" if failure.attempt == 1 else f"{failure.attempt} tries"
                raise RetryError(f"{what}: gave up after {tries} in {_seconds(failure.elapsed_s)} s ({limit}); last "
                                 f"error: {type(exc).__name__}: {exc}", last=exc, attempts=failure.attempt,
                                 elapsed_s=failure.elapsed_s) from exc
            if on_retry is not None:
                on_retry(exc, failure.attempt, failure.pause_s)
            backoff.wait(failure.pause_s)


def _seconds(value: float) -> str:
    """Seconds for a message: three significant digits below 10 s ("0.25", "9.3"), tenths above ("1234.5")."""
    text = f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text
