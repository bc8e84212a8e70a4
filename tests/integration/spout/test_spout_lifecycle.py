"""The spout's life from open to close: calls before open or after close, open and close twice, a spout left open
and finalized, the client and region it reads through, the threads it starts and ends, and errors met while reading
(a deleted stream, an error after tuples were taken) that surface from the next call."""

from __future__ import annotations

import gc
import inspect
import sys
import threading
import time
import warnings
from typing import Any

import pytest

from kinesis_spout import KinesisSpout, MemoryCheckpointStore
from kinesis_spout.errors import (
    KinesisError,
    SpoutStateError,
    StreamNotFoundError,
)
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

from .support import TIMEOUT_S, make_config, next_tuple, put_into_shards


def test_a_spout_refuses_calls_before_open_and_after_close_and_open_and_close_are_idempotent(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    placed = kinesalite.put(stream, [f"r{i}".encode() for i in range(3)], ["pk"] * 3)
    with pytest.raises(TypeError, match="^config must be a SpoutConfig, got str$"):
        KinesisSpout("not a config")  # type: ignore[arg-type]
    spout = KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore())
    assert spout.shard_ids == [] and (spout.unknown_message_ids, spout.poison_records) == (0, 0)
    assert spout.flush_checkpoints(0.5) is True and spout.metrics() == []  # nothing read, nothing to write yet
    for call in (spout.next_tuple, lambda: spout.ack(f"{placed[0][0]}:{placed[0][1]}")):
        with pytest.raises(SpoutStateError) as raised:
            call()
        assert str(raised.value) == "spout is new: call open() (or use 'with KinesisSpout(...)') first"
    assert spout.open() is spout
    assert spout.open() is spout  # a second open changes nothing: one reader per shard, each record once
    got = [next_tuple(spout) for _ in range(3)]
    assert sorted(t.record.sequence_number for t in got) == sorted(seq for _, seq in placed)
    for tup in got:
        spout.ack(tup.message_id)
    assert spout.next_batch(max_records=10, timeout_s=0.5) == []
    spout.close()
    spout.close()  # idempotent
    for call in (spout.next_tuple, lambda: spout.fail(got[0].message_id)):
        with pytest.raises(SpoutStateError) as raised:
            call()
        assert str(raised.value) == "spout is closed"
    with pytest.raises(SpoutStateError) as raised:
        spout.open()
    assert str(raised.value) == "this spout was closed; create a new KinesisSpout to read again"


