"""What both runners of a pipeline do when ``process`` raises: the BATCH failed, not its records.

An exception of ``process`` (a sink that is down, a table write refused, a bug, an answer of a form
:func:`~kinesis_spout.spark.pipeline.batch.failed_message_ids` refuses) says nothing about any one record, so no record
is failed for it: the batch is held (its records neither acked nor failed) and tried again with the same records
after a jittered exponential backoff (``batch_retry_backoff``), up to ``batch_retry_limit`` more tries and while
``batch_retry_deadline_s`` (from the batch's first failure) allows another. Then ``run()`` ends with
:class:`~kinesis_spout.errors.BatchFailedError`: nothing of the batch was acked, failed or dead-lettered, so the
checkpoints stay before its records and the next run reads them again. The run's own limits (``stop()``, signals,
``timeout_s``, ``until``) end the wait between two tries within the loop's poll interval.

Records ``process`` fails by name are not this module's business: the runners hand them to the spout (retry
queue, then dead letters) as before.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from random import random as _uniform
from typing import Callable

from kinesis_spout.errors import BatchFailedError, ConfigError
from kinesis_spout.retry import Backoff, RetryBackoff, RetryPolicy, wait
from kinesis_spout.spark.pipeline.loop import RunLoop

__all__ = ["BATCH_RETRY_JITTER", "DEFAULT_BATCH_RETRY_BACKOFF", "BatchRetry", "batch_retry_policy", "summary"]

log = logging.getLogger(__name__)

#: The default delays between two tries of a failed batch: 1 s, doubling, at most 30 s (before jitter).
DEFAULT_BATCH_RETRY_BACKOFF = RetryBackoff(initial_s=1.0, multiplier=2.0, max_s=30.0)
#: How much of each delay is drawn at random, so that pipelines failing on one sink do not retry in step.
BATCH_RETRY_JITTER = 0.5
SUMMARY_CHARS = 300


def batch_retry_policy(limit: int, deadline_s: float | None, backoff: RetryBackoff | None) -> RetryPolicy:
    """The policy of ``SpoutPipeline(batch_retry_limit=..., batch_retry_deadline_s=..., batch_retry_backoff=...)``,
    checked; a ConfigError names the setting. Called by the pipeline's constructor."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 1_000_000:
        raise ConfigError(f"batch_retry_limit must be a whole number from 0 to 1000000 (the tries of a failed batch "
                          f"after its first; 0 ends run() at the first exception of process()), got {limit!r}")
    if deadline_s is not None and (isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float))
                                   or not 0 < deadline_s < math.inf):
        raise ConfigError(f"batch_retry_deadline_s must be a number of seconds > 0 (or None: batch_retry_limit "
                          f"alone ends the tries), got {deadline_s!r}")
    backoff = DEFAULT_BATCH_RETRY_BACKOFF if backoff is None else backoff
    if not isinstance(backoff, RetryBackoff):
        raise ConfigError(f"batch_retry_backoff must be a RetryBackoff (e.g. RetryBackoff(initial_s=1.0, "
                          f"multiplier=2.0, max_s=30.0)), got {backoff!r}")
    return replace(backoff.policy(), jitter=BATCH_RETRY_JITTER, max_attempts=limit + 1,
                   deadline_s=None if deadline_s is None else float(deadline_s))


def summary(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message, at most 300 characters."""
    message = str(exc).strip()
    text = message.splitlines()[0] if message else ""
    if len(text) > SUMMARY_CHARS:
        text = text[:SUMMARY_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class BatchRetry:
    """The failed tries of ONE batch under the pipeline's ``batch_retry`` policy.

    ``batch_id`` is its id (its txid in exactly-once mode, where ``kind`` is "txid"), which names it in logs and
    errors ("batch 7", "txid 7"); ``records`` is how many it holds; ``next_run`` says what the next run does with
    them (for the final error). Who calls: a runner, on the run
    thread only, which makes a new BatchRetry for each batch it takes (so the tries of a batch count from 1 and
    a success never leaves a count behind) and calls :meth:`failed` after each try that raised. Not thread-safe.
    ``clock`` and ``random`` go to its :class:`~kinesis_spout.retry.Backoff` (the deadline's clock, the jitter).
    """

    def __init__(self, policy: RetryPolicy, loop: RunLoop, batch_id: int, records: int, next_run: str, *,
                 kind: str = "batch", clock: Callable[[], float] = time.monotonic,
                 random: Callable[[], float] = _uniform) -> None:
        self._backoff = Backoff(policy, clock=clock, random=random)
        self._loop = loop
        self.batch_id = batch_id
        self.label = f"{kind} {batch_id}"
        self.records = records
        self.next_run = next_run

    @property
    def attempt(self) -> int:
        """The number of the next try (1 before any failure): what ``batch.attempt`` shows ``process``."""
        return self._backoff.failures + 1

    def failed(self, exc: BaseException) -> bool:
        """Count a try whose ``process`` raised ``exc``. Logs it (WARNING, with the traceback at the first failure
        only), waits the backoff and returns True: the caller tries the same batch again. Returns False when the
        run ends during the wait (nothing of the batch is acked or failed). When no try is left, logs at ERROR and
        raises BatchFailedError chained from ``exc``."""
        policy = self._backoff.policy
        failure = self._backoff.failed()
        tries = failure.attempt
        if failure.stop == "max_attempts":
            raise self._give_up(exc, tries, failure.elapsed_s, f"batch_retry_limit={tries - 1}") from exc
        if failure.stop == "deadline_s":
            raise self._give_up(exc, tries, failure.elapsed_s,
                                f"batch_retry_deadline_s={policy.deadline_s:g}") from exc
        of = f" of {policy.max_attempts}" if policy.max_attempts is not None else ""
        log.warning("%s: process() raised (try %d%s): %s; its %d records are held (neither acked nor failed) and "
                    "the batch is tried again with the same records in %.2f s", self.label, tries, of, summary(exc),
                    self.records, failure.pause_s, exc_info=exc if tries == 1 else None)
        # the run's limits end the wait; the loop's own wait between two looks wakes at once on stop()
        if wait(failure.pause_s, self._loop.finished, sleep=self._nap):
            return True
        log.warning("%s: the run ends while the batch waits for try %d; its %d records were neither acked nor failed "
                    "and %s", self.label, tries + 1, self.records, self.next_run)
        return False

    def _nap(self, seconds: float) -> None:
        self._loop.wait_until(time.monotonic() + seconds)

    def _give_up(self, exc: BaseException, tries: int, elapsed: float, limit: str) -> BatchFailedError:
        message = (f"{self.label} failed {tries} {'try' if tries == 1 else 'tries'} in {elapsed:.1f} s ({limit}); "
                   f"the last: process() raised {summary(exc)}. run() ends: no record of it was acked or "
                   f"dead-lettered, and the checkpoints stay before its {self.records} records, so {self.next_run}. "
                   f"Fix the cause (the sink, or process()) and run the pipeline again: it resumes from the "
                   f"checkpoint. To wait longer for a sink that comes back, raise batch_retry_limit or "
                   f"batch_retry_deadline_s")
        log.error("%s", message, exc_info=exc if tries == 1 else None)
        return BatchFailedError(message, batch_id=self.batch_id, tries=tries, elapsed_s=elapsed,
                                retriable=bool(getattr(exc, "retriable", False)))
