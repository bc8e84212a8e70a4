"""KPL aggregates that hold user records of other shards, on kinesalite (a 3-shard stream: real hash key ranges).

A KPL with a stale shard map (after a reshard) may put an aggregate whose user records hash to other shards, and
then puts those user records again in their own shards itself. KCL filters de-aggregated user records by the
shard's hash key range; so do the spout, the driver-read and executor-read Structured Streaming modes, their
replays, and batch reads: every user record comes out once, from its own shard. The Spark reads take one Kinesis
record per GetRecords, so a reply whose user records were all dropped must not pass for the shard's tip. The user
records kept keep their sub-sequence numbers, a checkpoint after the last one kept finishes the aggregate, and a
checkpoint inside an aggregate resumes there.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from pyspark.sql.streaming.datasource import ReadMaxRows

from kinesis_spout import KinesisSpout, MemoryCheckpointStore
from kinesis_spout.kinesis.aggregation import hash_key
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.shards import list_shards
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.spark.source import ExecutorStreamReader, KinesisBatchReader, KinesisSpoutStreamReader, ShardRange
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain

from ..support import make_config
from .support import drive, executor_options, run_batches, source_options


@dataclass
class Stale:
    """What was put: the middle shard's id, and each delivered message id with its data, in shard order."""

    middle: str
    aggregates: list[str]  # sequence numbers of the aggregates put on the middle shard, in order
    expected: dict[str, list[tuple[str, bytes]]]  # shard -> [(message id, data)] in read order
    foreign: int  # user records on the middle shard that belong to other shards

    def all_data(self) -> Counter[bytes]:
        return Counter(data for rows in self.expected.values() for _, data in rows)


def _md5(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode()).digest(), "big")


def _key_hashed_into(low: int, high: int, prefix: str) -> str:
    """A partition key (no explicit hash key) whose MD5 lands in [low, high], as Kinesis would route it."""
    return next(k for k in (f"{prefix}-{n}" for n in range(10_000)) if low <= _md5(k) <= high)


def _aggregate(users: list[tuple[str, bytes, str | None]]) -> bytes:
    aggregator = RecordAggregator()
    for pk, data, ehk in users:
        assert aggregator.add_user_record(pk, data, ehk) is None
    return bytes(aggregator.clear_and_get().get_contents()[2])


