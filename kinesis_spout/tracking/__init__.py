"""The parts of the in-flight record tracker (:class:`kinesis_spout.tracker.InflightRecordTracker`), one concept
per module. Callers import the tracker and its types from :mod:`kinesis_spout.tracker`; these modules are its
inside and import nothing above :mod:`kinesis_spout.records` and :mod:`kinesis_spout.errors`.

- :mod:`~kinesis_spout.tracking.keys`: a key as a rank (one int) and back;
- :mod:`~kinesis_spout.tracking.outcomes`: :class:`FailOutcome` and :class:`TrackerStats`;
- :mod:`~kinesis_spout.tracking.inflight`: the records of one shard in flight in emission order, the safe
  checkpoint, compaction and first-emission timeouts (:class:`InflightRecords`, the tracker's base class: the
  per-record hot paths live there);
- :mod:`~kinesis_spout.tracking.retries`: the retry queue and the timeouts of re-emitted records
  (:class:`RetryQueue`);
- :mod:`~kinesis_spout.tracking.spans`: the span tracker (:class:`SpanTracker`): a batch of one shard's records
  as one span, acked whole in O(1), with the per-record tracker's checkpoint, retries and timeouts.

All of it is pure (no threads, clocks or I/O) and owned by the one thread that calls its tracker.
"""
