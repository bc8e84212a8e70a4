"""The batch log of SpoutPipeline's exactly-once mode: where a record read again after a restart belongs."""

from __future__ import annotations

import pytest

from kinesis_spout.records import SequenceKey as K
from kinesis_spout.state import MemoryBackingMap, StateDecodeError
from kinesis_spout.state.txlog import BatchLog, BatchLogEntry, Place, ReplayCollector, ShardSpan, next_entry


def entry(committed: bool) -> BatchLogEntry:
    return next_entry(7, {"a": K(10), "b": K(20), "c": None}, {"a": (K(15), 3), "c": (K(5, 2), 2)}) \
        if not committed else BatchLogEntry(7, True, next_entry(7, {"a": K(10), "b": K(20), "c": None},
                                                                {"a": (K(15), 3), "c": (K(5, 2), 2)}).shards)


def test_an_uncommitted_txid_is_replayed_and_what_came_before_is_skipped() -> None:
    e = entry(committed=False)
    assert [e.place("a", K(k)) for k in (9, 10, 11, 15, 16)] == [
        Place.COMMITTED, Place.COMMITTED, Place.BATCH, Place.BATCH, Place.NEW]
    assert e.place("b", K(20)) is Place.COMMITTED and e.place("b", K(21)) is Place.NEW  # no records in txid 7
    assert e.place("c", K(5, 1)) is Place.BATCH and e.place("c", K(5, 3)) is Place.NEW  # KPL sub-records
    assert e.place("d", K(1)) is Place.NEW                                              # a shard never seen
    assert e.committed_through() == {"a": K(10), "b": K(20), "c": None}


def test_a_committed_txid_is_skipped_whole() -> None:
    e = entry(committed=True)
    assert [e.place("a", K(k)) for k in (10, 15, 16)] == [Place.COMMITTED, Place.COMMITTED, Place.NEW]
    assert e.committed_through() == {"a": K(15), "b": K(20), "c": K(5, 2)}


def test_the_replay_collector_counts_each_shards_records() -> None:
    c = ReplayCollector(entry(committed=False))
    assert c.missing() == {"a": 3, "c": 2}
    for shard in ("a", "a", "a", "c", "c"):
        c.add(shard)
    assert c.missing() == {}
    c.add("a")
    assert c.missing() == {"a": -1}


def test_the_log_round_trips_through_a_backing_map() -> None:
    MemoryBackingMap.drop("txlog")
    log = BatchLog(MemoryBackingMap.factory("txlog"), ("$batch-log", "app", "stream"))
    assert log.load() is None
    for e in (entry(False), entry(True), BatchLogEntry(1, False, {"s": ShardSpan(None, K(10**55, 3), 1)})):
        log.save(e)
        assert log.load() == e
    log.close()
    log.close()


@pytest.mark.parametrize("doc", [{"version": 2}, {"version": 1, "txid": "x", "committed": False, "shards": {}},
                                 {"version": 1, "txid": 1, "committed": False, "shards": {"a": {"done": "1:x"}}},
                                 [1, 2]])
def test_a_damaged_log_is_an_error_naming_it(doc) -> None:
    with pytest.raises(StateDecodeError, match="batch log at here cannot be read"):
        BatchLogEntry.from_dict(doc, "here")
