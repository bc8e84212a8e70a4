"""MultiStreamBatch and the ids of a MultiStreamSpout, without a server: ids name their stream, batches added
together keep each operand's own parts, and ids of no stream read are counted as unknown."""

from __future__ import annotations

from kinesis_spout import SpoutConfig
from kinesis_spout.records import Record, SequenceKey, SpoutTuple
from kinesis_spout.spout.multi import MultiStreamBatch, MultiStreamSpout, split_message_id


def tup(stream: str, shard: str, seq: str) -> SpoutTuple:
    record = Record(shard, seq, None, "pk", b"x", None, SequenceKey.parse(seq))
    return SpoutTuple(f"{stream}/{shard}:{seq}", record, b"x", 1)


def test_adding_batches_keeps_each_operand_as_it_was() -> None:
    spout = MultiStreamSpout(SpoutConfig(["a", "b"], "app"))  # never opened: no I/O
    first = MultiStreamBatch(spout, [tup("a", "s0", "1")])
    second = MultiStreamBatch(spout, [tup("b", "s0", "2"), tup("a", "s0", "3")])
    both = first + second
    assert [t.message_id for t in both] == ["a/s0:1", "b/s0:2", "a/s0:3"]
    again = first + second  # first's own parts did not take second's records
    assert [t.message_id for t in again] == [t.message_id for t in both]
    assert [t.message_id for t in first] == ["a/s0:1"]


def test_ids_name_their_stream_and_ids_of_no_stream_read_are_unknown() -> None:
    assert split_message_id("orders/shardId-000000000000:49") == ("orders", "shardId-000000000000:49")
    assert split_message_id("shardId-000000000000:49") == ("", "shardId-000000000000:49")
    spout = MultiStreamSpout(SpoutConfig(["a", "b"], "app"))
    grouped = spout.by_stream(["a/s0:1", "c/s0:1", "s0:1", tup("b", "s1", "7")])
    assert grouped["a"] == ["s0:1"] and [t.message_id for t in grouped["b"]] == ["s1:7"]
    assert spout.unknown_message_ids == 2
