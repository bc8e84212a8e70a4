"""User records put as KPL aggregates, each aggregate holding only user records of the shard it lands in.

A reader that de-aggregates (KCL, this package's spout with ``drop_foreign_user_records``) drops the user records of
an aggregate whose hash keys its shard does not serve: a producer that packs records of two shards into one
aggregate loses some of them. So :class:`AggregatingWriter` groups user records by the open shard their hash key maps
to (:class:`~kinesis_spout.kinesis.writing.routing.ShardMap`), packs each group into aggregates of at most 1 MiB
(:class:`~kinesis_spout.kinesis.writing.aggregator.AggregateBuilder`) routed to that shard by their explicit hash key,
and
puts them through the shared :class:`~kinesis_spout.kinesis.writing.putter.RecordPutter`.

After a reshard the map is stale: an aggregate lands in a shard other than the one it was made for (Kinesis answers
each entry with its ``ShardId``). Then the map is listed again and the user records of that aggregate whose hash keys
the shard it landed in does not serve are put again, in new aggregates by the new map; those it does serve are where
they belong. Nothing is lost; a reader that does not drop foreign user records sees those records twice (at-least-
once, as for any retry). A user record too large for an aggregate of its own is put as a plain record.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Callable, Generic, Sequence, TypeVar

from kinesis_spout.errors import KinesisError, PutRecordsError
from kinesis_spout.kinesis.aggregation import hash_key
from kinesis_spout.kinesis.writing.aggregator import MAX_AGGREGATE_BYTES, AggregateBuilder
from kinesis_spout.kinesis.writing.putter import PutEntry, RecordPutter
from kinesis_spout.kinesis.writing.routing import ShardMap

__all__ = ["Aggregate", "AggregatingWriter", "pack"]

log = logging.getLogger(__name__)
_md5 = hashlib.md5
_from_bytes = int.from_bytes
T = TypeVar("T")

#: (the shard it is made for, its user records) - what the putter carries for each aggregate
Aggregate = tuple[str, list[tuple[T, PutEntry, int]]]


def pack(items: Sequence[tuple[T, PutEntry]], shard_map: ShardMap,
         limit: int = MAX_AGGREGATE_BYTES) -> list[tuple[Aggregate[T], PutEntry]]:
    """Aggregates of ``items`` grouped by shard, each within ``limit`` bytes (data and partition key), in the order
    of their shards' first items; user records keep their order within a shard. PURE. A user record whose entry is
    invalid raises ValueError (validate first: :func:`~kinesis_spout.kinesis.writing.putter.entry_problem`)."""
    groups: dict[str, list[tuple[T, PutEntry, int]]] = {}
    shard_for = shard_map.shard_for
    for item, entry in items:
        pk, ehk = entry.partition_key, entry.explicit_hash_key
        if ehk is None:
            key = _from_bytes(_md5(pk.encode("utf-8"), usedforsecurity=False).digest(), "big")
        else:
            found = hash_key(pk, ehk)
            if found is None:
                raise ValueError(f"explicit hash key {ehk!r} is not a decimal number")
            key = found
        shard_id = shard_for(key)
        group = groups.get(shard_id)
        if group is None:
            group = groups[shard_id] = []
        group.append((item, entry, key))
    out: list[tuple[Aggregate[T], PutEntry]] = []
    for shard_id, members in groups.items():
        records = [(m[1].partition_key, m[1].explicit_hash_key, m[1].data) for m in members]
        at = 0
        while at < len(records):
            builder = AggregateBuilder()
            end = builder.fill(records, at, limit)
            if end == at:  # too large for an aggregate of its own: put plain
                out.append(((shard_id, [members[at]]), members[at][1]))
                at += 1
                continue
            data, pk, ehk = builder.build()
            out.append(((shard_id, members[at:end]), PutEntry(data, pk, ehk)))
            at = end
    return out


class AggregatingWriter(Generic[T]):
    """Puts user records as aggregates routed by shard (see the module docstring).

    ``putter`` does the PutRecords calls (its counters count aggregates); ``load_map`` lists the stream's shards
    (called on the first put, unless ``shard_map`` gives a map to start from, and when a put landed in an unexpected
    shard). One caller thread; ``refreshes``
    counts the listings after the first and ``replaced`` the user records put again after landing in a foreign
    shard.
    """

    def __init__(self, putter: RecordPutter[Aggregate[T]], load_map: Callable[[], ShardMap], *,
                 max_refreshes: int = 10, limit: int = MAX_AGGREGATE_BYTES, shard_map: ShardMap | None = None) -> None:
        self.putter = putter
        self._load_map = load_map
        self._map: ShardMap | None = shard_map
        self.max_refreshes = max_refreshes
        self.limit = limit
        self.refreshes = 0
        self.replaced = 0

    def shard_map(self) -> ShardMap:
        """The map in use (listed on first use)."""
        if self._map is None:
            self._map = self._load_map()
        return self._map

    @property
    def current_map(self) -> ShardMap | None:
        """The map in use, None before one was listed (or given); never lists."""
        return self._map

    def put(self, items: Sequence[tuple[T, PutEntry]]) -> list[T]:
        """Put every user record into a shard that serves its hash key; returns the items written, each once.
        Raises :class:`PutRecordsError` (``written``/``refused`` as user items) when the putter gives up, and a
        retriable KinesisError when the map stays stale after ``max_refreshes`` listings."""
        written: list[T] = []
        pending = list(items)
        for _ in range(self.max_refreshes + 1):
            shard_map = self.shard_map()
            packed = pack(pending, shard_map, self.limit)
            try:
                landed = self.putter.put(packed)
            except PutRecordsError as exc:
                done = written + [m[0] for agg in exc.written for m in agg[1]]
                raise PutRecordsError(str(exc), written=done, refused=[m[0] for agg in exc.refused for m in agg[1]],
                                      codes=exc.codes, attempts=exc.attempts, code=exc.code,
                                      retriable=exc.retriable) from exc
            misplaced = [x for x in landed if x.shard_id != x.item[0]]
            written += [m[0] for x in landed if x.shard_id == x.item[0] for m in x.item[1]]
            if not misplaced:
                return written
            self._map = None
            self.refreshes += 1
            fresh = self.shard_map()
            pending = []
            for x in misplaced:
                for item, entry, key in x.item[1]:
                    if fresh.holds(x.shard_id, key):
                        written.append(item)
                    else:
                        pending.append((item, entry))
            log.info("stream %r was resharded: %d aggregates landed in other shards than their map said; the shard "
                     "map was listed again and %d user records outside their shard's range are put again",
                     shard_map.stream_name, len(misplaced), len(pending))
            self.replaced += len(pending)
            if not pending:
                return written
        raise KinesisError(f"the shards of stream {self.putter.stream_name!r} kept changing: aggregates still landed "
                           f"in unexpected shards after {self.max_refreshes} listings; try again once the reshard is "
                           f"done", retriable=True)
