"""The figures of one shard read by a spout: :class:`ShardMetrics`, as ``KinesisSpout.metrics()`` returns them.

A frozen value (pure data, no I/O): the spout makes one per owned shard under its lock; pipelines keep them in their
figures and the Prometheus collector reads them at scrape time, from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ShardMetrics"]


@dataclass(frozen=True)
class ShardMetrics:
    """One shard's figures. ``checkpoint`` is the safe checkpoint's sequence number, as ``"SEQ:SUB"`` while it
    stands inside a KPL aggregate (after its user record SUB). Counters (``emitted`` ... ``expired_iterators``)
    count since the spout started reading the shard. ``checkpoint_age_s`` is how long the *stored* checkpoint has
    not moved (as seen by calls of ``metrics()``: their interval is its resolution)."""

    shard_id: str
    checkpoint: str | None
    inflight: int
    buffered: int
    retry_queue: int
    millis_behind_latest: int | None
    emitted: int
    acked: int
    failed: int
    dead_lettered: int
    finished: bool
    read_to_end: bool = False  # the shard is closed and its reader fetched its last record (maybe still buffered)
    corrupt_aggregates: int = 0  # records with the KPL magic that did not decode, delivered whole
    dead_letters_pending: int = 0  # dead letters not written yet (counted in inflight; they hold the checkpoint)
    inflight_bytes: int = 0
    emitted_bytes: int = 0
    retried: int = 0  # re-emissions of failed records
    timed_out: int = 0  # failures caused by the message timeout (counted in failed too)
    records_read: int = 0  # records fetched from Kinesis (before the buffer)
    getrecords_calls: int = 0
    getrecords_retried_errors: int = 0  # throttles, 5xx, lost connections: retried after a backoff
    expired_iterators: int = 0
    foreign_user_records: int = 0  # user records of KPL aggregates dropped: their hash keys belong to other shards
    checkpoint_age_s: float = 0.0
    subscriptions: int = 0  # retrieval="fanout": SubscribeToShard calls that succeeded (renewals included)
    subscription_renewals: int = 0  # retrieval="fanout": subscriptions that ended cleanly and were renewed
    stream_name: str = ""  # the shard's stream, set by a MultiStreamSpout ("": the spout's one stream)

    @property
    def key(self) -> str:
        """``shard_id``, or ``"{stream_name}/{shard_id}"`` for a shard of a MultiStreamSpout (unique across its
        streams): the key of the shard in a pipeline's per-shard figures."""
        return f"{self.stream_name}/{self.shard_id}" if self.stream_name else self.shard_id
