"""What the in-flight tracker reports: the outcome of a failure and its counters. Pure value types."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FailOutcome", "TrackerStats"]


class FailOutcome(enum.Enum):
    """What :meth:`~kinesis_spout.tracking.spans.SpanTracker.fail` did with a failed record."""

    RETRY = "retry"  # queued for re-emission after a backoff
    DEAD_LETTER = "dead_letter"  # retries exhausted: a pending dead letter, done once its write succeeded
    UNKNOWN = "unknown"  # not in flight (unknown, already done, or already waiting for its retry): ignored


@dataclass(slots=True)
class TrackerStats:
    """Counters of one tracker, for metrics, read through its ``stats``
    (:attr:`~kinesis_spout.tracking.spans.SpanTracker.stats`). Only the tracker writes them (from the one thread that
    calls it).

    ``emitted`` counts new records (not re-emissions, which are ``retried``); ``acked`` counts successful acks;
    ``dead_lettered`` counts dead letters written (``dead_letter_written``);
    ``failed`` counts every failure that was acted upon, timeouts included (``timed_out`` is the part caused by the
    message timeout); ``unknown_*`` count acks and fails that changed nothing.
    """

    emitted: int = 0
    duplicates_ignored: int = 0
    acked: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    timed_out: int = 0
    unknown_acks: int = 0
    unknown_fails: int = 0
