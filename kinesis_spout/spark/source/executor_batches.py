"""Pure logic of executor reads (``readMode=executors``): planned batches, the ends executors record, and cuts.

PURE: standard library and the project's value types only; no Spark, no network, no clock. The driver side
(:class:`kinesis_spout.spark.source.ExecutorStreamReader`) and the executor side
(:func:`kinesis_spout.spark.source.read_task_batch`) ask this module what an offset says and where a
shard's part of a batch ends.

**The model.** Kinesis cannot say where a shard's data ends without reading it, and a Python data source's
executors can hand nothing but rows back to the driver. So the offset of batch ``N`` (a :class:`PlannedBatch`)
holds ``N`` and each shard's START, and the limits of its tasks. The executor task of ``(N, shard)`` reads from the
start into a bounded buffer, then records the END it chose in ZooKeeper (``.../batches/<query>/<N>/<shard>``, a
:class:`ShardEnd`; the first writer wins). A later attempt (a retry, a speculative copy, a second action on the
batch, a replay after a restart) finds the end already recorded when it tries to record its own, and yields exactly
the records up to it. Nothing is yielded before the end is recorded, so every attempt of ``(N, shard)`` yields the
same rows. The next batch starts each shard at its recorded end.

Offset (JSON object)::

    {"query": "<id>", "batch": N, "shards": {shard id: position}, "maxRecords": n, "maxBytes": n,
     "cutoff": "<ISO-8601>", "idle": [shard id, ...], "shardsPerTask": n}

``batch`` is -1 in a query's initial offset (nothing planned); positions are those of
:mod:`kinesis_spout.spark.source.offsets`; ``maxRecords``/``maxBytes`` are per shard task (absent: no limit);
``cutoff`` is the start of a ``Trigger.AvailableNow`` run (absent otherwise); ``idle`` lists the shards that get no
task in this batch (each was at its tip and the driver's probe saw nothing new in it: no task, no recorded end, the
next batch starts it where this one did; absent: none). ``query`` names the query's batch
znodes: made by ``initialOffset`` and kept in Spark's offset log, so two queries of one app never share them.

**Tasks of several shards.** ``shardsPerTask`` (absent: 1) groups the batch's shards into tasks
(:meth:`PlannedBatch.task_groups`, a pure function of the offset, so every replay groups them the same way whatever
the option says now). With 1, each task reads one shard and records its :class:`ShardEnd` at
``.../<N>/<shard id>``; with more, a task reads its shards at once and records all their ends in one node
``.../<N>/task-<k>`` (:func:`encode_ends`): the first attempt to record it wins for every shard of the task, and
a later attempt yields exactly the records up to those ends. :func:`recorded_ends` reads either kind of node.

**Abandoned queries.** A query whose checkpoint location was deleted never comes back under its id, so nobody
would delete its recorded ends. A running query's driver beats a heartbeat on its ``batches/<query>`` node; a
query that starts deletes the trees of other queries whose heartbeat is older than a generous age
(:func:`abandoned`), judged by ZooKeeper's clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

from kinesis_spout.errors import CheckpointError
from kinesis_spout.positions import Position
from kinesis_spout.records import Record
from kinesis_spout.spark.source.offsets import end_after, first_after, in_range

__all__ = ["PlannedBatch", "ShardEnd", "abandoned", "cut", "encode_ends", "recorded_ends", "split_limit", "within"]


@dataclass(frozen=True)
class PlannedBatch:
    """The offset of one planned batch in executor-read mode (see the module docstring)."""

    query: str
    batch: int
    starts: Mapping[str, Position] = field(default_factory=dict)
    max_records: int | None = None
    max_bytes: int | None = None
    cutoff: datetime | None = None
    #: shards of the offset that get no task in this batch: each was at its tip and nothing new was seen in it
    idle: frozenset[str] = frozenset()
    #: how many of the batch's shards one task reads at most (1: a task and an end node per shard)
    shards_per_task: int = 1

    def tasks(self) -> list[str]:
        """The shards this batch reads, sorted: every shard of the offset not ended, not waiting for a position
        (LATEST) and not idle. Who calls: ``partitions`` (one task each) and the next planning (an end each)."""
        return sorted(s for s, p in self.starts.items() if not p.ended and not p.unresolved and s not in self.idle)

    def task_groups(self) -> list[tuple[str, list[str]]]:
        """The batch's tasks: (the name of the node its ends are recorded in, the shards it reads). The shards of
        :meth:`tasks` in order, cut into the fewest runs of at most ``shards_per_task``, of sizes that differ by one
        at most; with ``shards_per_task`` 1 each shard is a task whose node is named after it. Who calls:
        ``partitions`` (a task each), the next planning (the nodes it reads) and every replay (the same groups:
        they follow from the offset alone)."""
        shards = self.tasks()
        if self.shards_per_task <= 1:
            return [(s, [s]) for s in shards]
        count = -(-len(shards) // self.shards_per_task)
        size, extra = divmod(len(shards), max(1, count))
        out, at = [], 0
        for k in range(count):
            n = size + (1 if k < extra else 0)
            out.append((f"task-{k}", shards[at:at + n]))
            at += n
        return out

    def encode(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"query": self.query, "batch": self.batch,
                               "shards": {s: self.starts[s].encode() for s in sorted(self.starts)}}
        if self.max_records is not None:
            doc["maxRecords"] = self.max_records
        if self.max_bytes is not None:
            doc["maxBytes"] = self.max_bytes
        if self.cutoff is not None:
            doc["cutoff"] = self.cutoff.isoformat()
        if self.idle:
            doc["idle"] = sorted(self.idle)
        if self.shards_per_task != 1:
            doc["shardsPerTask"] = self.shards_per_task
        return doc

    @classmethod
    def parse(cls, doc: Any, where: str = "offset") -> "PlannedBatch":
        """Read an offset back; ``CheckpointError`` naming ``where`` when it is not one of executor-read mode."""
        if not isinstance(doc, Mapping) or "batch" not in doc or "shards" not in doc:
            raise CheckpointError(
                f"{where}: {str(doc)[:120]!r} is not an offset of readMode=executors; the checkpoint location was "
                f"written by readMode=driver (or another source): keep that mode for it, or start the query with a "
                f"new checkpoint location (it resumes from ZooKeeper's checkpoints)")
        try:
            batch = int(doc["batch"])
            query = str(doc["query"])
            shards = doc["shards"]
            if not isinstance(shards, Mapping):
                raise TypeError("shards is not an object")
            starts = {str(s): Position.parse(p, f"{where}, shard {s}") for s, p in shards.items()}
            cutoff = datetime.fromisoformat(doc["cutoff"]) if doc.get("cutoff") else None
            max_records = int(doc["maxRecords"]) if doc.get("maxRecords") is not None else None
            max_bytes = int(doc["maxBytes"]) if doc.get("maxBytes") is not None else None
            idle = doc.get("idle") or []
            if not isinstance(idle, list):
                raise TypeError("idle is not a list")
            per_task = int(doc.get("shardsPerTask", 1))
            if per_task < 1:
                raise ValueError(f"shardsPerTask {per_task} is below 1")
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: unreadable executor-read offset {str(doc)[:200]!r} ({exc})") from exc
        return cls(query, batch, starts, max_records, max_bytes, cutoff, frozenset(str(s) for s in idle), per_task)


@dataclass(frozen=True)
class ShardEnd:
    """What the first task of ``(batch, shard)`` recorded (the batch znode's JSON): where the shard's part of the
    batch ends, and how the task got there.

    ``end`` is the position after the last record the batch holds (the start itself when it holds none), a
    ``SHARD_END`` when the shard is closed and every record of it is in. ``records`` counts them; ``at_tip`` says the
    task stopped because the shard had nothing more (a GetRecords reply or a fan-out event said so; not because of a
    limit), ``past_cutoff`` that it stopped at a
    record that arrived after the AvailableNow cutoff.
    """

    end: Position
    records: int = 0
    at_tip: bool = False
    past_cutoff: bool = False

    def to_doc(self) -> dict[str, Any]:
        return {"end": self.end.encode(), "records": self.records, "at_tip": self.at_tip,
                "past_cutoff": self.past_cutoff}

    def to_json(self) -> bytes:
        return json.dumps(self.to_doc(), sort_keys=True).encode()

    @classmethod
    def from_doc(cls, doc: Any, where: str) -> "ShardEnd":
        return cls(Position.parse(doc["end"], where), int(doc.get("records", 0)),
                   bool(doc.get("at_tip", False)), bool(doc.get("past_cutoff", False)))

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "ShardEnd":
        """Read a batch znode; ``CheckpointError`` naming ``where`` and the fix when it is not one."""
        try:
            return cls.from_doc(json.loads(data.decode("utf-8")), where)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, CheckpointError) as exc:
            raise _unreadable(data, where, exc) from exc


def _unreadable(data: bytes, where: str, exc: BaseException) -> CheckpointError:
    return CheckpointError(
        f"unreadable batch end at ZooKeeper node {where}: {data[:80]!r} ({exc}). The batch cannot be replayed "
        f"exactly; start the query with a new checkpoint location (it resumes from ZooKeeper's checkpoints)")


def encode_ends(ends: Mapping[str, ShardEnd]) -> bytes:
    """The node a task of several shards records: every shard's end, ``{"ends": {shard id: end}}``."""
    return json.dumps({"ends": {s: ends[s].to_doc() for s in sorted(ends)}}, sort_keys=True).encode()


def recorded_ends(node: str, data: bytes, where: str) -> dict[str, ShardEnd]:
    """The ends a batch node holds (shard id -> end): a task's several (:func:`encode_ends`), or the one end of the
    shard the node is named after. ``CheckpointError`` naming ``where`` when it is neither."""
    try:
        doc = json.loads(data.decode("utf-8"))
        if isinstance(doc, Mapping) and "ends" in doc:
            return {str(s): ShardEnd.from_doc(d, f"{where}, shard {s}") for s, d in doc["ends"].items()}
        return {node: ShardEnd.from_doc(doc, where)}
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, CheckpointError) as exc:
        raise _unreadable(data, where, exc) from exc


