"""Dead letters that lose nothing, on real servers: a record whose retries ran out (or that its scheme cannot decode)
is done only once its dead letter is written, into another Kinesis stream or a JSON Lines file; a destination that
is missing or throttled holds the checkpoint back until the write succeeds."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from kinesis_spout import InitialPosition, JsonScheme, KinesisSpout, MemoryCheckpointStore, SpoutConfig
from kinesis_spout.deadletters import DeadLetterError, JsonLinesDeadLetters, KinesisDeadLetters, record_from_envelope
from kinesis_spout.errors import ConfigError
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

GOOD = [json.dumps({"n": i}).encode() for i in range(12)]


def make_config(endpoint: KinesisEndpoint, stream: str, **overrides: Any) -> SpoutConfig:
    options: dict[str, Any] = dict(
        stream_name=stream, app_name="dead-letters", endpoint_url=endpoint.endpoint_url, region=endpoint.region,
        initial_position=InitialPosition.TRIM_HORIZON, empty_record_backoff_s=0.2, checkpoint_interval_s=0.0,
        scheme=JsonScheme(), retry_limit=1, message_timeout_s=None)
    options.update(overrides)
    return SpoutConfig(**options)


def read_stream(endpoint: KinesisEndpoint, stream: str) -> list[dict[str, Any]]:
    """Every record of a stream from its start, as (partition key, parsed JSON data)."""
    client = endpoint.client()
    out = []
    for shard in endpoint.shard_ids(stream):
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard,
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            reply = client.get_records(ShardIterator=iterator, Limit=1000)
            out += [{"partition_key": r["PartitionKey"], **json.loads(r["Data"])} for r in reply["Records"]]
            if not reply["Records"]:
                break
            iterator = reply.get("NextShardIterator")
    return out


def put_mixed(endpoint: KinesisEndpoint, stream: str) -> tuple[list[tuple[str, str]], dict[str, bytes]]:
    """GOOD records with a poison record (not JSON) and a record the consumer always fails among them. Returns what
    was placed and the dead letters expected: message id -> data."""
    datas = GOOD[:3] + [b"poison: not json"] + GOOD[3:6] + [b'{"fail": true}'] + GOOD[6:]
    keys = [f"pk-{i}" for i in range(len(datas))]
    placed = endpoint.put(stream, datas, keys)
    expected = {f"{s}:{q}": d for (s, q), d in zip(placed, datas) if d in (b"poison: not json", b'{"fail": true}')}
    return placed, expected


def consume(spout: KinesisSpout, until: Any, timeout_s: float = 30.0) -> list[Any]:
    """Take batches, fail records whose JSON has "fail", ack the others, until ``until(acked tuples)`` holds."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not until(got):
        for tup in spout.next_batch(max_records=50, timeout_s=0.2):
            if isinstance(tup.values[1], dict) and tup.values[1].get("fail"):
                spout.fail(tup.message_id)
            else:
                got.append(tup)
                spout.ack(tup.message_id)
    return got


def only_dead_letters_left(spout: KinesisSpout) -> bool:
    """Every record not done is a dead letter waiting for its write (no retry left to come)."""
    return all(m.inflight == m.dead_letters_pending for m in spout.metrics())


