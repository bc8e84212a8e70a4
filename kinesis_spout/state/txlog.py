"""The batch log that makes SpoutPipeline a transactional Trident spout: what each txid holds, kept durably.

Trident's transactional spouts store, per txid, where its batch starts and ends, so that a batch replayed after a
crash holds exactly the same records. SpoutPipeline in exactly-once mode keeps one :class:`BatchLogEntry`, for the
latest txid, in a backing map (Redis, memcached: usually the one the state lives in):

- for **every** shard it has seen, ``done``: the key of the last record committed before this txid (None: none);
- for the shards with records in this txid, ``last`` (its last record's key) and ``count`` (how many);
- ``committed``: whether the txid's state updates completed.

The pipeline writes the entry (not committed) before ``process`` sees the batch, and again (committed) after
``process`` returned and before it acks the records; records are acked only after that, so a shard's spout
checkpoint never passes a record of an uncommitted txid. On restart the spout reads again from its checkpoints,
and each record is sorted by :meth:`BatchLogEntry.place`: committed before (acked without processing), part of
the txid to replay, or new. Kinesis records are immutable and keyed by sequence number, so the replay holds
exactly the records of the first attempt; :meth:`ReplayCollector.missing` proves it by the counts. Pure logic
apart from :class:`BatchLog`, whose I/O is the backing map's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from kinesis_spout.records import SequenceKey
from kinesis_spout.state.base import BackingMap, BackingMapFactory, StateDecodeError

__all__ = ["BatchLog", "BatchLogEntry", "Place", "ReplayCollector", "ShardSpan"]

ENTRY_VERSION = 1


class Place(enum.Enum):
    """Where a record read after a restart belongs."""

    COMMITTED = "committed"  # applied by a committed txid: ack it, do not process it again
    BATCH = "batch"          # a record of the txid being replayed
    NEW = "new"              # after the logged txid: goes into the next batches


def _key_text(key: SequenceKey | None) -> str | None:
    return None if key is None else f"{key.sequence}:{key.sub_sequence}"


def _key_of(text: Any, where: str) -> SequenceKey | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"{where} is not a 'sequence:sub' string: {text!r}")
    seq, _, sub = text.partition(":")
    if not seq.isdigit() or not sub.isdigit():
        raise ValueError(f"{where} is not a 'sequence:sub' string: {text!r}")
    return SequenceKey(int(seq), int(sub))


@dataclass(frozen=True)
class ShardSpan:
    """One shard in a txid: committed through ``done`` before it; its records in it are ``(done, last]``."""

    done: SequenceKey | None
    last: SequenceKey | None = None
    count: int = 0


@dataclass(frozen=True)
class BatchLogEntry:
    """The latest txid of a pipeline and the records it holds, per shard."""

    txid: int
    committed: bool
    shards: Mapping[str, ShardSpan] = field(default_factory=dict)

    def place(self, shard_id: str, key: SequenceKey) -> Place:
        """Where a record read after a restart belongs (see the module docstring)."""
        span = self.shards.get(shard_id)
        if span is None:
            return Place.NEW
        if span.done is not None and key <= span.done:
            return Place.COMMITTED
        if span.count and span.last is not None and key <= span.last:
            return Place.COMMITTED if self.committed else Place.BATCH
        return Place.NEW

    def committed_through(self) -> dict[str, SequenceKey | None]:
        """Per shard, the last record committed so far (by this txid too, if it is committed)."""
        out: dict[str, SequenceKey | None] = {}
        for shard_id, span in self.shards.items():
            out[shard_id] = span.last if self.committed and span.count else span.done
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"version": ENTRY_VERSION, "txid": self.txid, "committed": self.committed,
                "shards": {s: {"done": _key_text(p.done), "last": _key_text(p.last), "count": p.count}
                           for s, p in sorted(self.shards.items())}}

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> "BatchLogEntry":
        try:
            if not isinstance(doc, dict) or doc.get("version") != ENTRY_VERSION:
                raise ValueError(f"not a batch log entry of version {ENTRY_VERSION}: {doc!r}"[:200])
            txid, committed = doc["txid"], doc["committed"]
            if isinstance(txid, bool) or not isinstance(txid, int) or txid < 0 or not isinstance(committed, bool):
                raise ValueError(f"bad txid or committed flag: {txid!r}, {committed!r}")
            shards = {}
            for shard_id, span in doc["shards"].items():
                count = span["count"]
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise ValueError(f"bad count {count!r} of shard {shard_id}")
                shards[shard_id] = ShardSpan(_key_of(span["done"], f"{shard_id}.done"),
                                             _key_of(span["last"], f"{shard_id}.last"), count)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDecodeError(f"the batch log at {where} cannot be read ({exc}); it is written by "
                                   f"SpoutPipeline(exactly_once=...) only: was the key used for something else?",
                                   key=where) from exc
        return cls(txid, committed, shards)


def next_entry(txid: int, through: Mapping[str, SequenceKey | None],
               batch: Mapping[str, tuple[SequenceKey, int]]) -> BatchLogEntry:
    """The entry of a new txid: every known shard's committed position, and the batch's (last key, count)."""
    shards = {s: ShardSpan(done) for s, done in through.items()}
    for shard_id, (last, count) in batch.items():
        shards[shard_id] = ShardSpan(through.get(shard_id), last, count)
    return BatchLogEntry(txid, False, shards)


class ReplayCollector:
    """Counts the records of an uncommitted txid as they are read again, to tell when the replay is whole."""

    def __init__(self, entry: BatchLogEntry) -> None:
        self.entry = entry
        self._seen: dict[str, int] = {s: 0 for s, p in entry.shards.items() if p.count}

    def add(self, shard_id: str) -> None:
        self._seen[shard_id] += 1

    def missing(self) -> dict[str, int]:
        """Shards whose replayed records are not all read yet: how many are still to come (negative: too many)."""
        return {s: self.entry.shards[s].count - n for s, n in self._seen.items() if n != self.entry.shards[s].count}


class BatchLog:
    """The pipeline's batch log, one value under ``key`` of a backing map made from ``factory``.

    Who calls: SpoutPipeline, on the driver, in its run thread only. ``load()`` returns the entry or None;
    ``save()`` writes it (one round trip). The backing map is made on first use; ``close()`` is idempotent.
    """

    def __init__(self, factory: BackingMapFactory, key: tuple[str, ...]) -> None:
        if not callable(getattr(factory, "make_backing_map", None)):
            raise TypeError(f"exactly_once must be a backing map factory, e.g. RedisBackingMap.factory(url, "
                            f"namespace='wordcount-log'), got {factory!r}")
        self.factory = factory
        self.key = key
        self._map: BackingMap | None = None

    def _backing(self) -> BackingMap:
        if self._map is None:
            self._map = self.factory.make_backing_map()
        return self._map

    def load(self) -> BatchLogEntry | None:
        doc = self._backing().multi_get([self.key])[0]
        return None if doc is None else BatchLogEntry.from_dict(doc, repr(self.key))

    def save(self, entry: BatchLogEntry) -> None:
        self._backing().multi_put([self.key], [entry.to_dict()])

    def close(self) -> None:
        backing, self._map = self._map, None
        if backing is not None:
            backing.close()
