"""The in-flight record tracker of one shard, and the types its callers use: the names to import it by.

The library has one tracker, :class:`~kinesis_spout.tracking.spans.SpanTracker` (built in
:mod:`kinesis_spout.tracking`): it tracks one shard's records from emission until they are done (acked, or
dead-lettered once their retries ran out), keeps the retry queue and the message timeouts, and derives the safe
checkpoint. ``InflightRecordTracker`` is the
same class under the name the original Storm spout gave its tracker: ``kinesis_spout.InflightRecordTracker is
SpanTracker``. It takes every argument the per-record tracker that carried that name before took, and answers every
call as it did (a differential test holds it to that tracker, now a reference model in the tests).

This module also holds :class:`RetryBackoff` (the delays between a record's failure and its re-emission, a setting
of :class:`~kinesis_spout.config.TrackingSettings`) and re-exports :class:`FailOutcome` and :class:`TrackerStats`, the
answers of ``fail`` and ``stats``. Who imports it: the spout, the configuration, the Spark pipeline and the
dead-letter worker, for these types; users, for the tracker.

PURE: standard library and the library's pure modules only, no threads, clocks or I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from kinesis_spout.retry import RetryPolicy, check_exponential, exponential_delay
from kinesis_spout.tracking.outcomes import FailOutcome, TrackerStats
from kinesis_spout.tracking.spans import Span, SpanTracker

__all__ = ["FailOutcome", "InflightRecordTracker", "RetryBackoff", "Span", "SpanTracker", "TrackerStats"]


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """Exponential backoff between the failure of a record and its re-emission.

    ``delay(1) == initial_s``, ``delay(n) == initial_s * multiplier ** (n - 1)``, never more than ``max_s``: the
    delays of a :class:`~kinesis_spout.retry.RetryPolicy` without jitter or limits (:meth:`policy`).
    """

    initial_s: float = 0.1
    multiplier: float = 2.0
    max_s: float = 10.0

    def __post_init__(self) -> None:
        check_exponential("RetryBackoff", self.initial_s, self.multiplier, self.max_s)

    def delay(self, attempt: int) -> float:
        """Seconds to wait before re-emitting a record whose attempt number ``attempt`` (1 = first) just failed."""
        return exponential_delay(self.initial_s, self.multiplier, self.max_s, attempt)

    def policy(self) -> RetryPolicy:
        """The same delays as a :class:`~kinesis_spout.retry.RetryPolicy` (no jitter, no limit of tries)."""
        return RetryPolicy(initial_s=self.initial_s, multiplier=self.multiplier, max_s=self.max_s)


#: The one tracker under the name of the original Storm spout's (see the module docstring).
InflightRecordTracker = SpanTracker