def put_stale(endpoint: KinesisEndpoint, stream: str) -> Stale:
    """On the middle shard of three: aggregate A (5 user records of its own, 5 of the shard below, 5 of the shard
    above, interleaved, then one of its own and one of the shard above routed by partition key only), aggregate B
    (only user records of other shards) and aggregate C (2 of its own, then 2 of other shards). The foreign user
    records are then put again in their own shards, as plain records, as the KPL does."""
    client = endpoint.client()
    shards = sorted(client.list_shards(StreamName=stream)["Shards"], key=lambda s: s["ShardId"])
    assert len(shards) == 3
    ranges = [(int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"])) for s in shards]
    (lo, _), (mid, mid_end), (hi, hi_end) = ranges
    middle = shards[1]["ShardId"]
    a = []
    for i in range(5):
        a += [(f"in-{i}", f"A in {i}".encode(), str(mid + i)), (f"below-{i}", f"A below {i}".encode(), str(lo + i)),
              (f"above-{i}", f"A above {i}".encode(), str(hi_end - i))]
    a += [(_key_hashed_into(mid, mid_end, "own"), b"A own by key", None),
          (_key_hashed_into(hi, hi_end, "above"), b"A above by key", None)]
    b = [("b-below", b"B below", str(lo + 100)), ("b-above", b"B above", str(hi + 100))]
    c = [("c-in-0", b"C in 0", str(mid_end)), ("c-in-1", b"C in 1", str(mid)),
         ("c-below", b"C below", str(lo)), ("c-above", b"C above", str(hi))]
    seqs = [client.put_record(StreamName=stream, Data=_aggregate(users), PartitionKey="aggregate",
                              ExplicitHashKey=str(mid + 7))["SequenceNumber"] for users in (a, b, c)]
    own = {0: [0, 3, 6, 9, 12, 15], 2: [0, 1]}
    expected: dict[str, list[tuple[str, bytes]]] = {s["ShardId"]: [] for s in shards}
    for n, users in ((0, a), (2, c)):
        expected[middle] += [(f"{middle}:{seqs[n]}" + (f":{sub}" if sub else ""), users[sub][1]) for sub in own[n]]
    foreign = [(pk, data, ehk) for n, users in enumerate((a, b, c)) for sub, (pk, data, ehk) in enumerate(users)
               if sub not in own.get(n, [])]
    for pk, data, ehk in foreign:  # the KPL puts them again, in their own shards
        reply = client.put_record(StreamName=stream, Data=data, PartitionKey=pk,
                                  **({"ExplicitHashKey": ehk} if ehk else {}))
        assert reply["ShardId"] != middle
        expected[reply["ShardId"]].append((f"{reply['ShardId']}:{reply['SequenceNumber']}", data))
    return Stale(middle, seqs, expected, len(foreign))


def by_shard(rows: list[tuple[str, str, bytes]]) -> dict[str, list[tuple[str, bytes]]]:
    """(shard, message id, data) rows grouped by shard, in order."""
    out: dict[str, list[tuple[str, bytes]]] = {}
    for shard, mid, data in rows:
        out.setdefault(shard, []).append((mid, data))
    return out


def arrow_rows(reader: Any, partition: Any) -> list[tuple[str, str, bytes]]:
    out = []
    for batch in reader.read(partition):
        cols = batch.to_pydict()
        out += list(zip(cols["shard_id"], cols["message_id"], cols["data"]))
    return out


def test_hash_keys_and_ranges_agree_with_where_the_server_puts_records(kinesalite: KinesisEndpoint) -> None:
    """A partition key's MD5 (big-endian), or the explicit hash key, falls in the ListShards range of the shard the
    server put the record in."""
    stream = kinesalite.create_stream(shards=3)
    client = kinesalite.client()
    ranges = {s.shard_id: s.hash_range for s in list_shards(client, stream)}
    assert all(r is not None for r in ranges.values()) and len(ranges) == 3
    placed = [(pk, None, client.put_record(StreamName=stream, Data=b"x", PartitionKey=pk)["ShardId"])
              for pk in (f"key-{i}" for i in range(30))]
    placed += [("k", ehk, client.put_record(StreamName=stream, Data=b"x", PartitionKey="k",
                                            ExplicitHashKey=ehk)["ShardId"])
               for ehk in (str(r.start) for r in ranges.values() if r is not None)]
    assert len({shard for *_, shard in placed}) == 3
    for pk, ehk, shard in placed:
        h, rng = hash_key(pk, ehk), ranges[shard]
        assert h is not None and rng is not None and rng.start <= h <= rng.end, (pk, ehk, shard)


def test_the_spout_drops_user_records_of_other_shards_so_each_comes_once_from_its_own_shard(
        kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    stream = kinesalite.create_stream(shards=3)
    stale = put_stale(kinesalite, stream)
    total = sum(len(rows) for rows in stale.expected.values())
    store = MemoryCheckpointStore()
    with caplog.at_level(logging.INFO, logger="kinesis_spout"):
        with KinesisSpout(make_config(kinesalite, stream), store) as spout:
            got = drain(spout, total)
            got += drain(spout, stale.foreign, timeout_s=1.0)  # none: the copies on the middle shard are dropped
            metrics = spout.metrics()
            assert spout.flush_checkpoints()
    rows = [(t.record.shard_id, t.message_id, t.record.data) for t in got]
    assert Counter(data for *_, data in rows) == stale.all_data()  # every user record once
    assert by_shard(rows) == {s: r for s, r in stale.expected.items() if r}  # from its own shard, in order
    assert {m.shard_id: m.foreign_user_records for m in metrics} == \
        {s: stale.foreign if s == stale.middle else 0 for s in stale.expected}
    warnings = [r for r in caplog.records if "outside the shard's range" in r.getMessage()]
    assert [(r.levelno, stale.middle in r.getMessage(), "(5 below it, 6 above it)" in r.getMessage())
            for r in warnings] == [(logging.WARNING, True, True)]  # once per shard, with the counts
    stored = store.load(stale.middle)  # aggregate C's last user record kept finishes it: the rest is elsewhere
    assert (stored.sequence_number, stored.sub_sequence_number) == (stale.aggregates[2], None)
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        assert drain(spout, 1, timeout_s=1.0) == []


def test_a_checkpoint_inside_an_aggregate_with_foreign_user_records_resumes_after_its_user_record(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=3)
    stale = put_stale(kinesalite, stream)
    mine = stale.expected[stale.middle]
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got = [t for t in drain(spout, 30, timeout_s=5.0, ack=False) if t.record.shard_id == stale.middle]
        assert [t.message_id for t in got] == [mid for mid, _ in mine]
        spout.ack_many(t.message_id for t in got[:3])  # user records 0, 3 and 6 of aggregate A
        assert spout.flush_checkpoints()
    stored = store.load(stale.middle)
    assert (stored.sequence_number, stored.sub_sequence_number) == (stale.aggregates[0], 6)
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        rest = [t for t in drain(spout, 30, timeout_s=5.0) if t.record.shard_id == stale.middle]
        assert spout.flush_checkpoints()
    assert [(t.message_id, t.record.data) for t in rest] == mine[3:]
    stored = store.load(stale.middle)
    assert (stored.sequence_number, stored.sub_sequence_number) == (stale.aggregates[2], None)


def test_drop_foreign_user_records_false_keeps_aggregates_of_producers_that_mix_shards(
        kinesalite: KinesisEndpoint) -> None:
    """aws-kinesis-agg used directly packs user records of every shard into one Kinesis record and puts them nowhere
    else: with the default they are dropped (and counted); ``drop_foreign_user_records=False`` delivers them all."""
    stream = kinesalite.create_stream(shards=3)
    users = [(f"user-{i}", f"mixed {i}".encode(), None) for i in range(40)]
    client = kinesalite.client()
    shard = client.put_record(StreamName=stream, Data=_aggregate(users), PartitionKey="mixed")["ShardId"]
    ranges = {s.shard_id: s.hash_range for s in list_shards(client, stream)}
    rng = ranges[shard]
    assert rng is not None
    own = [data for pk, data, _ in users if rng.start <= _md5(pk) <= rng.end]
    assert 0 < len(own) < len(users)
    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as spout:
        kept = drain(spout, len(own))
        assert drain(spout, 1, timeout_s=0.5) == []
        assert {m.shard_id: m.foreign_user_records for m in spout.metrics()}[shard] == len(users) - len(own)
    assert [t.record.data for t in kept] == own
    config = make_config(kinesalite, stream, drop_foreign_user_records=False)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        everything = drain(spout, len(users))
        assert drain(spout, 1, timeout_s=0.5) == []
        assert [m.foreign_user_records for m in spout.metrics()] == [0, 0, 0]
    assert [t.record.data for t in everything] == [data for _, data, _ in users]


def test_driver_reads_and_their_replays_drop_user_records_of_other_shards(kinesalite: KinesisEndpoint,
                                                                           zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=3)
    stale = put_stale(kinesalite, stream)
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="4",
                                                      maxRecordsPerCall="1"))
    reader.prepareForTriggerAvailableNow()
    batches, final = run_batches(reader, reader.initialOffset(), ReadMaxRows(4))
    rows = [row for _, _, parts, _ in batches for p in parts for row in arrow_rows(reader, p)]
    assert Counter(data for *_, data in rows) == stale.all_data()
    assert by_shard(rows) == {s: r for s, r in stale.expected.items() if r}
    assert final[stale.middle] == stale.aggregates[2]  # the last aggregate taken whole
    fresh = pickle.loads(pickle.dumps(reader))  # a new process: each batch read again from Kinesis
    replayed = []
    for start, end, _, _ in batches:
        parts = fresh.partitions(start, end)
        assert all(isinstance(p, ShardRange) for p in parts)
        replayed += [row for p in parts for row in arrow_rows(fresh, p)]
    assert replayed == rows
    reader.stop()
    fresh.stop()


def test_executor_reads_and_their_replays_drop_user_records_of_other_shards(kinesalite: KinesisEndpoint,
                                                                             zookeeper: Any) -> None:
    stream = kinesalite.create_stream(shards=3)
    stale = put_stale(kinesalite, stream)
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream, maxRecordsPerTrigger="6",
                                                   maxRecordsPerCall="1"))
    reader.prepareForTriggerAvailableNow()
    batches, final = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit())
    fresh = pickle.loads(pickle.dumps(reader))  # a new process: the tasks find their recorded ends
    rows = []
    for start, end, _ in batches:
        parts = fresh.partitions(start, end)
        rows += [row for p in parts for row in arrow_rows(fresh, p)]
    assert Counter(data for *_, data in rows) == stale.all_data()
    assert by_shard(rows) == {s: r for s, r in stale.expected.items() if r}
    assert [mid for *_, ids in batches for mid in ids] == [mid for _, mid, _ in rows]
    reader.stop()
    fresh.stop()


