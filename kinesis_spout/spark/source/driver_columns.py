"""The driver's reading of ``readMode=driver`` with the records kept as columns, from the GetRecords reply to the
task's Arrow bytes.

:class:`ColumnDriverPlanner` is :class:`~kinesis_spout.spark.source.driver_planner.DriverPlanner` with each polled
shard's cursor reading through a :class:`~kinesis_spout.spark.source.rows.ColumnGetter`: what a shard read and what a
planned batch keeps are :class:`~kinesis_spout.spark.source.rows.ColumnRows`, so the planning (counts, cuts at keys)
and the partitions' Arrow bytes are made of the decoded columns and no record object is made per record. Its cursors
(:class:`ColumnCursor`) find the first record past an AvailableNow cutoff on the columns, and its lags read the
last key off them. A shard read through enhanced fan-out keeps records (its events are parsed into records): its
cursor is the planner's own. A byte limit (``maxBytesPerTrigger``) is shared between shards on each record's size,
made then.

Who calls: :class:`~kinesis_spout.spark.source.driver.KinesisSpoutStreamReader` (its ``planner_type``); Spark's
planning thread, as for the planner it extends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from kinesis_spout.positions import Position
from kinesis_spout.records import Record
from kinesis_spout.spark.source.driver_planner import DriverPlanner, ShardCursor
from kinesis_spout.spark.source.rows import ColumnGetter, ColumnRows, column_getter

__all__ = ["ColumnCursor", "ColumnDriverPlanner"]


@dataclass
class ColumnCursor(ShardCursor):
    """A polled shard's cursor whose ``pending`` records are :class:`ColumnRows` (its getter a ColumnGetter)."""

    pending: list[Record] = field(default_factory=lambda: cast(list[Record], ColumnRows()))

    def admissible(self, cutoff: datetime | None) -> int:
        """As the planner's cursor: all the pending records, or under Trigger.AvailableNow those before the first
        that arrived after ``cutoff``, found on the columns."""
        rows = cast(ColumnRows, self.pending)
        if cutoff is None:
            return len(rows)
        cut = rows.first_after(cutoff)
        return len(rows) if cut is None else cut


class ColumnDriverPlanner(DriverPlanner):
    """The driver's reading with columns (see the module docstring)."""

    def _cursor(self, shard_id: str, position: Position) -> ShardCursor:
        """The shard's cursor, made afresh when Spark asks from somewhere else than where it stands: a
        :class:`ColumnCursor` for a polled shard, the planner's own for a shard read through enhanced fan-out."""
        cursor = self._cursors.get(shard_id)
        if cursor is not None and cursor.position == position:
            return cursor
        made = super()._cursor(shard_id, position)
        getter = column_getter(made.getter)
        if isinstance(getter, ColumnGetter):
            made = self._cursors[shard_id] = ColumnCursor(shard_id, position, getter, idle=made.idle)
        return made