def test_dead_letters_arrive_in_the_dead_letter_stream_exactly_once_in_the_documented_envelope(
        kinesis_backend: KinesisEndpoint) -> None:
    stream = kinesis_backend.create_stream(shards=1)
    dlq = kinesis_backend.create_stream(shards=2)
    placed, expected = put_mixed(kinesis_backend, stream)
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream, dead_letter=KinesisDeadLetters(dlq))
    with KinesisSpout(config, store) as spout:
        got = consume(spout, lambda _: spout.metrics()[0].checkpoint == placed[-1][1])
        assert spout.flush_checkpoints()
        assert [m.dead_lettered for m in spout.metrics()] == [2]
    assert sorted(t.record.data for t in got) == sorted(GOOD)
    letters = read_stream(kinesis_backend, dlq)
    by_id = {f"{d['shard_id']}:{d['sequence_number']}": d for d in letters}
    assert len(letters) == len(by_id) == 2, letters  # exactly once each
    assert {mid: base64.b64decode(d["data"]) for mid, d in by_id.items()} == expected
    poison, failed = sorted(by_id.values(), key=lambda d: int(d["sequence_number"]))
    assert poison["reason"].startswith("poison record:") and poison["attempts"] == 1
    assert failed["reason"] == "failed on attempt 2 of 2" and failed["attempts"] == 2
    for doc, index in ((poison, 3), (failed, 7)):
        assert doc["partition_key"] == f"pk-{index}" == doc["partition_key"]
        assert (doc["version"], doc["stream"], doc["app"], doc["sub_sequence_number"]) == (1, stream, "dead-letters",
                                                                                          None)
        assert doc["sequence_number"] == placed[index][1]
        assert record_from_envelope(doc)[1].data == datas_of(placed, expected)[index]
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]


def datas_of(placed: list[tuple[str, str]], expected: dict[str, bytes]) -> dict[int, bytes]:
    return {i: expected[f"{s}:{q}"] for i, (s, q) in enumerate(placed) if f"{s}:{q}" in expected}


def test_a_missing_dead_letter_stream_holds_the_checkpoint_raises_after_the_deadline_and_loses_nothing(
        kinesis_backend: KinesisEndpoint) -> None:
    """The dead-letter stream does not exist: the shard's checkpoint stops before the poison record, the failure is
    counted and logged, next_batch raises DeadLetterError after dead_letter_deadline_s; once the stream exists the
    letters go in (once each), the error clears and the checkpoint reaches the end."""
    stream = kinesis_backend.create_stream(shards=1)
    dlq = kinesis_backend.unique_stream_name("dlq")
    placed, expected = put_mixed(kinesis_backend, stream)
    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream, dead_letter=KinesisDeadLetters(dlq), dead_letter_deadline_s=1.0)
    with KinesisSpout(config, store) as spout:
        got = consume(spout, lambda got: len(got) == len(GOOD) and only_dead_letters_left(spout))
        assert sorted(t.record.data for t in got) == sorted(GOOD)
        assert not spout.flush_checkpoints(timeout_s=0.5)  # the dead letters are not written
        assert store.load(placed[0][0]).sequence_number == placed[2][1]  # type: ignore[union-attr]
        shard = spout.metrics()[0]
        assert (shard.dead_letters_pending, shard.inflight, shard.dead_lettered) == (2, 2, 0)
        # the first write fails once the thread gets to it (a loaded machine may not have run it yet)
        assert wait_until(lambda: spout.dead_letter_failures >= 1
                          and "ResourceNotFound" in str(spout.dead_letter_errors), 30), spout.dead_letter_errors
        with pytest.raises(DeadLetterError, match="dead_letter_deadline_s=1"):
            wait_until(lambda: spout.next_batch(max_records=10, timeout_s=0.1) and False, 10)
        kinesis_backend.create_stream(name=dlq, shards=1)
        assert wait_until(lambda: spout.metrics()[0].dead_letters_pending == 0, 20)
        assert spout.next_batch(max_records=10, timeout_s=0.1) == []  # the error cleared
        assert spout.flush_checkpoints()
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
    letters = read_stream(kinesis_backend, dlq)
    assert sorted(f"{d['shard_id']}:{d['sequence_number']}" for d in letters) == sorted(expected)


