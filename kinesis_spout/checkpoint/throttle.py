"""The checkpoint throttle: at most one checkpoint write per shard every ``checkpoint_interval_s``.

One rule for both writers of checkpoints: the spout's :class:`~kinesis_spout.checkpoint.writer.CheckpointWriter`
(on its thread) and the Spark source's planning (:class:`~kinesis_spout.spark.source.planning.QueryPlanning`, on
Spark's planning thread). A shard never written is due at once; after a write (:meth:`CheckpointThrottle.wrote`) it
is due again ``interval_s`` later; an interval of 0 makes every shard due always. What may pass the throttle (a
flush, a shard's end) is the caller's decision.

PURE: times are handed in (``time.monotonic()`` values), no clock, no lock: each writer keeps its own throttle on
the thread that writes (or under its own lock).
"""

from __future__ import annotations

import math

__all__ = ["CheckpointThrottle"]


class CheckpointThrottle:
    """When each shard's checkpoint may be written next, ``interval_s`` seconds after its last write.

    Who calls: a checkpoint writer asks :meth:`due` (or :meth:`wait_s`, to know how long to sleep) before a write
    and calls :meth:`wrote` after one (or after looking at a shard that had nothing new, which counts the same).
    """

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._written_at: dict[str, float] = {}

    def wait_s(self, shard_id: str, now: float) -> float:
        """Seconds from ``now`` until the shard is due: 0.0 or less when it is due now (never written: -inf)."""
        last = self._written_at.get(shard_id)
        return -math.inf if last is None else self.interval_s - (now - last)

    def due(self, shard_id: str, now: float) -> bool:
        """True when the shard may be written at ``now``: never written, or ``interval_s`` since its last write."""
        last = self._written_at.get(shard_id)
        return last is None or now - last >= self.interval_s

    def wrote(self, shard_id: str, now: float) -> None:
        """The shard was written (or looked at with nothing to write) at ``now``: it is due ``interval_s`` later."""
        self._written_at[shard_id] = now
