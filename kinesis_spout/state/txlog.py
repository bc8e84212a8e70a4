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

One pipeline writes a batch log at a time (it owns its app and stream through the checkpoint store), and every
write is compare-and-set (a :class:`~kinesis_spout.state.base.ConditionalBackingMap`): a pipeline takes the log over
with :meth:`BatchLog.take_over`, which rewrites the entry under its own ``owner``, so a pipeline that lost its
ownership without knowing it (its ZooKeeper session expired while it was paused) finds the log changed at its next
write and stops (:class:`OwnershipLost`) before it writes state or acks. Each entry also carries ``log_id``, made
when the log is created and kept by every later write: the identity of the batch log, the same across restarts
that resume it.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from kinesis_spout.records import SequenceKey
from kinesis_spout.state.base import BackingMapFactory, ConditionalBackingMap, StateDecodeError, StateError

__all__ = ["BatchLog", "BatchLogEntry", "OwnershipLost", "Place", "ReplayCollector", "ShardSpan"]

ENTRY_VERSION = 1
_TAKE_OVER_ATTEMPTS = 20


class OwnershipLost(StateError):
    """An exactly-once pipeline no longer owns its app and stream (its ZooKeeper session ended, or another
    pipeline wrote its batch log): it stopped before writing the batch log or state, and acked nothing more."""


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
    log_id: str = ""  # the batch log's identity (made when it is created); "" in entries of older versions
    owner: str = ""   # the pipeline run that wrote the entry

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
                           for s, p in sorted(self.shards.items())},
                "log_id": self.log_id, "owner": self.owner}

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> "BatchLogEntry":
        try:
            if not isinstance(doc, dict) or doc.get("version") != ENTRY_VERSION:
                raise ValueError(f"not a batch log entry of version {ENTRY_VERSION}: {doc!r}"[:200])
            txid, committed = doc["txid"], doc["committed"]
            if isinstance(txid, bool) or not isinstance(txid, int) or txid < 0 or not isinstance(committed, bool):
                raise ValueError(f"bad txid or committed flag: {txid!r}, {committed!r}")
            log_id, owner = doc.get("log_id", ""), doc.get("owner", "")
            if not isinstance(log_id, str) or not isinstance(owner, str):
                raise ValueError(f"bad log_id or owner: {log_id!r}, {owner!r}")
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
        return cls(txid, committed, shards, log_id, owner)


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
    """The pipeline's batch log, one value under ``key`` of a backing map made from ``factory``, written by
    ``owner`` (a description unique to the pipeline's run) with compare-and-set only.

    Who calls: SpoutPipeline, on the driver, in its run thread only (no lock: one thread). ``take_over()`` (once,
    after the pipeline took the ownership of its app and stream) reads the entry and rewrites it under ``owner``;
    ``save()`` writes an entry if the log is still as this pipeline last wrote it, else raises
    :class:`OwnershipLost` and writes nothing; ``verify()`` (one read, before each ``process`` attempt) raises
    :class:`OwnershipLost` unless the log is still as this pipeline last wrote it. ``load()`` reads it (tools,
    tests). The backing map is made on first
    use and must be a :class:`~kinesis_spout.state.base.ConditionalBackingMap`; ``close()`` is idempotent.
    """

    def __init__(self, factory: BackingMapFactory, key: tuple[str, ...], owner: str = "") -> None:
        if not callable(getattr(factory, "make_backing_map", None)):
            raise TypeError(f"exactly_once must be a backing map factory, e.g. RedisBackingMap.factory(url, "
                            f"namespace='wordcount-log'), got {factory!r}")
        self.factory = factory
        self.key = key
        self.owner = owner
        self.log_id = ""  # known after take_over()
        self._map: ConditionalBackingMap | None = None
        self._token: Any = None
        self._taken = False

    def _backing(self) -> ConditionalBackingMap:
        if self._map is None:
            backing = self.factory.make_backing_map()
            if not isinstance(backing, ConditionalBackingMap):
                backing.close()
                raise StateError(f"the batch log needs a backing map with compare-and-set (multi_get_versioned and "
                                 f"multi_put_if), so that a pipeline that lost its ownership cannot overwrite it; "
                                 f"{type(backing).__name__} has none. Use RedisBackingMap, MemcachedBackingMap or "
                                 f"MemoryBackingMap for exactly_once, or add those two methods to yours")
            self._map = backing
        return self._map

    def load(self) -> BatchLogEntry | None:
        doc = self._backing().multi_get([self.key])[0]
        return None if doc is None else BatchLogEntry.from_dict(doc, repr(self.key))

    def take_over(self) -> BatchLogEntry:
        """Rewrite the stored entry under ``owner`` (creating the log, as a committed txid 0 with a new
        ``log_id``, if there is none) and return it: from here on, a write by the previous owner is refused.
        Raises StateError if the log keeps changing under it (another writer that does not stop)."""
        backing = self._backing()
        for _ in range(_TAKE_OVER_ATTEMPTS):
            got = backing.multi_get_versioned([self.key])[0]
            if got.value is None:
                entry = BatchLogEntry(0, True, {}, log_id=uuid.uuid4().hex, owner=self.owner)
            else:
                stored = BatchLogEntry.from_dict(got.value, repr(self.key))
                entry = replace(stored, owner=self.owner, log_id=stored.log_id or uuid.uuid4().hex)
            if self._put(entry, got.token) is True:
                self.log_id = entry.log_id
                self._taken = True
                return entry
        raise StateError(f"the batch log at {self.key!r} changed {_TAKE_OVER_ATTEMPTS} times while {self.owner} took "
                         f"it over: another pipeline still writes it; stop it first", retriable=True)

    def save(self, entry: BatchLogEntry) -> None:
        """Write ``entry`` (under ``owner`` and the log's id) if the log is as this pipeline last wrote it; else
        OwnershipLost, and nothing written. If another pipeline took the log over right after the write (before
        it was read back), the write stands overwritten and OwnershipLost says so."""
        if not self._taken:
            raise StateError(f"the batch log at {self.key!r} is written only after take_over()")
        entry = replace(entry, owner=self.owner, log_id=self.log_id)
        written = self._put(entry, self._token)
        if written is True:
            return
        now = self.load()
        by = f"{now.owner or 'a writer of an older version'} (txid {now.txid})" if now is not None else "nobody"
        if written is False:
            raise OwnershipLost(f"the batch log at {self.key!r} was written by another pipeline since {self.owner} "
                                f"last wrote it: it now holds an entry of {by}; txid {entry.txid} is not written")
        raise OwnershipLost(f"the batch log at {self.key!r}: txid {entry.txid} was written, but another pipeline "
                            f"took the log over right after: it now holds an entry of {by}")

    def verify(self) -> None:
        """Raise OwnershipLost unless the log is still as this pipeline last wrote it (one read; nothing written).

        Who calls: SpoutPipeline, before each ``process`` attempt: a pipeline whose ownership was taken over while
        it could not hear from ZooKeeper finds the log rewritten here, before it processes (and writes state)
        again."""
        if not self._taken:
            raise StateError(f"the batch log at {self.key!r} is verified only after take_over()")
        got = self._backing().multi_get_versioned([self.key])[0]
        if got.token == self._token:
            return
        now = None if got.value is None else BatchLogEntry.from_dict(got.value, repr(self.key))
        by = f"{now.owner or 'a writer of an older version'} (txid {now.txid})" if now is not None else "nobody"
        raise OwnershipLost(f"the batch log at {self.key!r} was written by another pipeline since {self.owner} "
                            f"last wrote it: it now holds an entry of {by}")

    def _put(self, entry: BatchLogEntry, token: Any) -> bool | None:
        """Compare-and-set ``entry`` against ``token``, then read back the new token. True when written and read
        back; False when another writer came first (nothing written); None when written but another writer came
        right after it (the value read back is not ours)."""
        backing = self._backing()
        doc = entry.to_dict()
        if not backing.multi_put_if([self.key], [doc], [token])[0]:
            return False
        got = backing.multi_get_versioned([self.key])[0]
        if got.value != doc:
            return None
        self._token = got.token
        return True

    def close(self) -> None:
        backing, self._map = self._map, None
        self._taken = False
        if backing is not None:
            backing.close()
