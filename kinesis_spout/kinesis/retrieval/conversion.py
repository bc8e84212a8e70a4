"""The conversion of a reply's Kinesis records into the spout's records, shared by both getters.

:class:`RecordConversion` turns the records of a GetRecords reply (as columns) or of a SubscribeToShard event into the
spout's records, as columns or :class:`~kinesis_spout.records.Record` tuples: KPL aggregates become their user records
(``deaggregate``), and user records whose hash key lies outside the shard's range are dropped and counted
(``hash_range``). Each getter holds one (composition: neither getter derives from the other) and tells of it through
:class:`ConvertedRecords`, the properties both share. Not thread-safe: the getter's owner calls it; the log of foreign
user records shared by all of a process's getters is under a lock.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kinesis_spout.kinesis.aggregation import aggregate_problem, hash_key
from kinesis_spout.kinesis.retrieval.wire_columns import (
    RecordColumns,
    ReplyColumns,
    columns_of_reply,
    expand,
    keep_inside,
    to_records,
)
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.records import Record

__all__ = ["ALL_HASH_KEYS", "ConvertedRecords", "RecordConversion"]

log = logging.getLogger(__name__)

#: Every hash key: the range of a stream's only shard, where no user record can belong elsewhere.
ALL_HASH_KEYS = HashKeyRange(0, (1 << 128) - 1)

_reported: set[tuple[str, str]] = set()  # (stream, shard) whose foreign user records were logged; under the lock
_reported_lock = threading.Lock()


class RecordConversion:
    """The records of one shard's replies (see the module docstring). ``corrupt_aggregates`` counts records with
    the aggregate magic that did not decode (delivered as they are); ``foreign_user_records`` the user records
    dropped because their hash key belongs to another shard. Who calls: the getter of ``shard_id``, on its owner's
    thread."""

    def __init__(self, stream_name: str, shard_id: str, *, deaggregate: bool,
                 hash_range: HashKeyRange | None) -> None:
        self.stream_name = stream_name
        self.shard_id = shard_id
        self.deaggregate = deaggregate
        # the shard's hash keys (from ListShards): user records of an aggregate outside it are dropped. None (not
        # known) or every hash key: nothing is dropped
        self.hash_range = hash_range
        self._foreign = hash_range if hash_range is not None and hash_range != ALL_HASH_KEYS else None
        self._inside = keep_inside(self._foreign.start, self._foreign.end) if self._foreign is not None else None
        self.corrupt_aggregates = 0
        self.foreign_user_records = 0

    def columns(self, reply: ReplyColumns) -> RecordColumns:
        """The user records of a reply, as columns: with ``deaggregate``, each KPL aggregate becomes its user records
        (sub-sequence numbers 0..n-1), and one that does not decode is kept whole, counted and logged.

        With a ``hash_range``, the user records whose hash key lies outside it are dropped and counted (a producer
        with a stale shard map put them here, and puts them again in their own shard). The others keep their
        sub-sequence numbers; their ``aggregated`` is one more than the last one kept, so the Kinesis record is done
        once that one is (what follows it belongs to other shards)."""
        return expand(reply, self.shard_id, self.deaggregate, self._kept if self._inside is not None else None,
                      self._corrupt)

    def records(self, raw: Any) -> list[Record]:
        """The records of a reply's parsed ``Records`` (dicts, as botocore parses them): :meth:`columns`, made
        records. Used by a getter that is handed parsed records (enhanced fan-out's events)."""
        return to_records(self.columns(columns_of_reply({"Records": raw})))

    def _corrupt(self, seq: str, data: bytes) -> None:
        self.corrupt_aggregates += 1
        log.warning("record %s:%s starts like a KPL aggregate but does not decode (%s); delivered as it is",
                    self.shard_id, seq, aggregate_problem(data))

    def _kept(self, seq: str, keys: list[str], ehks: list[str | None] | None) -> list[int] | None:
        """The indexes of the user records (partition keys ``keys``, explicit hash keys ``ehks``, None when none
        has one) whose hash key lies in the shard's range (None when all do), by
        :func:`~kinesis_spout.kinesis.retrieval.wire_columns.keep_inside` (each distinct key hashed once); counts
        and reports the others. A user record whose explicit hash key is not a number is kept (no shard can be
        told)."""
        inside, rng = self._inside, self._foreign
        assert inside is not None and rng is not None  # only given to expand() with a range
        kept = inside(seq, keys, ehks)
        if kept is None:
            return None
        low = rng.start
        dropped = sorted(set(range(len(keys))) - set(kept))
        below = sum(1 for i in dropped if (h := hash_key(keys[i], ehks[i] if ehks is not None else None)) is not None
                    and h < low)
        self.foreign_user_records += len(dropped)
        self._report(seq, len(keys), below, len(dropped) - below)
        return kept

    def _report(self, seq: str, total: int, below: int, above: int) -> None:
        """Log dropped user records: the first time for a shard (in this process) as a warning with the counts, later
        at debug level."""
        key = (self.stream_name, self.shard_id)
        with _reported_lock:
            first = key not in _reported
            _reported.add(key)
        log.log(logging.WARNING if first else logging.DEBUG,
                "shard %s of %r: KPL aggregate %s holds %d of its %d user records with hash keys outside the shard's "
                "range %s (%d below it, %d above it); a producer with a stale shard map put them here and puts them "
                "again in their own shards: dropped here (counted in foreign_user_records%s). A producer that "
                "aggregates user records of several shards and puts them nowhere else loses them so: set "
                "dropForeignUserRecords=false (SpoutConfig.drop_foreign_user_records) for it", self.shard_id,
                self.stream_name, seq, below + above, total, self._foreign, below, above,
                "; later ones of this shard are logged at debug level" if first else "")


class ConvertedRecords:
    """What a getter that converts its records through a :class:`RecordConversion` (``self._convert``, set by its
    constructor) tells of them: the settings it converts with and its counters. Both getters take it."""

    _convert: RecordConversion

    @property
    def deaggregate(self) -> bool:
        """Whether KPL aggregates are handed out as their user records."""
        return self._convert.deaggregate

    @property
    def hash_range(self) -> HashKeyRange | None:
        """The shard's hash keys: user records of an aggregate outside them are dropped (None: nothing is)."""
        return self._convert.hash_range

    @property
    def corrupt_aggregates(self) -> int:
        """Records with the aggregate magic that did not decode (delivered as they are)."""
        return self._convert.corrupt_aggregates

    @property
    def foreign_user_records(self) -> int:
        """User records dropped because their hash key belongs to another shard."""
        return self._convert.foreign_user_records