def test_a_throttled_dead_letter_stream_holds_the_checkpoint_and_loses_nothing(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint]) -> None:
    proxy, through = fault_proxy
    stream = through.create_stream(shards=1)
    dlq = through.create_stream(shards=1)
    placed, expected = put_mixed(through, stream)
    proxy.inject("PutRecords", "ProvisionedThroughputExceededException", times=4)
    store = MemoryCheckpointStore()
    config = make_config(through, stream, dead_letter=KinesisDeadLetters(dlq, put_attempts=1))
    checkpoints = []
    with KinesisSpout(config, store) as spout:
        consume(spout, lambda got: len(got) == len(GOOD) and only_dead_letters_left(spout))
        while proxy.pending():
            checkpoints.append(store.load(placed[0][0]))
            assert spout.next_batch(max_records=10, timeout_s=0.05) == []
        assert spout.flush_checkpoints()
        assert spout.dead_letter_failures >= 1
    assert proxy.injected["PutRecords:ProvisionedThroughputExceededException"] == 4
    seen = {int(c.sequence_number) for c in checkpoints if c is not None}
    assert seen and max(seen) < int(placed[3][1]), "the checkpoint passed the poison record before it was written"
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
    letters = read_stream(through, dlq)
    assert sorted(f"{d['shard_id']}:{d['sequence_number']}" for d in letters) == sorted(expected)


def test_dead_letters_go_to_a_json_lines_file_once_each_after_a_torn_last_line(
        kinesalite: KinesisEndpoint, tmp_path: Path) -> None:
    path = tmp_path / "dead.jsonl"
    path.write_bytes(b'{"version": 1, "cut sh')  # what a crash in the middle of a write leaves behind
    stream = kinesalite.create_stream(shards=1)
    placed, expected = put_mixed(kinesalite, stream)
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream, dead_letter=JsonLinesDeadLetters(str(path))), store) as spout:
        consume(spout, lambda _: spout.metrics()[0].checkpoint == placed[-1][1])
    lines = path.read_bytes().split(b"\n")
    assert lines[0] == b'{"version": 1, "cut sh' and lines[-1] == b""
    records = [record_from_envelope(line)[1] for line in lines[1:-1]]
    assert {r.message_id: r.data for r in records} == expected and len(records) == 2


def test_destinations_refuse_bad_settings_with_clear_errors(moto_kinesis: KinesisEndpoint, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist; create it first"):
        JsonLinesDeadLetters(str(tmp_path / "missing" / "dead.jsonl"))
    with pytest.raises(ConfigError, match="put_attempts"):
        KinesisDeadLetters("dlq", put_attempts=0)
    stream = moto_kinesis.create_stream()
    with pytest.raises(ConfigError, match="is the stream the spout reads"):
        KinesisSpout(make_config(moto_kinesis, stream, dead_letter=KinesisDeadLetters(stream)),
                     MemoryCheckpointStore()).open()


def test_a_handler_that_raises_is_retried_and_its_record_is_done_only_once_it_returns(
        kinesis_backend: KinesisEndpoint) -> None:
    """The path that used to lose records: a plain handler that raises. The checkpoint waits before the poison record,
    next_batch raises DeadLetterError after the deadline (taken tuples are never lost), and once the handler returns
    the record is done and the checkpoint moves on."""
    stream = kinesis_backend.create_stream(shards=1)
    placed = kinesis_backend.put(stream, [b'{"n": 1}', b'{"n": 2}', b"not json", b'{"n": 4}'])
    calls: list[str] = []
    down = [True]

    def handler(record: Any, reason: str) -> None:
        calls.append(record.message_id)
        if down[0]:
            raise RuntimeError("the dead-letter destination is down")

    store = MemoryCheckpointStore()
    config = make_config(kinesis_backend, stream, dead_letter=handler, dead_letter_deadline_s=1.0)
    with KinesisSpout(config, store) as spout:
        got = consume(spout, lambda got: len(got) == 3 and only_dead_letters_left(spout))
        assert [t.values[1] for t in got] == [{"n": 1}, {"n": 2}, {"n": 4}]
        assert wait_until(lambda: len(calls) >= 2, 10)
        spout.flush_checkpoints(timeout_s=0.2)
        assert store.load(placed[0][0]).sequence_number == placed[1][1]  # type: ignore[union-attr]
        with pytest.raises(DeadLetterError, match="the dead-letter destination is down") as raised:
            wait_until(lambda: spout.next_batch(max_records=10, timeout_s=0.1) and False, 15)
        assert isinstance(raised.value.__cause__, DeadLetterError)  # the handler's error, wrapped
        down[0] = False
        assert spout.flush_checkpoints(timeout_s=15)
        assert spout.next_tuple() is None  # the error cleared
    assert set(calls) == {f"{placed[2][0]}:{placed[2][1]}"} and len(calls) >= 3
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]


