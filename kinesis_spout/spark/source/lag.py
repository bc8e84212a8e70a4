"""How far a ``format("kinesis_spout")`` query is behind its stream: the ``latestOffset`` its stream readers report.

Spark has no Python hook for a source's own metrics in ``StreamingQueryProgress``, but it shows what a stream reader's
``reportLatestOffset()`` returns as the source's ``latestOffset`` in every progress. The readers put there, per
shard, the latest position they know and the shard's lag as their last read saw it::

    {"source": "kinesis_spout", "stream": "sentences", "app": "wordcount",
     "shards": {"shardId-000000000000": {"position": "AFTER_SEQUENCE_NUMBER 4960...", "millisBehindLatest": 0,
                                         "lastArrival": "2026-11-29T09:30:00.123000+00:00", "recordsBehind": 0}}}

``millisBehindLatest`` is the MillisBehindLatest of the shard's last GetRecords reply (or fan-out event);
``lastArrival`` the arrival time of the last record read; ``recordsBehind`` the records read and not yet in a planned
batch. Each is left out where the reader does not know it (``readMode=executors``: the driver reads no records, its
tasks say only whether they reached the tip). :func:`latest_offset` makes the dict, :func:`parse_latest_offset`
reads it back from a progress (as :class:`~kinesis_spout.spark.source.lag_listener.KinesisLagListener` does).
Pure data: no pyspark here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

__all__ = ["SOURCE_MARK", "QueryLag", "ShardLag", "latest_offset", "parse_latest_offset"]

#: The value of ``"source"`` in a kinesis_spout ``latestOffset``: how a listener tells it from other sources'.
SOURCE_MARK = "kinesis_spout"


@dataclass(frozen=True)
class ShardLag:
    """One shard's lag as a stream reader knows it (None: not known)."""

    shard_id: str
    position: str | None = None
    millis_behind_latest: int | None = None
    last_arrival: datetime | None = None
    records_behind: int | None = None


@dataclass(frozen=True)
class QueryLag:
    """The lag of one kinesis_spout source of a query, from one progress: per shard, and in total (the largest
    ``millis_behind_latest`` of the shards that know it; the sum of the known ``records_behind``)."""

    stream: str
    app: str
    shards: tuple[ShardLag, ...]

    @property
    def millis_behind_latest(self) -> int | None:
        known = [s.millis_behind_latest for s in self.shards if s.millis_behind_latest is not None]
        return max(known) if known else None

    @property
    def records_behind(self) -> int | None:
        known = [s.records_behind for s in self.shards if s.records_behind is not None]
        return sum(known) if known else None

    def describe(self) -> str:
        """One log line: the total, then each shard that is behind (or all, when none is)."""
        total = self.millis_behind_latest
        behind = [s for s in self.shards if s.millis_behind_latest or s.records_behind]
        parts = [f"{s.shard_id} {_ms(s.millis_behind_latest)}"
                 + (f" {s.records_behind} records" if s.records_behind else "") for s in behind or self.shards]
        records = self.records_behind
        return (f"stream {self.stream!r} app {self.app!r}: {_ms(total)} behind latest"
                + (f", {records} records read and not processed" if records else "")
                + f" ({len(behind)} of {len(self.shards)} shards behind: {', '.join(parts) or '-'})")


def _ms(millis: int | None) -> str:
    return "? ms" if millis is None else f"{millis} ms"


def latest_offset(stream: str, app: str, shards: Iterable[ShardLag]) -> dict[str, Any]:
    """The dict a stream reader's ``reportLatestOffset()`` returns (see the module). Who calls: the readers."""
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(shards, key=lambda s: s.shard_id):
        entry: dict[str, Any] = {}
        if s.position is not None:
            entry["position"] = s.position
        if s.millis_behind_latest is not None:
            entry["millisBehindLatest"] = int(s.millis_behind_latest)
        if s.last_arrival is not None:
            entry["lastArrival"] = s.last_arrival.isoformat()
        if s.records_behind is not None:
            entry["recordsBehind"] = int(s.records_behind)
        out[s.shard_id] = entry
    return {"source": SOURCE_MARK, "stream": stream, "app": app, "shards": out}


def parse_latest_offset(text: str | dict[str, Any] | None) -> QueryLag | None:
    """A source's ``latestOffset`` (the JSON text of a progress, or that text parsed) as a :class:`QueryLag`; None
    when it is not a kinesis_spout source's (another source, no latest offset, or text that is not this form)."""
    if not text:
        return None
    try:
        doc = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("source") != SOURCE_MARK or not isinstance(doc.get("shards"), dict):
        return None
    shards = []
    for shard_id, entry in sorted(doc["shards"].items()):
        entry = entry if isinstance(entry, dict) else {}
        arrival = entry.get("lastArrival")
        shards.append(ShardLag(shard_id, entry.get("position"), _int(entry.get("millisBehindLatest")),
                               datetime.fromisoformat(arrival) if isinstance(arrival, str) else None,
                               _int(entry.get("recordsBehind"))))
    return QueryLag(str(doc.get("stream", "")), str(doc.get("app", "")), tuple(shards))


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
