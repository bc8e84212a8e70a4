"""KPL aggregated records through the spout, on moto and kinesalite: aggregates made by aws-kinesis-agg (a producer
nobody here wrote) come out as their user records, each tracked, retried and checkpointed on its own."""

from __future__ import annotations

import hashlib

import pytest

from kinesis_spout import KinesisSpout, MemoryCheckpointStore, RetryBackoff, SpoutConfig
from kinesis_spout.kinesis.aggregation import MAGIC
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.spout import drain

from ..support import aggregate, make_config


def put(endpoint: KinesisEndpoint, stream: str, records: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    return endpoint.put(stream, [data for _, data in records], partition_keys=[pk for pk, _ in records])


USERS = [(f"user-{i % 7}", f"event {i}".encode()) for i in range(30)]


def test_user_records_come_out_one_by_one_with_their_keys_and_sub_sequence_numbers(
        kinesis_backend: KinesisEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    bad_body = b"\x0a\x01k"
    corrupt = MAGIC + bad_body + hashlib.md5(b"something else").digest()
    placed = put(kinesis_backend, stream, [aggregate(USERS[:10]), ("plain-key", b"plain"), aggregate(USERS[10:]),
                                           ("corrupt-key", corrupt)])
    with KinesisSpout(make_config(kinesis_backend, stream), MemoryCheckpointStore()) as spout:
        got = drain(spout, 32)
        assert [m.corrupt_aggregates for m in spout.metrics()] == [1]
    shard, (s0, s1, s2, s3) = placed[0][0], [seq for _, seq in placed]
    assert [(t.record.partition_key, t.record.data) for t in got] == \
        USERS[:10] + [("plain-key", b"plain")] + USERS[10:] + [("corrupt-key", corrupt)]
    assert [t.record.sub_sequence_number for t in got] == list(range(10)) + [None] + list(range(20)) + [None]
    assert [t.record.sequence_number for t in got] == [s0] * 10 + [s1] + [s2] * 20 + [s3]
    assert got[0].message_id == f"{shard}:{s0}" and got[3].message_id == f"{shard}:{s0}:3"
    assert got[10].message_id == f"{shard}:{s1}"
    assert [r.getMessage() for r in caplog.records if "KPL aggregate" in r.getMessage()] == [
        f"record {shard}:{s3} starts like a KPL aggregate but does not decode (the MD5 digest does not match the "
        f"message); delivered as it is"]


def test_one_failed_user_record_is_retried_alone(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    put(kinesis_backend, stream, [aggregate(USERS[:10])])
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream, retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    with KinesisSpout(config, store) as spout:
        first = drain(spout, 10, ack=False)
        for tup in first:
            (spout.fail if tup.record.sub_sequence_number == 4 else spout.ack)(tup.message_id)
        again = drain(spout, 1)
        assert drain(spout, 1, timeout_s=0.5) == []
        assert spout.flush_checkpoints()
    assert [(t.record.sub_sequence_number, t.attempt) for t in again] == [(4, 2)]
    checkpoint = next(iter(store.list().values()))
    assert checkpoint.sub_sequence_number is None  # the aggregate is done as a whole


def test_a_checkpoint_inside_an_aggregate_resumes_after_its_user_record(kinesis_backend: KinesisEndpoint) -> None:
    """Five of ten user records acked, then the consumer stops (as after a crash: nothing else written): the next
    one re-reads the aggregate and delivers the other five only; nothing before the checkpoint comes again."""
    stream = kinesis_backend.create_stream(shards=1)
    placed = put(kinesis_backend, stream, [aggregate(USERS[:10]), aggregate(USERS[10:20])])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesis_backend, stream), store) as spout:
        first = drain(spout, 10, ack=False)
        spout.ack_many(t.message_id for t in first[:5])
        assert spout.flush_checkpoints()
    stored = store.load(placed[0][0])
    assert (stored.sequence_number, stored.sub_sequence_number) == (placed[0][1], 4)
    with KinesisSpout(make_config(kinesis_backend, stream), store) as spout:
        rest = drain(spout, 15)
        assert drain(spout, 1, timeout_s=0.5) == []
        assert spout.flush_checkpoints()
    assert [t.record.data for t in rest] == [d for _, d in USERS[5:20]]
    assert [t.record.sub_sequence_number for t in rest] == list(range(5, 10)) + list(range(10))
    final = store.load(placed[0][0])
    assert (final.sequence_number, final.sub_sequence_number) == (placed[1][1], None)


def test_deaggregation_can_be_switched_off(kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    pk, blob = aggregate(USERS[:10])
    put(kinesis_backend, stream, [(pk, blob)])
    config = SpoutConfig.from_options({"streamName": stream, "appName": "kpl", "endpointUrl":
                                       kinesis_backend.endpoint_url, "initialPosition": "TRIM_HORIZON",
                                       "deaggregate": "false", "emptyRecordBackoffS": "0.2"})
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        got = drain(spout, 1)
        assert drain(spout, 1, timeout_s=0.5) == []
    assert [(t.record.data, t.record.sub_sequence_number) for t in got] == [(blob, None)]


def test_a_checkpoint_that_finishes_an_aggregate_replaces_the_one_inside_it(kinesis_backend: KinesisEndpoint) -> None:
    """Half of an aggregate acked and its checkpoint stored, then the rest: the stored checkpoint must say the whole
    aggregate is done (sub-sequence None), not stay inside it, which would deliver its second half again."""
    stream = kinesis_backend.create_stream(shards=1)
    placed = put(kinesis_backend, stream, [aggregate(USERS[:10])])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesis_backend, stream), store) as spout:
        got = drain(spout, 10, ack=False)
        spout.ack_many(t.message_id for t in got[:5])
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sub_sequence_number == 4
        spout.ack_many(t.message_id for t in got[5:])
        assert spout.flush_checkpoints()
    stored = store.load(placed[0][0])
    assert (stored.sequence_number, stored.sub_sequence_number) == (placed[0][1], None)
    with KinesisSpout(make_config(kinesis_backend, stream), store) as spout:
        assert drain(spout, 1, timeout_s=1.0) == []


def test_an_empty_aggregate_is_delivered_whole_and_counted(kinesalite: KinesisEndpoint) -> None:
    """The magic and the MD5 of an empty message: no user record to hand out, so the Kinesis record comes out as it
    is (as aws-kinesis-agg and KCL deliver it), counted as a corrupt aggregate; nothing vanishes."""
    stream = kinesalite.create_stream(shards=1)
    empty = MAGIC + hashlib.md5(b"").digest()
    placed = put(kinesalite, stream, [("empty-key", empty), aggregate(USERS[:3])])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got = drain(spout, 4)
        assert [m.corrupt_aggregates for m in spout.metrics()] == [1]
        assert spout.flush_checkpoints()
    assert [(t.record.partition_key, t.record.data, t.record.sub_sequence_number) for t in got] == \
        [("empty-key", empty, None)] + [(pk, data, i) for i, (pk, data) in enumerate(USERS[:3])]
    assert got[0].message_id == f"{placed[0][0]}:{placed[0][1]}"