def test_the_envelope_keeps_everything_needed_to_replay_a_kpl_user_record() -> None:
    from datetime import datetime, timezone

    from kinesis_spout.deadletters import DeadLetter, envelope, envelope_bytes
    from kinesis_spout.records import Record, SequenceKey

    seq = "49590338271490256608559692538361571095921575989136588898"
    record = Record("shardId-000000000003", seq, 7, "user-7", bytes(range(256)),
                    datetime(2026, 5, 1, 12, 0, 0, 250000, tzinfo=timezone.utc), SequenceKey.parse(seq, 7), 10)
    letter = DeadLetter(record, "failed on attempt 4 of 4", 4, "orders", "billing", 1_780_000_000.5)
    doc = envelope(letter)
    assert doc == {
        "version": 1, "reason": "failed on attempt 4 of 4", "attempts": 4, "app": "billing", "stream": "orders",
        "shard_id": "shardId-000000000003", "sequence_number": seq, "sub_sequence_number": 7,
        "partition_key": "user-7", "approximate_arrival_timestamp": "2026-05-01T12:00:00.250000+00:00",
        "dead_lettered_at": "2026-05-28T20:26:40.500000+00:00", "data": base64.b64encode(bytes(range(256))).decode()}
    assert b"\n" not in envelope_bytes(letter)
    stream, back = record_from_envelope(envelope_bytes(letter))
    assert stream == "orders"
    assert (back.message_id, back.data, back.partition_key, back.approximate_arrival_timestamp) == (
        record.message_id, record.data, record.partition_key, record.approximate_arrival_timestamp)
    with pytest.raises(ValueError, match="lacks the field 'data'"):
        record_from_envelope({k: v for k, v in doc.items() if k != "data"})


def test_the_dead_letter_thread_touches_trackers_only_under_the_spout_lock_and_calls_handlers_outside_it(
        moto_kinesis: KinesisEndpoint) -> None:
    import threading

    stream = moto_kinesis.create_stream(shards=2)
    placed, expected = put_mixed(moto_kinesis, stream)
    violations: list[str] = []
    handler_threads: list[tuple[str, bool]] = []
    spout_box: list[KinesisSpout] = []

    def handler(record: Any, reason: str) -> None:
        # another thread can use the spout while a handler runs: the handler does not hold the spout's lock
        probe = threading.Thread(target=spout_box[0].metrics, daemon=True)
        probe.start()
        probe.join(5.0)
        handler_threads.append((threading.current_thread().name, probe.is_alive()))

    class LockChecking:
        def __init__(self, tracker: Any, lock: Any) -> None:
            self._tracker, self._lock = tracker, lock

        def __getattr__(self, name: str) -> Any:
            if not self._lock._is_owned():
                violations.append(f"{name} from {threading.current_thread().name}")
            return getattr(self._tracker, name)

    with KinesisSpout(make_config(moto_kinesis, stream, dead_letter=handler), MemoryCheckpointStore()) as spout:
        spout_box.append(spout)
        for state in spout._shards.values():
            state.tracker = LockChecking(state.tracker, spout._lock)  # type: ignore[assignment]
        consume(spout, lambda got: len(got) == len(GOOD) and only_dead_letters_left(spout))
        assert spout.flush_checkpoints()
    assert not violations, violations[:5]
    assert handler_threads == [("kinesis-dead-letters", False)] * 2
