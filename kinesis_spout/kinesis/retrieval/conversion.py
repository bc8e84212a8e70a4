"""The conversion of a reply's Kinesis records into the spout's records, shared by both getters.

:class:`RecordConversion` turns the raw records of a GetRecords reply or a SubscribeToShard event into
:class:`~kinesis_spout.records.Record` tuples: KPL aggregates become their user records (``deaggregate``), and user
records whose hash key lies outside the shard's range are dropped and counted (``hash_range``). Each getter holds
one (composition: the polling and the fan-out getter derive from nothing but the protocol). Not thread-safe: the
getter's owner calls it; the log of foreign user records shared by all of a process's getters is under a lock.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kinesis_spout.kinesis.aggregation import MAGIC, aggregate_problem, deaggregate_columns, hash_key
from kinesis_spout.kinesis.shards import HashKeyRange
from kinesis_spout.records import Record, SequenceKey

__all__ = ["ALL_HASH_KEYS", "RecordConversion"]

log = logging.getLogger("kinesis_spout.kinesis")

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
        self.corrupt_aggregates = 0
        self.foreign_user_records = 0

    def records(self, raw: Any) -> list[Record]:
        """The reply's records; with ``deaggregate``, each KPL aggregate becomes its user records (sub-sequence
        numbers 0..n-1), and one that does not decode is kept whole, counted and logged.

        With a ``hash_range``, the user records whose hash key lies outside it are dropped and counted (a producer
        with a stale shard map put them here, and puts them again in their own shard). The others keep their
        sub-sequence numbers; their ``aggregated`` is one more than the last one kept, so the Kinesis record is done
        once that one is (what follows it belongs to other shards)."""
        shard_id = self.shard_id
        out: list[Record] = []
        new = tuple.__new__  # named tuples built without their __new__: every field given, a fraction of the cost
        for r in raw:
            seq, data = r["SequenceNumber"], r["Data"]
            if self.deaggregate and data[:4] == MAGIC:
                users = deaggregate_columns(data)
                if users is not None:
                    arrived, number = r.get("ApproximateArrivalTimestamp"), int(seq)
                    keys, ehks, datas = users
                    kept = self._kept(seq, keys, ehks) if self._foreign is not None else None
                    if kept is None:
                        n = len(datas)
                        out.extend([new(Record, (shard_id, seq, i, key, payload, arrived,
                                                 new(SequenceKey, (number, i)), n))
                                    for i, key, payload in zip(range(n), keys, datas)])
                    elif kept:
                        n = kept[-1] + 1
                        out.extend([new(Record, (shard_id, seq, i, keys[i], datas[i], arrived,
                                                 new(SequenceKey, (number, i)), n))
                                    for i in kept])
                    continue
                self.corrupt_aggregates += 1
                log.warning("record %s:%s starts like a KPL aggregate but does not decode (%s); delivered as it is",
                            shard_id, seq, aggregate_problem(data))
            out.append(new(Record, (shard_id, seq, None, r["PartitionKey"], data,
                                    r.get("ApproximateArrivalTimestamp"), new(SequenceKey, (int(seq), 0)), 0)))
        return out

    def _kept(self, seq: str, keys: list[str], ehks: list[str | None] | None) -> list[int] | None:
        """The indexes of the user records (partition keys ``keys``, explicit hash keys ``ehks``, None when none
        has one) whose hash key lies in the shard's range (None when all do); counts and reports the others. A user
        record whose explicit hash key is not a number is kept (no shard can be told). Each distinct key is hashed
        once: the user records of an aggregate often share their explicit hash key."""
        rng = self._foreign
        assert rng is not None
        low, high = rng.start, rng.end
        # one cache per kind of key: a partition key and an explicit hash key of the same text hash differently
        pk_hashes: dict[str, int | None] = {}
        pk_inside: dict[str, bool] = {}
        ehk_hashes: dict[str, int | None] = {}
        ehk_inside: dict[str, bool] = {}
        # the distinct keys first (sets are built at C speed): most aggregates lie wholly inside their shard
        by_pk = set(keys) if ehks is None else {pk for pk, ehk in zip(keys, ehks) if ehk is None}
        by_ehk: set[str | None] = set() if ehks is None else set(ehks)
        by_ehk.discard(None)
        if all([_inside(pk, None, low, high, pk_inside, pk_hashes) for pk in by_pk]) and \
                all([_inside(ehk, ehk, low, high, ehk_inside, ehk_hashes) for ehk in by_ehk if ehk is not None]):
            return None
        if ehks is None:
            outside = [i for i, pk in enumerate(keys) if not _inside(pk, None, low, high, pk_inside, pk_hashes)]
        else:
            outside = [i for i, (pk, ehk) in enumerate(zip(keys, ehks))
                       if not (_inside(ehk, ehk, low, high, ehk_inside, ehk_hashes) if ehk is not None
                               else _inside(pk, None, low, high, pk_inside, pk_hashes))]
        if not outside:
            return None
        below = 0
        for i in outside:
            ehk = ehks[i] if ehks is not None else None
            h = ehk_hashes[ehk] if ehk is not None else pk_hashes[keys[i]]
            below += h is not None and h < low
        above = len(outside) - below
        self.foreign_user_records += below + above
        self._report(seq, len(keys), below, above)
        dropped = set(outside)
        return [i for i in range(len(keys)) if i not in dropped]

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


def _inside(text: str, ehk: str | None, low: int, high: int, inside: dict[str, bool],
            hashes: dict[str, int | None]) -> bool:
    """Whether the user record keyed ``text`` (its explicit hash key ``ehk``, else its partition key: ``ehk``
    None) lies in ``low .. high``; remembered in ``inside`` and ``hashes`` (by ``text``, one pair of dicts per
    kind of key) for the user records that share it. An explicit hash key that is not a number lies inside (no
    shard can be told). Called by :meth:`RecordConversion._kept` on the reader's thread."""
    got = inside.get(text)
    if got is None:
        h = hashes[text] = hash_key(text, ehk)
        got = inside[text] = h is None or low <= h <= high
    return got
