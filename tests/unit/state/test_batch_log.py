"""The batch log of SpoutPipeline's exactly-once mode: where a record read again after a restart belongs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kinesis_spout.records import SequenceKey as K
from kinesis_spout.state import MemoryBackingMap, StateDecodeError, StateError
from kinesis_spout.state.txlog import (
    BatchLog,
    BatchLogEntry,
    OwnershipLost,
    Place,
    ReplayCollector,
    ShardSpan,
    next_entry,
)


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
    log = BatchLog(MemoryBackingMap.factory("txlog"), ("$batch-log", "app", "stream"), owner="run 1")
    assert log.load() is None
    created = log.take_over()
    assert (created.txid, created.committed, dict(created.shards), created.owner) == (0, True, {}, "run 1")
    assert created.log_id and log.load() == created
    for e in (entry(False), entry(True), BatchLogEntry(1, False, {"s": ShardSpan(None, K(10**55, 3), 1)})):
        log.save(e)
        assert log.load() == replace(e, owner="run 1", log_id=created.log_id)
    log.close()
    log.close()


def test_a_take_over_fences_the_previous_writer_and_keeps_the_log_identity() -> None:
    MemoryBackingMap.drop("txlog-fence")
    factory = MemoryBackingMap.factory("txlog-fence")
    key = ("$batch-log", "app", "stream")
    old, new = BatchLog(factory, key, owner="run 1"), BatchLog(factory, key, owner="run 2")
    log_id = old.take_over().log_id
    old.save(entry(False))
    taken = new.take_over()
    assert (taken.txid, taken.committed, taken.owner, taken.log_id) == (7, False, "run 2", log_id)
    with pytest.raises(OwnershipLost, match=r"written by another pipeline since run 1 .* entry of run 2 \(txid 7\)"):
        old.save(entry(True))
    assert new.load() == taken, "the refused write changed nothing"
    new.save(entry(True))
    assert new.load() == replace(entry(True), owner="run 2", log_id=log_id)


def test_a_log_of_an_older_version_gets_an_identity_and_writes_before_a_take_over_are_refused() -> None:
    MemoryBackingMap.drop("txlog-old")
    factory = MemoryBackingMap.factory("txlog-old")
    key = ("$batch-log", "app", "stream")
    backing = factory.make_backing_map()
    backing.multi_put([key], [{k: v for k, v in entry(True).to_dict().items() if k not in ("log_id", "owner")}])
    log = BatchLog(factory, key, owner="run 1")
    with pytest.raises(StateError, match="only after take_over"):
        log.save(entry(True))
    taken = log.take_over()
    assert taken.log_id and taken.shards == entry(True).shards and taken.committed


def test_a_backing_map_without_compare_and_set_is_refused_for_the_log() -> None:
    class Plain:
        def multi_get(self, keys):
            return [None for _ in keys]

        def multi_put(self, keys, values):
            raise AssertionError("never written")

        def close(self):
            pass

    class PlainFactory:
        def make_backing_map(self):
            return Plain()

    with pytest.raises(StateError, match="needs a backing map with compare-and-set .*Plain has none"):
        BatchLog(PlainFactory(), ("$batch-log", "app", "stream"), owner="run 1").take_over()


@pytest.mark.parametrize("doc", [{"version": 2}, {"version": 1, "txid": "x", "committed": False, "shards": {}},
                                 {"version": 1, "txid": 1, "committed": False, "shards": {"a": {"done": "1:x"}}},
                                 [1, 2]])
def test_a_damaged_log_is_an_error_naming_it(doc) -> None:
    with pytest.raises(StateDecodeError, match="batch log at here cannot be read"):
        BatchLogEntry.from_dict(doc, "here")


def test_verify_reads_whether_the_log_is_still_as_this_pipeline_last_wrote_it() -> None:
    MemoryBackingMap.drop("txlog-verify")
    factory = MemoryBackingMap.factory("txlog-verify")
    key = ("$batch-log", "app", "stream")
    old, new = BatchLog(factory, key, owner="run 1"), BatchLog(factory, key, owner="run 2")
    with pytest.raises(StateError, match="only after take_over"):
        old.verify()
    old.take_over()
    old.verify()
    old.save(entry(False))
    old.verify()
    new.take_over()
    with pytest.raises(OwnershipLost, match=r"written by another pipeline since run 1 .* entry of run 2 \(txid 7\)"):
        old.verify()
    new.verify()


class _TakenOverAfterTheWrite(MemoryBackingMap):
    """A real memory backing map; right after its ``nth`` successful compare-and-set, another pipeline takes the
    log over, before the writer reads its write back."""

    nth = 0

    def multi_put_if(self, keys, values, tokens):  # type: ignore[no-untyped-def]
        done = super().multi_put_if(keys, values, tokens)
        type(self).nth -= 1
        if type(self).nth == 0 and all(done):
            BatchLog(MemoryBackingMap.factory(self.name), keys[0], owner="run 2").take_over()
        return done


class _TakenOverFactory:
    def __init__(self, name: str) -> None:
        self.name = name

    def make_backing_map(self) -> MemoryBackingMap:
        return _TakenOverAfterTheWrite(self.name)


def test_a_write_taken_over_before_it_was_read_back_says_it_was_written_and_overwritten() -> None:
    MemoryBackingMap.drop("txlog-readback")
    key = ("$batch-log", "app", "stream")
    _TakenOverAfterTheWrite.nth = 2  # the take-over's write, then the save's
    log = BatchLog(_TakenOverFactory("txlog-readback"), key, owner="run 1")
    log.take_over()
    with pytest.raises(OwnershipLost, match=r"txid 7 was written, but another pipeline took the log over right "
                                            r"after: it now holds an entry of run 2 \(txid 7\)") as lost:
        log.save(entry(False))
    assert "is not written" not in str(lost.value)
