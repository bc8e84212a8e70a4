"""How far each shard's checkpoint is behind its tip, for ``kinesis-spout status``: one ``GetShardIterator`` at the
checkpoint and one ``GetRecords(Limit=1)`` per shard, whose MillisBehindLatest says how long before the shard's newest
record the first record not yet checkpointed arrived (0: nothing is waiting)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.config import ReadingSettings
from kinesis_spout.errors import SpoutError
from kinesis_spout.kinesis.retrieval.factory import polling_getter

__all__ = ["THREADS", "behind_latest", "describe_millis"]

#: Shards read at once (each read is two small calls; Kinesis allows 5 GetRecords a second per shard).
THREADS = 8


def describe_millis(millis: int) -> str:
    """A MillisBehindLatest as a table cell: milliseconds below a minute, then minutes or hours."""
    if millis < 60_000:
        return f"{millis} ms"
    if millis < 3_600_000:
        return f"{millis / 60_000:.1f} min"
    return f"{millis / 3_600_000:.1f} h"


def _one(client: Any, stream: str, checkpoint: Checkpoint | None) -> str:
    if checkpoint is None:
        return "-"  # never read by the app: where it would start depends on its initial position
    if checkpoint.shard_end:
        return "done"
    try:
        getter = polling_getter(client, stream, checkpoint.shard_id, checkpoint.position, ReadingSettings(), per_call=1)
        result = getter.fetch()
    except SpoutError as exc:
        return f"? ({type(exc).__name__})"
    if result.shard_end:
        return "0 ms (end)"
    return "?" if result.millis_behind_latest is None else describe_millis(result.millis_behind_latest)


def behind_latest(client: Any, stream: str, shard_ids: list[str],
                  checkpoints: Mapping[str, Checkpoint]) -> dict[str, str]:
    """Each listed shard's MillisBehindLatest at its checkpoint, as a table cell: ``-`` without a checkpoint,
    ``done`` for a finished shard, ``?`` when Kinesis did not say (the error's kind in brackets). Who calls:
    ``kinesis-spout status``, for the shards Kinesis listed; reads nothing but one record per shard."""
    if not shard_ids:
        return {}
    with ThreadPoolExecutor(min(THREADS, len(shard_ids))) as pool:
        cells = pool.map(lambda s: _one(client, stream, checkpoints.get(s)), shard_ids)
        return dict(zip(shard_ids, cells))
