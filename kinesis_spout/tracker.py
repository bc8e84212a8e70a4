"""The in-flight record tracker of one shard, and the types its callers use: the names to import it by.

The library has one tracker, :class:`~kinesis_spout.tracking.spans.SpanTracker` (built in
:mod:`kinesis_spout.tracking`): it tracks one shard's records from emission until they are done (acked, or
dead-lettered once their retries ran out), keeps the retry queue and the message timeouts, and derives the safe
checkpoint. ``InflightRecordTracker`` is the
same class under the name the original Storm spout gave its tracker: ``kinesis_spout.InflightRecordTracker is
SpanTracker``. It takes every argument the per-record tracker that carried that name before took, and answers every
call as it did (a differential test holds it to that tracker, now a reference model in the tests).

This module also re-exports :class:`~kinesis_spout.retry.RetryBackoff` (the delays between a record's failure and its
re-emission, a setting of :class:`~kinesis_spout.config.TrackingSettings`: a retry policy of delays alone, defined
with the policy in :mod:`kinesis_spout.retry`), :class:`FailOutcome` and :class:`TrackerStats`, the answers of
``fail`` and ``stats``. Who imports it: the spout, the configuration, the Spark pipeline and the
dead-letter worker, for these types; users, for the tracker.

PURE: standard library and the library's pure modules only, no threads, clocks or I/O.
"""

from __future__ import annotations

from kinesis_spout.retry import RetryBackoff
from kinesis_spout.tracking.outcomes import FailOutcome, TrackerStats
from kinesis_spout.tracking.spans import Span, SpanTracker

__all__ = ["FailOutcome", "InflightRecordTracker", "RetryBackoff", "Span", "SpanTracker", "TrackerStats"]


#: The one tracker under the name of the original Storm spout's (see the module docstring).
InflightRecordTracker = SpanTracker
