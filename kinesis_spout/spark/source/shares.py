"""How many records each shard gives a driver-read batch under a limit in records alone, worked out by counting.

:func:`kinesis_spout.spark.source.offsets.allocate` shares a batch's limits out record by record (a byte limit needs
each record's size); with no byte limit the same shares follow from how many records each shard has waiting, so
``latestOffset`` on a backlog does no Python work per record to plan a batch. Pure. Who calls:
:meth:`kinesis_spout.spark.source.driver_planner.DriverPlanner.plan`.
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["share_rows"]


def share_rows(lengths: Mapping[str, int], max_records: int | None) -> dict[str, int]:
    """How many of each shard's waiting records (``lengths``: how many wait) a batch of at most ``max_records``
    records admits: exactly what ``allocate`` admits with no byte limit.

    Shards take turns one record at a time in the mapping's order: each round gives one record to every shard that
    still has one, and the round that reaches the limit is cut short, its first shards served. The first record is
    always admitted (a limit below 1 admits one). Worked out a whole number of rounds at a time: at most one step
    per shard, whatever the records.
    """
    if max_records is None:
        return dict(lengths)
    taken = {shard: 0 for shard in lengths}
    left = max(max_records, 1)
    active = [shard for shard, n in lengths.items() if n > 0]
    level = 0  # every active shard has been given this many
    while active and left > 0:
        step = min(lengths[shard] for shard in active) - level  # rounds until the shortest active shard runs out
        if step * len(active) > left:
            rounds, extra = divmod(left, len(active))
            for i, shard in enumerate(active):
                taken[shard] = level + rounds + (1 if i < extra else 0)
            break
        level += step
        left -= step * len(active)
        for shard in active:
            taken[shard] = level
        active = [shard for shard in active if lengths[shard] > level]
    return taken
