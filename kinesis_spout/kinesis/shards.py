"""Listing a stream's shards, and which of them a task owns."""

from __future__ import annotations

import logging
import threading
import zlib
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.errors import StreamNotFoundError
from kinesis_spout.kinesis.botocore_errors import asked, translate

log = logging.getLogger(__name__)

_unknown_ranges: set[tuple[str, str]] = set()  # (stream, shard) whose unknown range was logged; under the lock
_unknown_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class HashKeyRange:
    """The hash keys a shard serves, ``start`` to ``end`` inclusive (128-bit ints, as ListShards gives them as
    decimal strings). Picklable: Spark partitions carry it to executors."""

    start: int
    end: int

    def __str__(self) -> str:
        return f"[{self.start}, {self.end}]"


@dataclass(frozen=True, slots=True)
class Shard:
    """A shard as ListShards describes it. ``closed`` shards have an ending sequence number. ``hash_range`` is
    None only where a listing left it out."""

    shard_id: str
    parent_shard_id: str | None
    adjacent_parent_shard_id: str | None
    starting_sequence_number: str
    ending_sequence_number: str | None
    hash_range: HashKeyRange | None = None

    @property
    def closed(self) -> bool:
        return self.ending_sequence_number is not None

    @property
    def number(self) -> int:
        """The numeric part of ``shardId-000000000042``; used to order shards."""
        digits = self.shard_id.rsplit("-", 1)[-1]
        return int(digits) if digits.isdigit() else 0

    @property
    def parents(self) -> tuple[str, ...]:
        return tuple(p for p in (self.parent_shard_id, self.adjacent_parent_shard_id) if p)


def _hash_range(listed: Any) -> HashKeyRange | None:
    """A ListShards ``HashKeyRange``; None when it is missing or does not read as two numbers."""
    try:
        return HashKeyRange(int(listed["StartingHashKey"]), int(listed["EndingHashKey"]))
    except (KeyError, TypeError, ValueError):
        return None


def drop_range(stream_name: str, shard_id: str, shard: Shard | None, drop: bool) -> HashKeyRange | None:
    """The hash key range outside which the readers of ``shard_id`` drop KPL user records: ``shard``'s (its
    listing); None when ``drop`` (``drop_foreign_user_records``) is off, or when the range is not known (``shard`` is
    None: not in the listing, or the listing left its ``HashKeyRange`` out). Nothing is dropped then, so user records
    of other shards put here by a stale producer come twice: the first unknown range of each shard of a stream is
    logged as a warning (once per process), later ones not at all.

    Who calls: whoever builds a shard's getters (the spout, the Spark sources' planners, batch reads)."""
    if not drop:
        return None
    if shard is not None and shard.hash_range is not None:
        return shard.hash_range
    with _unknown_lock:
        first = (stream_name, shard_id) not in _unknown_ranges
        _unknown_ranges.add((stream_name, shard_id))
    if first:
        log.warning("shard %s of %r: its hash key range is not known (%s), so KPL user records of other shards are "
                    "not dropped from its aggregates although drop_foreign_user_records (dropForeignUserRecords) is "
                    "on: a producer with a stale shard map may deliver some user records twice", shard_id,
                    stream_name, "the shard listing left it out" if shard is not None else "the shard is not listed")
    return None


def list_shards(client: Any, stream_name: str) -> list[Shard]:
    """All shards of the stream (ListShards, paged), sorted by shard number.

    Raises ``StreamNotFoundError`` naming the stream when it does not exist.
    """
    shards: list[Shard] = []
    kwargs: dict[str, Any] = {"StreamName": stream_name}
    try:
        while True:
            reply = client.list_shards(**kwargs)
            for s in reply.get("Shards", []):
                rng = s.get("SequenceNumberRange", {})
                shards.append(Shard(s["ShardId"], s.get("ParentShardId"), s.get("AdjacentParentShardId"),
                                    rng.get("StartingSequenceNumber", "0"), rng.get("EndingSequenceNumber"),
                                    _hash_range(s.get("HashKeyRange"))))
            token = reply.get("NextToken")
            if not token:
                break
            kwargs = {"NextToken": token}
    except (ClientError, BotoCoreError) as exc:
        err = translate(exc, f"listing the shards of stream {stream_name!r}")
        if isinstance(err, StreamNotFoundError):
            raise StreamNotFoundError(
                f"stream {stream_name!r} not found: create it, or check stream_name, region and endpoint_url "
                f"(asked {asked(client)})", code=err.code) from exc
        raise err from exc
    return sorted(shards, key=lambda s: (s.number, s.shard_id))


def task_of(shard_id: str, task_count: int) -> int:
    """The task (of ``task_count``) that owns a shard: its shard number modulo the task count.

    The rule depends on the shard alone, never on the other shards listed, so a shard stays with its task when
    old shards age out of the list or new ones appear (Kinesis numbers new shards upwards, so they spread over
    the tasks). A shard id without a number falls back to a CRC-32 of the id.
    """
    digits = shard_id.rsplit("-", 1)[-1]
    number = int(digits) if digits.isdigit() else zlib.crc32(shard_id.encode())
    return number % task_count


def owned_shards(shards: list[Shard], task_index: int, task_count: int) -> list[Shard]:
    """Storm-style task parallelism: task i owns the shards whose :func:`task_of` is i."""
    return [s for s in shards if task_of(s.shard_id, task_count) == task_index]
