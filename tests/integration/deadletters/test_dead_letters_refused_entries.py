"""Dead letters into Kinesis when PutRecords refuses some entries (``ErrorCode`` in their result entries): an entry
refused again on a retry, with another code, is not written, and is put again until it is; the entries accepted are
never put twice. The fault proxy answers chosen entries of chosen calls with refusals, in front of moto and
kinesalite."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.deadletters import DeadLetter, DeadLetterError, KinesisDeadLetters
from kinesis_spout.records import Record, SequenceKey
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

PTEE = "ProvisionedThroughputExceededException"


def config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="refused", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        scheme=JsonScheme(), retry_limit=0, message_timeout_s=None)
    return SpoutConfig(**{**options, **overrides})


def letter(n: int) -> DeadLetter:
    seq = str(49_000_000_000_000_000_000 + n)
    record = Record("shardId-000000000000", seq, None, f"pk-{n}", b"letter %d" % n, None,
                    SequenceKey.parse(seq, None))
    return DeadLetter(record, "poison record: test", 1, "source", "refused", 1_780_000_000.0)


def letters_in(endpoint: KinesisEndpoint, stream: str) -> list[str]:
    """The partition keys of the dead letters in a stream, in order (the stream has one shard)."""
    client = endpoint.client()
    iterator = client.get_shard_iterator(StreamName=stream, ShardId=endpoint.shard_ids(stream)[0],
                                         ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return [json.loads(r["Data"])["partition_key"] for r in client.get_records(ShardIterator=iterator)["Records"]]


def test_an_entry_refused_with_internal_failure_on_its_retry_is_put_again_not_counted_written(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    dlq = kinesis_backend.create_stream(shards=1)
    writer = KinesisDeadLetters(dlq, put_attempts=3).open_writer(config(through, "source"))
    # the first call refuses the second letter (throttled); its retry, sent alone, is refused again otherwise
    proxy.refuse_records({1: PTEE}, {0: "InternalFailure"})
    try:
        writer.write([letter(0), letter(1), letter(2)])
    finally:
        writer.close()
    assert letters_in(kinesis_backend, dlq) == ["pk-0", "pk-2", "pk-1"]  # each once, the refused one last
    assert proxy.injected == {f"PutRecords:{PTEE}": 1, "PutRecords:InternalFailure": 1}
    assert proxy.calls["PutRecords"] == 3


def test_an_entry_still_refused_when_the_attempts_ran_out_is_not_reported_written(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    dlq = kinesis_backend.create_stream(shards=1)
    writer = KinesisDeadLetters(dlq, put_attempts=2).open_writer(config(through, "source"))
    letters = [letter(0), letter(1), letter(2)]
    proxy.refuse_records({1: PTEE}, {0: "InternalFailure"})
    try:
        with pytest.raises(DeadLetterError, match=r"refused 1 dead letters 2 times \(InternalFailure\)") as raised:
            writer.write(letters)
        assert raised.value.written == (letters[0], letters[2])
        writer.write([letters[1]])  # the dead-letter thread passes the letter not written again
    finally:
        writer.close()
    assert letters_in(kinesis_backend, dlq) == ["pk-0", "pk-2", "pk-1"]


def test_a_spout_dead_letter_refused_on_every_retry_kind_arrives_once_before_the_checkpoint_passes_it(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    """One poison record: its put is throttled, then refused with InternalFailure on the writer's retry (the write
    fails), then on the dead-letter thread's next write, then accepted. The checkpoint reaches the end only once the
    letter is in the stream."""
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream(shards=1)
    dlq = kinesis_backend.create_stream(shards=1)
    placed = kinesis_backend.put(stream, [b'{"n": 0}', b"poison", b'{"n": 2}'], ["pk-0", "pk-1", "pk-2"])
    proxy.refuse_records({0: PTEE}, {0: "InternalFailure"}, {0: "InternalFailure"})
    store = MemoryCheckpointStore()
    cfg = config(through, stream, dead_letter=KinesisDeadLetters(dlq, put_attempts=2))
    with KinesisSpout(cfg, store) as spout:
        def done() -> bool:
            for tup in spout.next_batch(max_records=10, timeout_s=0.1):
                spout.ack(tup.message_id)
            return spout.metrics()[0].checkpoint == placed[-1][1]

        assert wait_until(done, 20), "the checkpoint never reached the last record"
        assert letters_in(kinesis_backend, dlq) == ["pk-1"]  # once: neither lost nor put twice
        assert spout.dead_letter_failures == 1
    assert proxy.pending() == 0
    assert letters_in(kinesis_backend, dlq) == ["pk-1"]