def test_a_batch_read_drops_user_records_of_other_shards(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=3)
    stale = put_stale(kinesalite, stream)
    reader = KinesisBatchReader({"streamName": stream, "endpointUrl": kinesalite.endpoint_url,
                                 "region": kinesalite.region, "maxRecordsPerCall": "1"})
    rows = [row for p in reader.partitions() for row in arrow_rows(reader, p)]
    assert Counter(data for *_, data in rows) == stale.all_data()
    assert by_shard(rows) == {s: r for s, r in stale.expected.items() if r}


def put_foreign_then_own(endpoint: KinesisEndpoint, stream: str, n_foreign: int) -> list[bytes]:
    """On the middle shard of three: ``n_foreign`` aggregates whose user records all belong to the shard below,
    then one aggregate of 3 user records of its own. Returns the own user records' data."""
    client = endpoint.client()
    ranges = sorted((s.shard_id, s.hash_range) for s in list_shards(client, stream))
    (_, below), (middle, own_range) = ranges[0], ranges[1]
    assert below is not None and own_range is not None
    for i in range(n_foreign):
        reply = client.put_record(StreamName=stream, Data=_aggregate([(f"f{i}", b"foreign", str(below.start + i))]),
                                  PartitionKey="aggregate", ExplicitHashKey=str(own_range.start))
        assert reply["ShardId"] == middle
    own = [f"own {i}".encode() for i in range(3)]
    client.put_record(StreamName=stream, PartitionKey="aggregate", ExplicitHashKey=str(own_range.start),
                      Data=_aggregate([(f"o{i}", d, str(own_range.start + i)) for i, d in enumerate(own)]))
    return own


