"""The in-flight record tracker of one shard (:class:`~kinesis_spout.tracking.spans.SpanTracker`, the library's one
tracker, also exported as ``kinesis_spout.InflightRecordTracker``), one concept per module. Callers import the tracker
and its types from :mod:`kinesis_spout.tracker`; these modules are its inside and import nothing above
:mod:`kinesis_spout.records`, :mod:`kinesis_spout.retry` and :mod:`kinesis_spout.errors`.

- :mod:`~kinesis_spout.tracking.keys`: a key as a rank (one int) and back;
- :mod:`~kinesis_spout.tracking.outcomes`: :class:`FailOutcome` and :class:`TrackerStats`;
- :mod:`~kinesis_spout.tracking.retries`: the retry queue and the timeouts of re-emitted records
  (:class:`RetryQueue`);
- :mod:`~kinesis_spout.tracking.span`: one span (a run of one shard's records emitted together), its records'
  states, its compaction, and the tracker's tuning knobs;
- :mod:`~kinesis_spout.tracking.span_list`: the spans of a shard, finding a record, dropping done spans;
- :mod:`~kinesis_spout.tracking.span_failures`: failures, retries, dead letters and message timeouts;
- :mod:`~kinesis_spout.tracking.spans`: the tracker (:class:`SpanTracker`): emission, acks (a whole span in O(1))
  and the safe checkpoint.

All of it is pure (no threads, clocks or I/O) and owned by the one thread that calls its tracker.
"""
