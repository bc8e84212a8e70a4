"""Listing a stream's shards, and which of them a task owns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kinesis_spout.errors import StreamNotFoundError
from kinesis_spout.kinesis.client import translate


@dataclass(frozen=True, slots=True)
class Shard:
    """A shard as ListShards describes it. ``closed`` shards have an ending sequence number."""

    shard_id: str
    parent_shard_id: str | None
    adjacent_parent_shard_id: str | None
    starting_sequence_number: str
    ending_sequence_number: str | None

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
                                    rng.get("StartingSequenceNumber", "0"), rng.get("EndingSequenceNumber")))
            token = reply.get("NextToken")
            if not token:
                break
            kwargs = {"NextToken": token}
    except (ClientError, BotoCoreError) as exc:
        err = translate(exc, f"listing the shards of stream {stream_name!r}")
        if isinstance(err, StreamNotFoundError):
            raise StreamNotFoundError(
                f"stream {stream_name!r} not found: create it, or check stream_name, region and endpoint_url",
                code=err.code) from exc
        raise err from exc
    return sorted(shards, key=lambda s: (s.number, s.shard_id))


def owned_shards(shards: list[Shard], task_index: int, task_count: int) -> list[Shard]:
    """Storm-style task parallelism: task i owns the shards at positions i, i+n, ... of the sorted list."""
    return [s for pos, s in enumerate(shards) if pos % task_count == task_index]
