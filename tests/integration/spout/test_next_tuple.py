"""The spout one tuple at a time (``next_tuple``) and in batches (``next_batch``), on kinesalite (real sequence
numbers) through the fixture: failed records come again after their backoff and hold the checkpoint back; failed,
timed-out and refused records reach the dead-letter handler with their reason; a handler or store that keeps failing
is an error of the next call until it works again; conflicts go to the user's handler; checkpoints inside KPL
aggregates; batch and in-flight limits; LATEST is the tip when open returns; closed shards end once and their
children are read; idle shards are polled less often."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from kinesis_spout import InitialPosition, KinesisSpout, MemoryCheckpointStore, RetryBackoff
from kinesis_spout.checkpoint.base import Checkpoint
from kinesis_spout.deadletters import DeadLetterError
from kinesis_spout.errors import (
    CheckpointConflict,
    CheckpointError,
)
from kinesis_spout.records import SpoutTuple
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint, wait_for_stream
from kinesis_spout.testing.process import wait_until

from .support import TIMEOUT_S, make_config, next_tuple, put_into_shards


def test_next_tuple_emits_a_failed_record_again_and_the_checkpoint_waits_for_it(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(5)], ["pk"] * 5)
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        first = [next_tuple(spout) for _ in range(5)]
        assert [(t.record.sequence_number, t.attempt) for t in first] == [(seq, 1) for _, seq in placed]
        for tup in first:
            if tup.record.data != b"r1":
                spout.ack(tup.message_id)
            else:
                spout.fail(tup.message_id)
        again = next_tuple(spout)
        assert (again.message_id, again.attempt, again.record.data) == (first[1].message_id, 2, b"r1")
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[0][1]  # type: ignore[union-attr]
        spout.ack(again.message_id)
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
        assert spout.next_tuple() is None


def test_an_empty_closed_shard_is_finished_once_with_no_sequence_number_and_its_children_are_read(
        kinesalite: KinesisEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kinesis_spout")
    client = kinesalite.client()
    stream = kinesalite.create_stream()
    parent = kinesalite.shard_ids(stream)[0]
    client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
    wait_for_stream(client, stream)
    placed = kinesalite.put(stream, [f"child-{i}".encode() for i in range(6)])
    assert parent not in {shard for shard, _ in placed}
    store = MemoryCheckpointStore()
    # a long sync interval: the children are read once the parent finishes, not at the next round of the sync
    with KinesisSpout(make_config(kinesalite, stream, shard_sync_interval_s=60.0), store) as spout:
        got: list[SpoutTuple] = []

        def read_and_ack() -> bool:
            tup = spout.next_tuple()  # keeps the spout's housekeeping going after the parent finished
            if tup is not None:
                got.append(tup)
                spout.ack(tup.message_id)
            return len(got) == 6

        assert wait_until(read_and_ack, TIMEOUT_S, interval_s=0.01), f"read {len(got)} of 6"
        assert spout.flush_checkpoints()
        finished = {m.shard_id: m.finished for m in spout.metrics()}
    assert finished[parent] is True
    stored = store.load(parent)
    assert stored is not None and stored.shard_end is True and stored.sequence_number is None
    assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in placed)
    children = sorted({shard for shard, _ in placed})
    opened = [r.getMessage() for r in caplog.records if "opened stream" in r.getMessage()]
    assert len(opened) == 1 and opened[0].endswith(
        "; waiting for their parents: " + ", ".join(f"{child} (after {parent})" for child in children)), opened
    with KinesisSpout(make_config(kinesalite, stream), store) as again:  # the parent is done: not read again
        assert sorted(again.shard_ids) == children
        assert again.next_batch(max_records=10, timeout_s=0.5) == []


def test_failed_and_timed_out_records_reach_the_dead_letter_handler_with_their_reason_and_unknown_ids_are_counted(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(3)], ["pk"] * 3)
    dead: list[tuple[str, str]] = []
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, retry_limit=0, message_timeout_s=0.3,
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    with KinesisSpout(config, store) as spout:
        first = [next_tuple(spout) for _ in range(3)]
        spout.ack(first[0].message_id)
        spout.fail(first[1].message_id)
        assert wait_until(lambda: len(dead) == 1, TIMEOUT_S)  # written on the dead-letter thread
        assert dead == [(first[1].message_id, "failed on attempt 1 of 1")]
        assert wait_until(lambda: spout.next_tuple() is None and len(dead) == 2, TIMEOUT_S), dead
        assert dead[1] == (first[2].message_id, "timed out on attempt 1 of 1")
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]
        spout.ack("not a message id")
        spout.ack(f"shardId-000000000099:{placed[0][1]}")
        spout.fail("not a message id either")
        assert spout.unknown_message_ids == 3


def test_a_retry_waits_its_backoff_and_comes_back_with_the_scheme_s_values(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    kinesalite.put(stream, [b"only"], ["pk"])
    config = make_config(kinesalite, stream, retry_limit=3,
                         retry_backoff=RetryBackoff(initial_s=0.3, multiplier=2.0, max_s=1.0))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = next_tuple(spout)
        assert first.attempt == 1 and first.values is not None
        spout.fail(first.message_id)
        assert spout.next_tuple() is None  # not due yet
        again = next_tuple(spout)
        assert (again.message_id, again.attempt, again.values) == (first.message_id, 2, first.values)
        spout.ack(again.message_id)


# -- lifecycle: what a spout says when it is used out of order ---------------------------------------------------


# -- metrics: every figure of a shard, exactly --------------------------------------------------------------------


# -- KPL aggregates: a checkpoint inside an aggregate -------------------------------------------------------------


def test_a_checkpoint_inside_an_aggregate_names_its_user_record_until_the_aggregate_is_done(
        kinesalite: KinesisEndpoint) -> None:
    from ..support import aggregate

    stream = kinesalite.create_stream()
    users = [(f"user-{i}", f"event {i}".encode()) for i in range(3)]
    placed = kinesalite.put(stream, [data for _, data in (aggregate(users), ("plain", b"plain"), aggregate(users))],
                            ["agg-1", "plain", "agg-2"])
    shard, (s0, s1, s2) = placed[0][0], [seq for _, seq in placed]
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream)
    with KinesisSpout(config, store) as spout:
        got = [next_tuple(spout) for _ in range(7)]
        assert [(t.record.sequence_number, t.record.sub_sequence_number) for t in got] == \
            [(s0, 0), (s0, 1), (s0, 2), (s1, None), (s2, 0), (s2, 1), (s2, 2)]
        seen = []
        for tup in got[:5]:
            spout.ack(tup.message_id)
            assert spout.flush_checkpoints()
            stored = store.load(shard)
            assert stored is not None
            seen.append((stored.sequence_number, stored.sub_sequence_number, spout.metrics()[0].checkpoint))
        assert seen == [(s0, 0, f"{s0}:0"), (s0, 1, f"{s0}:1"), (s0, None, s0), (s1, None, s1),
                        (s2, 0, f"{s2}:0")]
    with KinesisSpout(config, store) as again:  # resumes after user record 0 of the second aggregate
        rest = [next_tuple(again) for _ in range(2)]
        assert [(t.record.sequence_number, t.record.sub_sequence_number) for t in rest] == [(s2, 1), (s2, 2)]
        assert again.next_batch(max_records=10, timeout_s=0.5) == []


# -- dead letters: what a destination receives, and a destination that keeps failing -----------------------------


def test_a_dead_letter_envelope_carries_the_reason_attempts_stream_app_and_time(
        kinesalite: KinesisEndpoint, tmp_path: Any) -> None:
    from kinesis_spout import JsonLinesDeadLetters

    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"doomed"], ["pk"])
    path = tmp_path / "dead.jsonl"
    config = make_config(kinesalite, stream, retry_limit=2, app_name="envelope-app",
                         dead_letter=JsonLinesDeadLetters(str(path)))
    started = time.time()
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        for attempt in (1, 2, 3):
            tup = next_tuple(spout)
            assert tup.attempt == attempt
            spout.fail(tup.message_id)
        assert spout.flush_checkpoints()
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    letter = json.loads(lines[0])
    assert (letter["reason"], letter["attempts"], letter["stream"], letter["app"]) == \
        ("failed on attempt 3 of 3", 3, stream, "envelope-app")
    assert (letter["shard_id"], letter["sequence_number"]) == placed[0]
    at = datetime.fromisoformat(letter["dead_lettered_at"]).timestamp()
    assert started - 1 <= at <= time.time() + 1


def test_a_dead_letter_handler_that_keeps_failing_is_an_error_of_next_tuple_until_it_works_again(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"a", b"b"], ["pk"] * 2)
    working = threading.Event()
    written: list[str] = []

    def handler(record: Any, reason: str) -> None:
        if not working.is_set():
            raise OSError("the dead-letter queue is down")
        written.append(record.message_id)

    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, retry_limit=0, dead_letter=handler, dead_letter_deadline_s=1.0)
    with KinesisSpout(config, store) as spout:
        first, second = next_tuple(spout), next_tuple(spout)
        spout.fail(first.message_id)
        spout.ack(second.message_id)

        def raises() -> bool:
            try:
                spout.next_tuple()
            except DeadLetterError:
                return True
            return False

        assert wait_until(raises, TIMEOUT_S), "the failing dead-letter handler was never reported"
        assert spout.dead_letter_failures >= 1 and "the dead-letter queue is down" in str(spout.dead_letter_errors)
        assert spout.flush_checkpoints(0.5) is False, "a dead letter is still unwritten"
        assert store.load(placed[0][0]) is None, "the checkpoint moved past a record whose dead letter is unwritten"
        working.set()
        assert wait_until(lambda: written == [first.message_id], TIMEOUT_S)
        assert wait_until(lambda: spout.next_tuple() is None, TIMEOUT_S), "the error did not clear"
        assert spout.flush_checkpoints()
        assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]


class FailingSaves(MemoryCheckpointStore):
    """A memory store whose saves fail (retriable) while ``failing`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = threading.Event()

    def save(self, checkpoint: Any, *, force: bool = False) -> None:
        if self.failing.is_set():
            raise CheckpointError("injected: the store is down", retriable=True)
        super().save(checkpoint, force=force)


def test_a_store_that_keeps_failing_is_an_error_of_next_tuple_until_a_write_succeeds(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"a", b"b"], ["pk"] * 2)
    store = FailingSaves()
    store.failing.set()
    config = make_config(kinesalite, stream, zookeeper_deadline_s=1.0)
    with KinesisSpout(config, store) as spout:
        first, second = next_tuple(spout), next_tuple(spout)
        spout.ack(first.message_id)

        def raises() -> bool:
            try:
                assert spout.next_tuple() is None  # both records are in flight
            except CheckpointError as exc:
                return "could not be written" in str(exc)
            return False

        assert wait_until(raises, TIMEOUT_S), "the failing store was never reported"
        assert spout.checkpoint_write_failures >= 1
        assert spout.flush_checkpoints(0.5) is False, "a checkpoint is still unwritten"
        assert "injected: the store is down" in str(spout.checkpoint_errors)
        store.failing.clear()
        assert wait_until(lambda: store.load(placed[0][0]) is not None, TIMEOUT_S), "never written after the outage"
        assert spout.next_tuple() is None  # no error any more
        spout.ack(second.message_id)
        assert spout.flush_checkpoints()
    assert store.load(placed[0][0]).sequence_number == placed[1][1]  # type: ignore[union-attr]


def test_a_checkpoint_behind_the_stored_one_is_a_conflict_passed_to_the_user_s_handler(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"a", b"b"], ["pk"] * 2)
    shard = placed[0][0]
    store = MemoryCheckpointStore()
    conflicts: list[CheckpointConflict] = []
    with KinesisSpout(make_config(kinesalite, stream), store, on_checkpoint_conflict=conflicts.append) as spout:
        first = next_tuple(spout)
        store.save(Checkpoint(shard, placed[1][1]).stamped("another-worker"))  # someone moved it past ours
        spout.ack(first.message_id)
        assert wait_until(lambda: len(conflicts) == 1, TIMEOUT_S), "the handler never heard of the conflict"
        assert spout.checkpoint_conflicts == 1 and spout.checkpoint_errors is conflicts[0]
        assert shard in str(conflicts[0])
    assert store.load(shard).sequence_number == placed[1][1]  # type: ignore[union-attr]


# -- limits: batch size and bytes, records and bytes in flight ----------------------------------------------------


def ten_byte_records(endpoint: KinesisEndpoint, count: int) -> tuple[str, list[tuple[str, str]]]:
    """A stream of ``count`` records of exactly 10 bytes each (8 of data, a 2-byte partition key)."""
    stream = endpoint.create_stream()
    return stream, endpoint.put(stream, [f"r{i:07d}".encode() for i in range(count)], ["pk"] * count)


def test_next_batch_takes_at_most_max_records_500_by_default_and_stops_once_its_bytes_reach_max_bytes(
        kinesalite: KinesisEndpoint) -> None:
    stream, placed = ten_byte_records(kinesalite, 600)
    with KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()) as spout:
        assert wait_until(lambda: spout.metrics()[0].buffered == 600, TIMEOUT_S), "the records were never read"
        batches = [spout.next_batch(), spout.next_batch(max_records=0), spout.next_batch(max_records=1),
                   spout.next_batch(max_records=100, max_bytes=20), spout.next_batch(max_records=100, max_bytes=21)]
        assert [len(b) for b in batches] == [500, 0, 1, 2, 3]
        assert all(t.record.size == 10 for b in batches for t in b)
        spout.ack_many(t.message_id for b in batches for t in b)
        assert [t.record.sequence_number for b in batches for t in b] == [seq for _, seq in placed[:506]]


def test_in_flight_limits_of_records_and_of_bytes_hold_back_new_records_until_acks(
        kinesalite: KinesisEndpoint) -> None:
    stream, placed = ten_byte_records(kinesalite, 6)
    for limits, held in (({"max_inflight_records": 2}, 2), ({"max_inflight_bytes": 20}, 2),
                         ({"max_inflight_bytes": 21}, 3)):
        with KinesisSpout(make_config(kinesalite, stream, **limits), MemoryCheckpointStore()) as spout:
            assert wait_until(lambda: spout.metrics()[0].buffered == 6, TIMEOUT_S)
            first = spout.next_batch(max_records=10, timeout_s=0.2)
            assert len(first) == held, f"{limits}: {len(first)} in flight"
            assert spout.next_batch(max_records=10, timeout_s=0.2) == []
            spout.ack_many(t.message_id for t in first)
            more = spout.next_batch(max_records=10, timeout_s=2.0)
            assert len(more) == min(held, 6 - held), f"{limits}: then {len(more)}"


def test_a_retry_comes_back_as_soon_as_its_backoff_is_up_not_at_the_end_of_the_batch_wait(
        kinesalite: KinesisEndpoint) -> None:
    stream, _ = ten_byte_records(kinesalite, 1)
    config = make_config(kinesalite, stream, retry_backoff=RetryBackoff(initial_s=0.3, multiplier=1.0, max_s=0.3))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = next_tuple(spout)
        spout.fail(first.message_id)
        started = time.monotonic()
        again = spout.next_batch(max_records=10, timeout_s=10.0)
        waited = time.monotonic() - started
        assert [(t.message_id, t.attempt) for t in again] == [(first.message_id, 2)]
        assert waited < 5.0, f"the retry due after 0.3 s came after {waited:.1f} s"
        spout.ack(first.message_id)


def test_a_zero_backoff_emits_a_failed_record_again_at_once(kinesalite: KinesisEndpoint) -> None:
    stream, _ = ten_byte_records(kinesalite, 1)
    config = make_config(kinesalite, stream, retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = next_tuple(spout)
        spout.fail(first.message_id)
        again = spout.next_tuple()
        assert again is not None and (again.message_id, again.attempt) == (first.message_id, 2)
        spout.ack(again.message_id)


# -- how the spout reads: the options that reach each shard's reader ----------------------------------------------


def test_the_shards_readers_share_reader_threads_threads_and_make_calls_of_max_records_per_call(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(10)], [f"key-{i}" for i in range(10)])
    before = set(threading.enumerate())
    config = make_config(kinesalite, stream, reader_threads=1, max_records_per_call=2, empty_record_backoff_s=5.0)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        got = [next_tuple(spout) for _ in range(10)]
        names = sorted(t.name for t in set(threading.enumerate()) - before if t.name.startswith("kinesis-reader"))
        assert names == ["kinesis-readers-0"], names
        calls = {m.shard_id: (m.records_read, m.getrecords_calls) for m in spout.metrics()}
        spout.ack_many(t.message_id for t in got)
    per_shard = {shard: sum(1 for s, _ in placed if s == shard) for shard, _ in placed}
    for shard, (read, made) in calls.items():
        assert read == per_shard[shard] and made >= -(-read // 2), f"{shard}: {read} records in {made} calls"


def test_an_idle_shard_is_polled_less_often_up_to_max_empty_record_backoff(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    config = make_config(kinesalite, stream, empty_record_backoff_s=0.2, max_empty_record_backoff_s=3.2)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        time.sleep(1.5)  # calls at about 0, 0.2, 0.6 and 1.4 s; at a steady 0.2 s there would be 8
        calls = spout.metrics()[0].getrecords_calls
    assert 1 <= calls <= 5, f"{calls} calls in 1.5 s"


def test_latest_starts_at_the_tip_when_open_returns_and_deaggregate_false_delivers_aggregates_whole(
        kinesalite: KinesisEndpoint) -> None:
    from ..support import aggregate

    stream = kinesalite.create_stream()
    kinesalite.put(stream, [b"old"], ["pk"])
    blob_key, blob = aggregate([("u1", b"one"), ("u2", b"two")])
    config = make_config(kinesalite, stream, initial_position=InitialPosition.LATEST, deaggregate=False)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        placed = kinesalite.put(stream, [b"new", blob], ["pk", blob_key])  # right after open() returned
        got = [next_tuple(spout) for _ in range(2)]
        assert [(t.record.sequence_number, t.record.sub_sequence_number) for t in got] == \
            [(seq, None) for _, seq in placed]
        assert [t.record.data for t in got] == [b"new", blob]
        spout.ack_many(t.message_id for t in got)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == []


def test_latest_is_the_tip_when_open_returns_also_when_the_iterator_is_slow_to_come(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    """open() waits for each LATEST iterator: a record put right after it returns is read, however late the
    reader's thread would have asked for the iterator itself."""
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    kinesis_backend.put(stream, [b"old"])
    proxy.delay("GetShardIterator", 2.0)
    with KinesisSpout(make_config(through, stream, initial_position=InitialPosition.LATEST),
                      MemoryCheckpointStore()) as spout:
        assert proxy.injected["GetShardIterator:Delayed"] == 1, "open() returned without asking for the iterator"
        placed = kinesis_backend.put(stream, [b"new"])  # within the 2 s a late iterator would have taken
        got = next_tuple(spout, 10.0)
        assert got.record.sequence_number == placed[0][1] and got.record.data == b"new"


def test_a_latest_iterator_throttled_at_open_is_taken_by_the_reader_when_it_can(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint,
        caplog: pytest.LogCaptureFixture) -> None:
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    shard = kinesis_backend.shard_ids(stream)[0]
    proxy.inject("GetShardIterator", "ProvisionedThroughputExceededException")
    with KinesisSpout(make_config(through, stream, initial_position=InitialPosition.LATEST),
                      MemoryCheckpointStore()) as spout:  # opens: a retriable error is no reason to fail
        assert any(r.getMessage().endswith(f"; the reader of {shard} takes its LATEST position when it can")
                   for r in caplog.records)
        assert wait_until(lambda: proxy.calls["GetRecords"] >= 1, TIMEOUT_S), "the reader never read"
        placed = kinesis_backend.put(stream, [b"new"])
        got = next_tuple(spout, 10.0)
        assert got.record.sequence_number == placed[0][1]


def test_children_of_a_shard_split_while_the_spout_runs_are_read_after_it(kinesalite: KinesisEndpoint) -> None:
    client = kinesalite.client()
    stream = kinesalite.create_stream()
    parent = kinesalite.shard_ids(stream)[0]
    before = kinesalite.put(stream, [b"before"], ["pk"])
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream, shard_sync_interval_s=0.2), store) as spout:
        first = next_tuple(spout)
        assert first.record.sequence_number == before[0][1]
        spout.ack(first.message_id)
        client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2 ** 127))
        wait_for_stream(client, stream)
        after = kinesalite.put(stream, [f"after-{i}".encode() for i in range(4)], [f"key-{i}" for i in range(4)])
        assert parent not in {shard for shard, _ in after}
        got = [next_tuple(spout) for _ in range(4)]
        spout.ack_many(t.message_id for t in got)
        assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in after)
        assert {m.shard_id: m.finished for m in spout.metrics()}[parent] is True


# -- acks, fails and retries across shards -------------------------------------------------------------------------


def test_ack_many_acks_every_known_id_around_unknown_ones_and_counts_those(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(3)], ["pk"] * 3)
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream), store) as spout:
        got = [next_tuple(spout) for _ in range(3)]
        spout.ack_many([got[0].message_id, "not an id", "shardId-000000000099:123", got[1].message_id,
                        "also not an id", got[2].message_id])
        assert spout.unknown_message_ids == 3
        assert spout.metrics()[0].inflight == 0 and spout.metrics()[0].acked == 3
        spout.fail_many(["bad", f"shardId-000000000098:{placed[0][1]}"])
        assert spout.unknown_message_ids == 5
        assert spout.flush_checkpoints()
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]


def test_due_retries_are_taken_from_the_shards_in_turn(kinesalite: KinesisEndpoint) -> None:
    stream, shards, seqs = put_into_shards(kinesalite, [2, 0, 2])
    config = make_config(kinesalite, stream, retry_limit=3,
                         retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        first = [next_tuple(spout) for _ in range(4)]
        spout.fail_many(t.message_id for t in first)
        again = [spout.next_tuple() for _ in range(4)]
        assert all(t is not None and t.attempt == 2 for t in again), again
        assert [t.record.shard_id for t in again if t is not None] == [shards[0], shards[2], shards[0], shards[2]]
        spout.ack_many(t.message_id for t in again if t is not None)
    assert sorted(seq for s in seqs for seq in s) == sorted(t.record.sequence_number for t in first)


class RefusesRetries:
    """A scheme that decodes each record the first time and refuses it after that (``ValueError`` for records whose
    data starts with ``v``, ``KeyError`` otherwise), as a scheme depending on something that went away would."""

    fields = ("data",)

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, record: Any) -> tuple[Any, ...]:
        if record.message_id in self.seen:
            if record.data.startswith(b"v"):
                raise ValueError(f"cannot decode {record.data.decode()} any more")
            raise KeyError("gone")
        self.seen.add(record.message_id)
        return (record.data,)


def test_a_retry_the_scheme_refuses_is_a_poison_record_dead_lettered_with_the_scheme_s_error(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [b"v1", b"k2", b"ok"], ["pk"] * 3)
    dead: list[tuple[str, str]] = []
    store = MemoryCheckpointStore()
    config = make_config(kinesalite, stream, scheme=RefusesRetries(), retry_limit=2,
                         retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0),
                         dead_letter=lambda record, reason: dead.append((record.message_id, reason)))
    with KinesisSpout(config, store) as spout:
        first = [next_tuple(spout) for _ in range(3)]
        spout.fail_many([first[0].message_id, first[1].message_id])
        spout.ack(first[2].message_id)
        assert spout.next_tuple() is None  # both retries refused by the scheme: dead-lettered, nothing emitted
        assert wait_until(lambda: len(dead) == 2, TIMEOUT_S)
        assert spout.poison_records == 2
        assert spout.flush_checkpoints()
    assert sorted(dead) == sorted([(first[0].message_id, "poison record: cannot decode v1 any more"),
                                   (first[1].message_id, "poison record: the scheme raised KeyError: 'gone'")])
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]


def test_unreliable_mode_acks_on_emit_and_moves_the_checkpoint_without_acks(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(3)], ["pk"] * 3)
    store = MemoryCheckpointStore()
    with KinesisSpout(make_config(kinesalite, stream, reliable=False), store) as spout:
        got = [next_tuple(spout) for _ in range(3)]
        assert [(t.attempt, t.values is not None) for t in got] == [(1, True)] * 3
        m = spout.metrics()[0]
        assert (m.inflight, m.acked, m.emitted) == (0, 3, 3)
        spout.fail(got[0].message_id)  # too late: nothing comes back
        assert spout.next_batch(max_records=10, timeout_s=0.3) == []
        assert spout.flush_checkpoints()
    assert store.load(placed[0][0]).sequence_number == placed[-1][1]  # type: ignore[union-attr]


def test_batch_limits_hold_across_the_chunks_of_several_shards_and_for_due_retries(
        kinesalite: KinesisEndpoint) -> None:
    stream, shards, _ = put_into_shards(kinesalite, [1, 4])  # records of 5 bytes: "i-j" and the key "pk"
    config = make_config(kinesalite, stream, retry_limit=5,
                         retry_backoff=RetryBackoff(initial_s=0.0, multiplier=1.0, max_s=0.0))
    for limits, count in (({"max_records": 3}, 3), ({"max_records": 100, "max_bytes": 8}, 2),
                          ({"max_records": 100, "max_bytes": 5}, 1)):
        with KinesisSpout(config, MemoryCheckpointStore()) as spout:
            assert wait_until(lambda: sum(m.buffered for m in spout.metrics()) == 5, TIMEOUT_S)
            batch = spout.next_batch(timeout_s=1.0, **limits)  # type: ignore[arg-type]
            assert [t.record.shard_id for t in batch] == [shards[0]] + [shards[1]] * (count - 1), limits
            rest = spout.next_batch(max_records=100, timeout_s=1.0)
            assert len(rest) == 5 - count
            spout.fail_many(t.message_id for t in batch + rest)  # all five due again at once
            retries = [spout.next_batch(max_records=2, timeout_s=1.0),
                       spout.next_batch(max_records=100, max_bytes=10, timeout_s=1.0)]
            assert [len(b) for b in retries] == [2, 2] and all(t.attempt == 2 for b in retries for t in b)
            spout.ack_many(t.message_id for t in batch + rest)


