"""A dead letter too large for a Kinesis record (its JSON envelope, the data in base64, is over 1 MiB) must not
block the others nor the shard's checkpoint: the others are written, and the oversized one goes into the stream as
a stub (every field but ``data``, plus the data's size and SHA-256) after its full envelope went to the configured
fallback, if any. Nothing is lost: the stub names the record's position, by which it is read again from its stream.
On kinesalite, which refuses records over 1 MiB as Kinesis does."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.deadletters import (
    DeadLetter,
    DeadLetterError,
    JsonLinesDeadLetters,
    KinesisDeadLetters,
    record_from_envelope,
)
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

BIG = b"poison " + b"\xff" * 800_000  # not JSON; 1.07 MB in base64: over Kinesis' 1 MiB per record


def make_config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="oversized", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        scheme=JsonScheme(), retry_limit=0, message_timeout_s=None, dead_letter_deadline_s=1.0)
    options.update(overrides)
    return SpoutConfig(**options)


def stream_docs(endpoint: KinesisEndpoint, stream: str) -> list[dict[str, Any]]:
    client = endpoint.client()
    out: list[dict[str, Any]] = []
    for shard in endpoint.shard_ids(stream):
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            reply = client.get_records(ShardIterator=iterator, Limit=1000)
            out += [json.loads(r["Data"]) for r in reply["Records"]]
            if not reply["Records"]:
                break
            iterator = reply.get("NextShardIterator")
    return out


def put_poison(endpoint: KinesisEndpoint, stream: str) -> tuple[list[tuple[str, str]], list[bytes]]:
    """Six poison records (not JSON), the second one 800 KB, between good records."""
    datas = [b'{"n": 0}', b"poison 1", BIG, b"poison 3", b'{"n": 4}', b"poison 5", b"poison 6", b"poison 7",
             b'{"n": 8}']
    return endpoint.put(stream, datas, [f"pk-{i}" for i in range(len(datas))]), datas


def run_until_checkpointed(config: SpoutConfig, store: MemoryCheckpointStore, last: str) -> None:
    """Ack every record until the shard's checkpoint reaches ``last``; fails at the first failed dead-letter write
    (an oversized letter that blocks the others fails every write)."""
    with KinesisSpout(config, store) as spout:
        def settled() -> bool:
            for tup in spout.next_batch(max_records=50, timeout_s=0.1):
                spout.ack(tup.message_id)
            return spout.dead_letter_failures > 0 or spout.metrics()[0].checkpoint == last

        assert wait_until(settled, 30), "the checkpoint never reached the last record"
        assert spout.dead_letter_failures == 0, f"a dead-letter write failed: {spout.dead_letter_errors}"
        assert spout.flush_checkpoints()


def read_at(endpoint: KinesisEndpoint, stream: str, shard_id: str, sequence_number: str) -> bytes:
    """The record at a position, as the stub tells a reader to fetch it."""
    client = endpoint.client()
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard_id, ShardIteratorType="AT_SEQUENCE_NUMBER",
                                         StartingSequenceNumber=sequence_number)["ShardIterator"]
    data: bytes = client.get_records(ShardIterator=iterator, Limit=1)["Records"][0]["Data"]
    return data


def test_an_oversized_dead_letter_goes_as_a_stub_and_blocks_neither_the_others_nor_the_checkpoint(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=1)
    dlq = kinesalite.create_stream(shards=1)
    placed, datas = put_poison(kinesalite, stream)
    store = MemoryCheckpointStore()
    run_until_checkpointed(make_config(kinesalite, stream, dead_letter=KinesisDeadLetters(dlq)), store,
                           placed[-1][1])
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
    docs = {doc["sequence_number"]: doc for doc in stream_docs(kinesalite, dlq)}
    poison = {seq: d for (_, seq), d in zip(placed, datas) if d.startswith(b"poison")}
    assert set(docs) == set(poison) and len(stream_docs(kinesalite, dlq)) == 6  # every letter, once
    for seq, data in poison.items():
        if data is not BIG:
            assert base64.b64decode(docs[seq]["data"]) == data
    stub = docs[placed[2][1]]
    assert "data" not in stub
    assert (stub["truncated"], stub["data_size"], stub["data_sha256"]) == (True, len(BIG),
                                                                            hashlib.sha256(BIG).hexdigest())
    assert (stub["stream"], stub["shard_id"], stub["partition_key"]) == (stream, placed[2][0], "pk-2")
    assert stub["full_letter"] is None
    assert stub["reason"].startswith("poison record:")
    with pytest.raises(ValueError, match="left out of this dead letter.*AT_SEQUENCE_NUMBER"):
        record_from_envelope(stub)
    # nothing is lost: the stub's position reads the record again, and its digest proves it is the same
    again = read_at(kinesalite, stub["stream"], stub["shard_id"], stub["sequence_number"])
    assert hashlib.sha256(again).hexdigest() == stub["data_sha256"]


def test_an_oversized_dead_letter_is_written_whole_to_the_fallback_file_before_its_stub(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    stream = kinesalite.create_stream(shards=1)
    dlq = kinesalite.create_stream(shards=1)
    placed, datas = put_poison(kinesalite, stream)
    path = tmp_path / "oversized.jsonl"
    fallback = JsonLinesDeadLetters(str(path))
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, dead_letter=KinesisDeadLetters(dlq, oversized=fallback))
    run_until_checkpointed(config, store, placed[-1][1])
    lines = path.read_bytes().splitlines()
    assert len(lines) == 1  # only the oversized letter, once
    _, record = record_from_envelope(lines[0])
    assert (record.data, record.sequence_number, record.partition_key) == (BIG, placed[2][1], "pk-2")
    docs = {doc["sequence_number"]: doc for doc in stream_docs(kinesalite, dlq)}
    assert len(docs) == 6 and docs[placed[2][1]]["full_letter"] == f"file {path}"


def letter(n: int, data: bytes) -> DeadLetter:
    seq = str(49_000_000_000_000_000_000 + n)
    record = Record("shardId-000000000000", seq, None, f"pk-{n}", data, None, SequenceKey.parse(seq, None))
    return DeadLetter(record, "poison record: test", 1, "source", "oversized", 1_780_000_000.0)


def test_a_failing_fallback_holds_only_the_oversized_letter_and_writes_it_once_when_it_works_again(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    dlq = kinesalite.create_stream(shards=1)
    folder = tmp_path / "big"
    folder.mkdir()
    path = folder / "oversized.jsonl"
    destination = KinesisDeadLetters(dlq, oversized=JsonLinesDeadLetters(str(path)))
    folder.rmdir()  # the fallback's folder went away: its writes fail
    writer = destination.open_writer(make_config(kinesalite, "source"))
    small1, big, small2 = letter(1, b"one"), letter(2, BIG), letter(3, b"three")
    try:
        with pytest.raises(DeadLetterError, match="could not be written whole to file") as raised:
            writer.write([small1, big, small2])
        assert raised.value.written == (small1, small2)
        assert [doc["partition_key"] for doc in stream_docs(kinesalite, dlq)] == ["pk-1", "pk-3"]
        folder.mkdir()
        writer.write([big])  # the dead-letter thread passes the letters not written again
    finally:
        writer.close()
    assert [record_from_envelope(line)[1].data for line in path.read_bytes().splitlines()] == [BIG]
    docs = stream_docs(kinesalite, dlq)
    assert [doc["partition_key"] for doc in docs] == ["pk-1", "pk-3", "pk-2"]
    assert docs[2]["truncated"] is True and docs[2]["full_letter"] == f"file {path}"


def test_an_oversized_letter_goes_to_the_fallback_once_while_its_stub_is_refused(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint, tmp_path: Path) -> None:
    proxy, through = fault_proxy
    dlq = kinesis_backend.create_stream(shards=1)
    path = tmp_path / "oversized.jsonl"
    writer = KinesisDeadLetters(dlq, put_attempts=1, oversized=JsonLinesDeadLetters(str(path))).open_writer(
        make_config(through, "source"))
    small, big = letter(1, b"one"), letter(2, BIG)
    proxy.refuse_records({1: "InternalFailure"})  # the stub's put
    try:
        with pytest.raises(DeadLetterError, match="InternalFailure") as raised:
            writer.write([small, big])
        assert raised.value.written == (small,)
        writer.write([big])
    finally:
        writer.close()
    assert len(path.read_bytes().splitlines()) == 1  # written whole once, though passed twice
    assert [doc["partition_key"] for doc in stream_docs(kinesis_backend, dlq)] == ["pk-1", "pk-2"]


@pytest.mark.parametrize(("count", "size", "calls"), [(501, 10, 2), (6, 700_000, 2)])
def test_letters_are_put_in_calls_of_at_most_500_records_and_5_mib(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint, count: int, size: int,
        calls: int) -> None:
    proxy, through = fault_proxy
    dlq = kinesis_backend.create_stream(shards=1)
    writer = KinesisDeadLetters(dlq).open_writer(make_config(through, "source"))
    try:
        writer.write([letter(i, bytes([i % 256]) * size) for i in range(count)])  # 6 x 934 KB envelopes: 5.6 MB
    finally:
        writer.close()
    assert proxy.calls["PutRecords"] == calls
    assert [doc["partition_key"] for doc in stream_docs(kinesis_backend, dlq)] == [f"pk-{i}" for i in range(count)]


def test_a_letter_oversized_by_its_reason_goes_as_a_stub_with_the_reason_cut_short(
        kinesalite: KinesisEndpoint) -> None:
    """A scheme whose error quotes the whole record makes the reason, not only the data, too large."""
    dlq = kinesalite.create_stream(shards=1)
    base = letter(1, b"x" * 10)
    huge = DeadLetter(base.record, "poison record: cannot decode " + "y" * 1_200_000, 1, "source", "oversized",
                      base.at)
    writer = KinesisDeadLetters(dlq).open_writer(make_config(kinesalite, "source"))
    try:
        writer.write([huge, letter(2, b"two")])
    finally:
        writer.close()
    stub, other = stream_docs(kinesalite, dlq)
    assert stub["truncated"] is True and stub["data_size"] == 10 and other["partition_key"] == "pk-2"
    assert stub["reason"].startswith("poison record: cannot decode yyy")
    assert stub["reason"].endswith("(1,200,029 characters in all)") and len(stub["reason"]) < 10_000
