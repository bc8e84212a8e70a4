"""Which open shard of a stream serves a hash key: the map a KPL aggregating writer groups user records by.

A shard serves the hash keys ``StartingHashKey`` to ``EndingHashKey``, both inclusive (ListShards). The open shards
of a stream cover 0 to 2**128 - 1 without gaps or overlaps; closed shards (split or merged away) take no writes.
:class:`ShardMap` is built from a listing (:func:`~kinesis_spout.kinesis.shards.list_shards`) and answers by
binary search. It is a snapshot: after a reshard a put can land in a shard the map does not know, which is how the
writer learns to refresh it (:mod:`kinesis_spout.kinesis.writing.aggregate_writer`).

PURE apart from :meth:`ShardMap.load` (one ListShards listing).
"""

from __future__ import annotations

import bisect
from typing import Any, Sequence

from kinesis_spout.errors import KinesisError
from kinesis_spout.kinesis.shards import HashKeyRange, Shard, list_shards

__all__ = ["MAX_HASH_KEY", "ShardMap"]

MAX_HASH_KEY = (1 << 128) - 1


class ShardMap:
    """The open shards of one stream by hash key range. Immutable once built; share it freely.

    ``shard_for(key)`` is the shard whose range holds ``key``; ``range_of(shard_id)`` the range of any listed shard
    (closed ones included, for checking where a put landed). A listing whose open shards leave a hash key uncovered
    (a listing taken in the middle of a reshard, or one without hash key ranges) is refused with a KinesisError.
    """

    def __init__(self, stream_name: str, shards: Sequence[Shard]) -> None:
        self.stream_name = stream_name
        self._ranges = {s.shard_id: s.hash_range for s in shards if s.hash_range is not None}
        open_shards = sorted((s for s in shards if not s.closed and s.hash_range is not None),
                             key=lambda s: s.hash_range.start if s.hash_range else 0)
        self._ids = [s.shard_id for s in open_shards]
        self._starts = [s.hash_range.start for s in open_shards if s.hash_range is not None]
        self._ends = [s.hash_range.end for s in open_shards if s.hash_range is not None]
        expected = 0
        for start, end in zip(self._starts, self._ends):
            if start != expected:
                break
            expected = end + 1
        if not self._ids or expected != MAX_HASH_KEY + 1:
            raise KinesisError(f"the open shards of stream {self.stream_name!r} do not cover every hash key (a "
                               f"listing taken during a reshard, or without hash key ranges): listed "
                               f"{len(shards)} shards; the aggregating writer lists them again", retriable=True)

    @classmethod
    def load(cls, client: Any, stream_name: str) -> "ShardMap":
        """The map of the stream's open shards now (one ListShards listing; StreamNotFoundError naming the
        stream)."""
        return cls(stream_name, list_shards(client, stream_name))

    @property
    def shard_ids(self) -> tuple[str, ...]:
        """The open shards, by their hash key ranges."""
        return tuple(self._ids)

    def shard_for(self, key: int) -> str:
        """The open shard whose range holds hash key ``key`` (0 to 2**128 - 1; ValueError outside)."""
        if not 0 <= key <= MAX_HASH_KEY:
            raise ValueError(f"hash key {key} is outside 0..2**128-1")
        return self._ids[bisect.bisect_right(self._starts, key) - 1]

    def range_of(self, shard_id: str) -> HashKeyRange | None:
        """The hash key range of a listed shard (open or closed); None when it is not in the listing."""
        return self._ranges.get(shard_id)

    def holds(self, shard_id: str, key: int) -> bool | None:
        """Whether shard ``shard_id`` serves hash key ``key``; None when the shard is not in the listing."""
        rng = self._ranges.get(shard_id)
        if rng is None:
            return None
        return rng.start <= key <= rng.end
