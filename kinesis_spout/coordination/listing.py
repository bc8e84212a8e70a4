"""The shard-listing interval: the stream's shards are listed again every ``shard_sync_interval_s``, or at once.

One rule for both readers that list shards: the spout's :class:`~kinesis_spout.coordination.sync.ShardSync` (on its
sync thread) and the Spark source's planning (:class:`~kinesis_spout.spark.source.planning.QueryPlanning`, on
Spark's planning thread). Never listed: due. Listed (:meth:`ListingSchedule.listed`): due again ``interval_s``
later. :meth:`ListingSchedule.relist` (a shard ended: look for its children; a Trigger.AvailableNow start) makes
the next look due at once.

PURE: times are handed in (``time.monotonic()`` values), no clock, no lock: one thread owns a schedule.
"""

from __future__ import annotations

__all__ = ["ListingSchedule"]


class ListingSchedule:
    """When the shards are listed next: asked with :meth:`due` before a look at the shards, told with
    :meth:`listed` after a listing, and :meth:`relist` to have the next look list them again."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._listed_at: float | None = None

    def due(self, now: float) -> bool:
        """True when the shards must be listed at ``now``: never listed, relisting asked, or ``interval_s`` since
        the last listing."""
        return self._listed_at is None or now - self._listed_at >= self.interval_s

    def listed(self, now: float) -> None:
        """The shards were listed at ``now``."""
        self._listed_at = now

    def relist(self) -> None:
        """List the shards at the next look, whatever the interval."""
        self._listed_at = None
