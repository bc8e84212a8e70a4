"""Retriable read errors: one rule for every loop that reads a shard.

The shard readers, the Spark tasks' paced getter, the Spark driver's reads and a waiting fan-out subscription all
meet the same errors (throttling, a 500, a connection cut, a subscription refused while the last one ends). Each
keeps a :class:`~kinesis_spout.retry.Backoff` made by :func:`read_backoff` and asks :func:`pause_after` what to do
after an error: not retriable, it is raised at once; retriable, the next try comes after the policy's next delay,
and after ``retries`` retriable errors in a row the next one is raised, saying that the reads gave up. Each retry
is logged by :func:`log_retried_error`: the first :data:`QUIET_RETRIES` of a run at DEBUG, then at WARNING; the
first read that succeeds after a WARNING says so at INFO (:func:`read_succeeded`).

Pure but for logging: the backoff is the caller's (one thread owns it).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kinesis_spout.errors import KinesisError
from kinesis_spout.retry import Backoff, RetryPolicy

__all__ = ["QUIET_RETRIES", "log_retried_error", "pause_after", "read_backoff", "read_succeeded"]

log = logging.getLogger(__name__)

#: Retried errors in a row (throttles, 500s) logged at DEBUG only: a shard throttled now and then, or an emulator's
#: occasional 500, is routine. The next one is logged at WARNING with the count, and so is each doubling of the run
#: (2x, 4x...); a reader that recovers after a WARNING says so at INFO.
QUIET_RETRIES = 3


def read_backoff(policy: RetryPolicy, retries: int) -> Backoff:
    """The backoff of one read loop: ``policy``'s delays, ``retries`` retriable errors in a row at most (a negative
    number counts as 0: the first error is raised)."""
    return Backoff(replace(policy, max_attempts=max(retries, 0) + 1))


def pause_after(backoff: Backoff, exc: KinesisError, shard_id: str) -> float:
    """The pause before the next read of ``shard_id`` after ``exc``, the failure counted in ``backoff`` and logged.
    Raises ``exc`` when it is not retriable, and an error of ``exc``'s kind that says the reads gave up (with
    ``exc``'s code and retriable flag, ``exc`` as its cause) when it is the first past the backoff's retries. The
    caller tells :func:`read_succeeded` of a read that succeeds."""
    if not exc.retriable:
        raise exc
    pause = backoff.next_delay()
    if backoff.exhausted:
        # the same kind of error (a throttle stays a ThrottledError, still retriable later), saying it gave up
        kind = type(exc) if type(exc).__init__ is KinesisError.__init__ else KinesisError
        raise kind(f"{exc} (gave up after {backoff.failures - 1} retries)", code=exc.code,
                   retriable=exc.retriable) from exc
    log_retried_error(exc, shard_id, backoff.failures, backoff.failing_for(), pause)
    return pause


def read_succeeded(backoff: Backoff, shard_id: str) -> None:
    """A read of ``shard_id`` succeeded: the count of failures in a row starts again, and a run long enough to have
    been logged at WARNING is said to be over (INFO)."""
    if backoff.failures > QUIET_RETRIES:
        log.info("reads of %s recovered after %d failed calls in a row", shard_id, backoff.failures)
    backoff.reset()


def log_retried_error(exc: KinesisError, shard_id: str, failures: int, failing_for_s: float, pause: float) -> None:
    """Log one retried read error of ``shard_id``, the ``failures``-th in a row: at DEBUG while the run is at most
    :data:`QUIET_RETRIES` long, at WARNING (with the count) when it passes that and at each doubling of the run."""
    run = failures // (QUIET_RETRIES + 1)
    if failures > QUIET_RETRIES and failures % (QUIET_RETRIES + 1) == 0 and run & (run - 1) == 0:
        log.warning("%s; %d failed calls in a row on %s for %.1f s, retrying in %.2f s (the first %d of a run are "
                    "logged at DEBUG)", exc, failures, shard_id, failing_for_s, pause, QUIET_RETRIES)
    else:
        log.debug("%s; retrying %s in %.2f s (failure %d in a row)", exc, shard_id, pause, failures)