def split_limit(total: int | None, shards: int) -> int | None:
    """A batch limit shared by ``shards`` tasks: each gets an equal part, at least 1 (None: no limit)."""
    if total is None:
        return None
    return max(1, total // max(1, shards))


def cut(records: Sequence[Record], start: Position, max_records: int | None, max_bytes: int | None,
        cutoff: datetime | None, *, shard_end: bool, reached_tip: bool) -> tuple[int, ShardEnd]:
    """How many of ``records`` (read in order after ``start``) a task's part of the batch takes, and its end.

    The first record is always taken (a record larger than ``max_bytes`` must not stall the shard); a record that
    would pass a limit, or arrived after ``cutoff``, stops the cut. The end is marked ``ended`` only when the shard
    is closed (``shard_end``: everything of it was read) and every record was taken; ``at_tip`` when the read
    ``reached_tip`` (the last GetRecords said the shard had nothing more) and every record was taken.
    """
    n = len(records)
    past = first_after((r.approximate_arrival_timestamp for r in records), cutoff) if cutoff is not None else None
    if past is not None:
        n = past
    if max_records is not None:
        n = min(n, max(1, max_records) if n else 0)
    if max_bytes is not None:
        used = 0
        for i in range(n):
            used += records[i].size
            if used > max_bytes and i > 0:
                n = i
                break
    taken = records[:n]
    following = records[n].key if n < len(records) else None
    end = end_after([r.key for r in taken[-1:]], following, start)
    if shard_end and n == len(records):
        end = end.finished()
    at_tip = (reached_tip or shard_end) and n == len(records) and past is None
    return n, ShardEnd(end, n, at_tip=at_tip, past_cutoff=past is not None and n == past)


def within(records: Sequence[Record], start: Position, end: Position) -> list[Record]:
    """The records of ``(start, end]``: what a task yields once the end is recorded."""
    return [r for r in records if in_range(r.key, start, end)]


def abandoned(heartbeats: Mapping[str, float], now: float, mine: str, after_s: float) -> list[str]:
    """The queries whose recorded ends may be deleted: every query but ``mine`` whose last heartbeat (seconds, by
    the clock ``now`` comes from) is more than ``after_s`` old. A heartbeat from the future (another clock) is
    young."""
    return sorted(q for q, beat in heartbeats.items() if q != mine and now - beat > after_s)
