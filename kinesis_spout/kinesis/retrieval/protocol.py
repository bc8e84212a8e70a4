"""What the readers need of a shard getter: :class:`ShardRetrieval`, and the :class:`FetchResult` each fetch returns.

Both getters satisfy it: polling (:class:`~kinesis_spout.kinesis.retrieval.polling.ShardGetter`, GetRecords) and
enhanced fan-out (:class:`~kinesis_spout.kinesis.retrieval.fanout.FanOutGetter`, SubscribeToShard). Neither derives
from the other; they share the conversion of Kinesis records (:mod:`~kinesis_spout.kinesis.retrieval.conversion`).
Getters are made by :mod:`~kinesis_spout.kinesis.retrieval.factory` only. Pure: no I/O.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Callable, NamedTuple, Protocol, runtime_checkable

from kinesis_spout.positions import Position
from kinesis_spout.records import Record

__all__ = ["LATEST_MARGIN", "FetchResult", "ShardRetrieval"]

#: How far before a LATEST iterator (or subscription) was taken a re-seek after its expiry starts (allows for
#: clock skew).
LATEST_MARGIN = timedelta(seconds=1)


class FetchResult(NamedTuple):
    """One GetRecords call's outcome. ``shard_end`` is true once the shard is closed and fully read. ``fetched``
    counts the Kinesis records of the reply: more than zero with no ``records`` when every user record of its
    aggregates belonged to other shards (the reply was not empty, the shard may hold more). Every field is required:
    a getter that left ``fetched`` out would make its readers take such a reply for the shard's tip."""

    records: list[Record]
    millis_behind_latest: int | None
    shard_end: bool
    fetched: int


@runtime_checkable
class ShardRetrieval(Protocol):
    """One shard read by one owner (a :class:`~kinesis_spout.kinesis.retrieval.reader.BufferedShardReader`, a
    Spark task or the driver's cursor); not thread-safe beyond what each getter says.

    ``position`` is after the last record handed out (where a new iterator or subscription starts); ``shard_end``
    turns true once the shard is closed and read to its end. ``pushed`` getters (fan-out) have their records
    delivered by a thread of their own: an empty ``fetch`` means "not yet", ``pending`` tells when to fetch again and
    ``on_pending`` (set by the reader) is called from that thread when something arrives. A polling getter is never
    pushed, always ``pending``, and never calls ``on_pending``. The counters are read by the spout's metrics.
    """

    on_pending: Callable[[], None]

    @property
    def shard_id(self) -> str: ...

    @property
    def position(self) -> Position: ...

    @property
    def shard_end(self) -> bool: ...

    @property
    def pushed(self) -> bool: ...

    @property
    def pending(self) -> bool: ...

    @property
    def expired_iterators(self) -> int: ...

    @property
    def corrupt_aggregates(self) -> int: ...

    @property
    def foreign_user_records(self) -> int: ...

    def prepare(self) -> None:
        """Take the iterator or subscribe now (a ``LATEST`` start is pinned to this moment)."""

    def fetch(self) -> FetchResult:
        """The next reply; raises a ``KinesisError`` (``retriable`` for throttles, server errors, lost
        connections)."""

    def close(self) -> None:
        """Release what the getter holds (a subscription); idempotent."""
