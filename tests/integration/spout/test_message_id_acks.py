"""Acks by message id on kinesalite (real 56-digit sequence numbers): an id that is not exactly
``"shardId:sequenceNumber[:subSequenceNumber]"`` in decimal digits acks nothing, even when ``int()`` would read a
number out of it that is a record in flight, and is counted and logged as malformed, one by one (``ack``) and
together (``ack_many``); well-formed ids, KPL ids with a sub-sequence number among them, ack as ever; and the safe
checkpoint keeps reaching the store as acks go on after each write."""

from __future__ import annotations

import logging

import pytest

from kinesis_spout import KinesisSpout, MemoryCheckpointStore
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import make_config, next_tuple


def _malformed(shard_id: str, seq: str) -> list[object]:
    """Ids naming ``shard_id`` whose sequence part ``int()`` reads as ``seq`` (or fails on), yet malformed: blanks,
    signs and underscores int() allows, digits int() does not read, empty parts, a colon too many; and non-strings."""
    return [f"{shard_id}: {seq}", f"{shard_id}:{seq} ", f"{shard_id}:+{seq}", f"{shard_id}:{seq[:9]}_{seq[9:]}",
            f"{shard_id}:{seq}\n", f"{shard_id}:", f"{shard_id}:{seq}:", f"{shard_id}:{seq}:x", f"{shard_id}::{seq}",
            f"{shard_id}:{seq}\u00b2", f"{shard_id}:-{seq}", f":{seq}", f"{shard_id}{seq}", None, 12, b"x:1"]


@pytest.mark.parametrize("how", ["ack", "ack_many"])
def test_a_malformed_message_id_acks_nothing_and_is_counted_and_logged(
        kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture, how: str) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"a", b"b"], ["pk", "pk"])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        first, second = next_tuple(spout), next_tuple(spout)
        shard_id, seq = placed[0]
        assert first.message_id == f"{shard_id}:{seq}" and len(seq) == 56
        bad = _malformed(shard_id, seq)
        with caplog.at_level(logging.DEBUG, logger="kinesis_spout"):
            if how == "ack":
                for mid in bad:
                    spout.ack(mid)  # type: ignore[arg-type]
            else:
                spout.ack_many(bad)  # type: ignore[arg-type]
        assert spout.unknown_message_ids == len(bad)
        logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ignoring malformed")]
        assert logged == [f"ignoring malformed message id {mid!r}" for mid in bad]
        figures = spout.metrics()[0]
        assert (figures.inflight, figures.acked, figures.checkpoint) == (2, 0, None)  # nothing acked
        if how == "ack":
            spout.ack(first.message_id)
            spout.ack(second.message_id)
        else:
            spout.ack_many([second.message_id, first.message_id])
        assert spout.unknown_message_ids == len(bad)
        assert spout.metrics()[0].inflight == 0 and spout.flush_checkpoints()
    stored = store.load(shard_id)
    assert stored is not None and stored.sequence_number == placed[-1][1]


def test_ack_many_acks_ids_with_sub_sequence_numbers_beside_plain_ones(kinesalite: KinesisEndpoint) -> None:
    """A KPL user record's id (``shard:seq:sub``) takes the checked path; the plain ids of its batch the short one:
    both ack, and an id of a shard not read is counted."""
    from kinesis_spout.kinesis.writing.aggregator import AggregateBuilder

    stream = kinesalite.create_stream()
    builder = AggregateBuilder()
    for i in range(3):
        builder.add("pk", None, f"user-{i}".encode())
    data, key, _ = builder.build()
    placed = kinesalite.put(stream, [data, b"plain"], [key, "pk"])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got = [next_tuple(spout) for _ in range(4)]
        mids = [t.message_id for t in got]
        assert mids[1].count(":") == 2 and mids[3].count(":") == 1  # a user record past the first; the plain one
        spout.ack_many([*reversed(mids), "shardId-000000000099:1"])
        assert spout.unknown_message_ids == 1 and spout.metrics()[0].inflight == 0
        assert spout.flush_checkpoints()
    stored = store.load(placed[0][0])
    assert stored is not None and stored.sequence_number == placed[1][1]


def test_the_checkpoint_reaches_the_store_after_each_write_as_acks_go_on(kinesalite: KinesisEndpoint) -> None:
    """The checkpoint is offered once until the writer takes it: acks after each write offer it again, so every
    flush stores the newest safe checkpoint (one ack at a time, and with ack_many)."""
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(6)], ["pk"] * 6)
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream, checkpoint_interval_s=60.0), store) as spout:
        got = [next_tuple(spout) for _ in range(6)]
        shard_id = placed[0][0]
        for done in (0, 1, 2):
            spout.ack(got[done].message_id)
            assert spout.flush_checkpoints()
            stored = store.load(shard_id)
            assert stored is not None and stored.sequence_number == placed[done][1]
        spout.ack_many([got[3].message_id, got[4].message_id])
        spout.ack(got[5].message_id)  # while the writer still holds the offer of the ack_many
        assert spout.flush_checkpoints()
        stored = store.load(shard_id)
        assert stored is not None and stored.sequence_number == placed[5][1]
