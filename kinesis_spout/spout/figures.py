"""The figures of one owned shard: a :class:`~kinesis_spout.metrics.shard.ShardMetrics` made from its lifecycle.

Called by ``KinesisSpout.metrics()`` with the registry's lock held (it updates the lifecycle's ``stored`` and
``stored_at``, which that lock guards).
"""

from __future__ import annotations

from typing import Mapping

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.metrics.shard import ShardMetrics
from kinesis_spout.spout.kpl import checkpoint_text
from kinesis_spout.spout.shards import ShardLifecycle

__all__ = ["shard_figures"]


def shard_figures(s: ShardLifecycle, now: float, written: Mapping[str, Checkpoint]) -> ShardMetrics:
    """One shard's snapshot; ``written`` is the checkpoint writer's last stored checkpoint per shard."""
    st = s.tracker.stats
    stored = written.get(s.shard_id)
    if stored is not None and stored != s.stored:
        s.stored, s.stored_at = stored, now
    reader, getter = s.reader, s.reader.getter
    return ShardMetrics(
        s.shard_id, checkpoint_text(s.aggregates, s.restored, s.tracker.checkpoint), s.tracker.inflight_count,
        reader.buffered, s.tracker.retry_queue_len, reader.millis_behind_latest, st.emitted, st.acked, st.failed,
        st.dead_lettered, s.finished, reader.ended, getter.corrupt_aggregates, s.tracker.dead_letters_pending,
        inflight_bytes=s.tracker.inflight_bytes, emitted_bytes=s.emitted_bytes, retried=st.retried,
        timed_out=st.timed_out, records_read=reader.records_read, getrecords_calls=reader.calls,
        getrecords_retried_errors=reader.retried_errors, expired_iterators=getter.expired_iterators,
        foreign_user_records=getter.foreign_user_records, checkpoint_age_s=now - s.stored_at,
        subscriptions=getattr(getter, "subscriptions", 0), subscription_renewals=getattr(getter, "renewals", 0))
