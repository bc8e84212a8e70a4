"""The shard maps of the aggregating sink's tasks: the last map of each stream a Python process used, for its next
tasks.

An aggregating task needs the map of the stream's open shards (:class:`~kinesis_spout.kinesis.writing.routing.ShardMap`,
one ListShards listing). Spark reuses its Python workers from task to task, so a task starts from the map the
process's previous task of the stream ended with, and lists the shards only when the process has none: a task
of a few rows costs no listing. A map made stale by a reshard is found out as before (an aggregate lands in a shard
other than the one it was made for) and listed again by that task, which leaves the fresh map here.

Who calls: :func:`~kinesis_spout.spark.sink.task.write_task`, from task threads of this process: the maps are
guarded by one lock.
"""

from __future__ import annotations

import threading

from kinesis_spout.config import SpoutConfig
from kinesis_spout.kinesis.writing.routing import ShardMap

__all__ = ["keep_map", "known_map"]

_lock = threading.Lock()
_maps: dict[tuple[str | None, str | None, str], ShardMap] = {}  # under _lock


def _key(cfg: SpoutConfig) -> tuple[str | None, str | None, str]:
    return cfg.kinesis.region, cfg.kinesis.endpoint_url, cfg.stream_name


def known_map(cfg: SpoutConfig) -> ShardMap | None:
    """The map of ``cfg``'s stream this process used last; None when it has none."""
    with _lock:
        return _maps.get(_key(cfg))


def keep_map(cfg: SpoutConfig, shard_map: ShardMap) -> None:
    """Remember ``shard_map`` as the map of ``cfg``'s stream for this process's next tasks."""
    with _lock:
        _maps[_key(cfg)] = shard_map