def test_an_available_now_run_of_driver_reads_goes_past_a_reply_whose_user_records_were_all_dropped(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """One Kinesis record per GetRecords: the all-foreign aggregate comes alone; the shard is not at its tip."""
    stream = kinesalite.create_stream(shards=3)
    own = put_foreign_then_own(kinesalite, stream, 1)
    reader = KinesisSpoutStreamReader(source_options(kinesalite, zookeeper, stream, maxRecordsPerCall="1"))
    reader.prepareForTriggerAvailableNow()
    try:
        batches, _ = run_batches(reader, reader.initialOffset(), ReadMaxRows(100))
        rows = [row for _, _, parts, _ in batches for p in parts for row in arrow_rows(reader, p)]
    finally:
        reader.stop()
    assert [data for *_, data in rows] == own


def test_an_available_now_run_of_executor_reads_probes_past_replies_whose_user_records_were_all_dropped(
        kinesalite: KinesisEndpoint, zookeeper: Any) -> None:
    """The probes (GetRecords Limit=1) meet 6 all-foreign aggregates, more than the idle wait allows at the
    shard's pace: passing them is work, not idleness, and the run's first batch reads the own user records."""
    stream = kinesalite.create_stream(shards=3)
    own = put_foreign_then_own(kinesalite, stream, 6)
    reader = ExecutorStreamReader(executor_options(kinesalite, zookeeper, stream))
    reader.prepareForTriggerAvailableNow()
    try:
        batches, _ = drive(reader, reader.initialOffset(), reader.getDefaultReadLimit())
        rows = [row for s, e, _ in batches for p in reader.partitions(s, e) for row in arrow_rows(reader, p)]
    finally:
        reader.stop()
    assert [data for *_, data in rows] == own


def test_the_spout_reads_on_at_the_shards_pace_past_replies_whose_user_records_were_all_dropped(
        kinesalite: KinesisEndpoint) -> None:
    """Such a reply was not empty: the reader polls again at Kinesis' pace (5 calls a second), not after the
    empty-read backoff (here a minute, far longer than the drain's bound), and the own user records arrive."""
    stream = kinesalite.create_stream(shards=3)
    own = put_foreign_then_own(kinesalite, stream, 3)
    config = replace(make_config(kinesalite, stream, max_records_per_call=1), empty_record_backoff_s=60.0)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        got = drain(spout, len(own), timeout_s=15.0)
        dropped = sum(m.foreign_user_records for m in spout.metrics())
    assert [t.record.data for t in got] == own
    assert dropped == 3


def test_a_user_record_whose_explicit_hash_key_is_not_a_number_is_kept(kinesalite: KinesisEndpoint) -> None:
    """No shard can be told for it: it is delivered where it was put, while a user record of another shard in the
    same aggregate is dropped."""
    stream = kinesalite.create_stream(shards=3)
    client = kinesalite.client()
    shards = sorted((s.shard_id, s.hash_range) for s in list_shards(client, stream))
    (_, below), (middle, rng) = shards[0], shards[1]
    assert below is not None and rng is not None
    users = [("odd-0", b"hex key", "0x10"), ("odd-1", b"word key", "abc"), ("foreign", b"foreign", str(below.start)),
             ("own", b"own", str(rng.start))]
    client.put_record(StreamName=stream, Data=_aggregate(users), PartitionKey="a", ExplicitHashKey=str(rng.start))
    getter = ShardGetter(client, stream, middle, TRIM_HORIZON, deaggregate=True, hash_range=rng)
    result = getter.fetch()
    assert [(r.data, r.sub_sequence_number) for r in result.records] == [(b"hex key", 0), (b"word key", 1),
                                                                          (b"own", 3)]
    assert (result.fetched, getter.foreign_user_records) == (1, 1)


def test_a_shard_whose_hash_key_range_is_not_listed_drops_nothing_and_says_so_once(
        kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    """With a listing that leaves HashKeyRange out, no shard can filter: every user record is delivered (the copies
    put by the stale producer twice) and each shard's unknown range is a warning, once."""
    stream = kinesalite.create_stream(shards=3)
    stale = put_stale(kinesalite, stream)
    total = sum(len(rows) for rows in stale.expected.values()) + stale.foreign
    with FaultProxy(kinesalite.endpoint_url) as proxy:
        proxy.hide_hash_key_ranges()
        config = replace(make_config(kinesalite, stream), endpoint_url=proxy.endpoint_url)
        with caplog.at_level(logging.WARNING, logger="kinesis_spout"):
            with KinesisSpout(config, MemoryCheckpointStore()) as spout:
                got = drain(spout, total)
                assert drain(spout, 1, timeout_s=0.5) == []
                dropped = sum(m.foreign_user_records for m in spout.metrics())
            with KinesisSpout(config, MemoryCheckpointStore()) as spout:  # the same shards again: no new warning
                again = drain(spout, total)
    assert (len(got), len(again), dropped) == (total, total, 0)
    warned = sorted(s for r in caplog.records if "hash key range is not known" in r.getMessage()
                    for s in stale.expected if s in r.getMessage() and r.levelno == logging.WARNING)
    assert warned == sorted(stale.expected)  # each of the 3 shards once