def test_a_spout_left_open_warns_when_it_is_finalized_and_a_closed_or_half_made_one_does_not(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    unraisable: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with pytest.raises(TypeError):
            KinesisSpout(None)  # type: ignore[arg-type]
        gc.collect()  # its finalizer runs on an object that never got a state
        spout = KinesisSpout(make_config(kinesalite, stream), MemoryCheckpointStore()).open()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                spout.__del__()  # what the garbage collector calls for a spout nobody closed
        finally:
            spout.close()
        with warnings.catch_warnings(record=True) as after_close:
            warnings.simplefilter("always")
            spout.__del__()
    finally:
        sys.unraisablehook = previous
    assert not unraisable, [u.exc_value for u in unraisable]
    assert [(w.category, str(w.message)) for w in caught] == [
        (ResourceWarning, f"KinesisSpout for {stream!r} was never closed; call close() or use "
                          f"'with KinesisSpout(...)'")]
    # reported where the spout's class is, not where it was collected
    assert caught[0].filename == inspect.getsourcefile(KinesisSpout)
    assert after_close == []


def test_opening_an_open_spout_changes_nothing(moto_kinesis: KinesisEndpoint) -> None:
    stream = moto_kinesis.create_stream(shards=2)
    placed = moto_kinesis.put(stream, [f"r{i}".encode() for i in range(6)], [f"key-{i}" for i in range(6)])
    with KinesisSpout(make_config(moto_kinesis, stream), MemoryCheckpointStore()) as spout:
        threads = set(threading.enumerate())
        assert spout.open() is spout
        assert set(threading.enumerate()) == threads, "a second open() started threads"
        got = [next_tuple(spout) for _ in range(6)]
        assert sorted(t.message_id for t in got) == sorted(f"{shard}:{seq}" for shard, seq in placed)
        spout.ack_many(t.message_id for t in got)
        assert spout.next_batch(max_records=10, timeout_s=0.5) == [], "records read twice"


def test_the_spout_reads_through_the_client_it_was_given_and_in_the_configured_region(
        moto_kinesis: KinesisEndpoint) -> None:
    """moto keeps each region's streams apart: a stream of eu-west-1 is found only by a client of that region
    (the environment says us-east-1)."""
    europe = KinesisEndpoint("moto", moto_kinesis.endpoint_url, region="eu-west-1", real_sequence_numbers=False)
    stream = europe.create_stream()
    placed = europe.put(stream, [b"r0", b"r1"])
    with KinesisSpout(make_config(europe, stream), MemoryCheckpointStore()) as spout:
        got = [next_tuple(spout) for _ in range(2)]
        assert [t.record.sequence_number for t in got] == [seq for _, seq in placed]
    nowhere = make_config(europe, stream, endpoint_url="http://127.0.0.1:9")  # nothing listens there
    with KinesisSpout(nowhere, MemoryCheckpointStore(), client=europe.client()) as spout:
        got = [next_tuple(spout) for _ in range(2)]
        assert [t.record.sequence_number for t in got] == [seq for _, seq in placed]


def test_close_ends_every_thread_the_spout_started_and_releases_the_store_only_if_it_was_opened(
        kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream(shards=2)
    store = MemoryCheckpointStore()
    KinesisSpout(make_config(kinesalite, stream), store).close()  # never opened: the shared store stays usable
    assert not store.closed
    before = set(threading.enumerate())
    spout = KinesisSpout(make_config(kinesalite, stream, reader_threads=0), store).open()
    started = {t.name for t in set(threading.enumerate()) - before}
    assert {"kinesis-checkpoint-writer", "kinesis-dead-letters", f"kinesis-shard-sync-{stream}"} <= started
    assert len([name for name in started if name.startswith("kinesis-reader-")]) == 2, started
    spout.close()
    assert store.closed
    assert wait_until(lambda: not [t for t in set(threading.enumerate()) - before if t.is_alive()], TIMEOUT_S), \
        [t.name for t in set(threading.enumerate()) - before]


def test_a_stream_deleted_while_the_spout_reads_it_is_an_error_of_the_next_call(kinesalite: KinesisEndpoint) -> None:
    stream = kinesalite.create_stream()
    # the reader polls the idle shard rarely: the shard sync (every 0.2 s) notices the deletion first
    config = make_config(kinesalite, stream, shard_sync_interval_s=0.2, empty_record_backoff_s=30.0)
    with KinesisSpout(config, MemoryCheckpointStore()) as spout:
        assert spout.next_tuple() is None
        kinesalite.client().delete_stream(StreamName=stream)
        errors: list[BaseException] = []

        def raises() -> bool:
            try:
                spout.next_tuple()
            except StreamNotFoundError as exc:
                errors.append(exc)
                return True
            return False

        assert wait_until(raises, TIMEOUT_S), "the deleted stream was never reported"
        assert stream in str(errors[0])


def test_an_error_met_after_tuples_were_taken_comes_after_them_from_the_next_call(
        fault_proxy: tuple[FaultProxy, KinesisEndpoint], kinesis_backend: KinesisEndpoint) -> None:
    proxy, through = fault_proxy
    stream, shards, _ = put_into_shards(kinesis_backend, [3, 0])
    proxy.inject("GetRecords", "AccessDeniedException", shard_id=shards[1], message="no reading for you")
    with KinesisSpout(make_config(through, stream), MemoryCheckpointStore()) as spout:
        assert wait_until(lambda: proxy.pending() == 0 and spout.metrics()[0].buffered == 3, TIMEOUT_S)
        time.sleep(0.2)  # the failed call's reader keeps its error for the consumer
        taken = spout.next_batch(max_records=10, timeout_s=1.0)
        assert [t.record.shard_id for t in taken] == [shards[0]] * 3, "tuples taken before the error were lost"
        with pytest.raises(KinesisError, match="no reading for you"):
            spout.next_batch(max_records=10, timeout_s=1.0)
        spout.ack_many(t.message_id for t in taken)
