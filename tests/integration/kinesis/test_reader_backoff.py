"""The buffered reader's backoff, with faults injected for real by FaultProxy: retried errors wait the backoff's
delay before the next call, and a successful read resets the count of failures."""

from __future__ import annotations

import threading
import time

import pytest

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import GET_RECORDS_RETRY, ShardGetter
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.records import Record
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.process import wait_until

PTEE = "ProvisionedThroughputExceededException"
TIMEOUT_S = 20.0

Proxied = tuple[FaultProxy, KinesisEndpoint]


def _getter(through: KinesisEndpoint, stream: str, shard: str, max_records: int = 10_000) -> ShardGetter:
    """The library's own client (one attempt per call) reading ``shard`` through the proxy."""
    client = make_client(through.region, through.endpoint_url, read_timeout_s=10.0)
    return ShardGetter(client, stream, shard, TRIM_HORIZON, max_records=max_records)


def _take(reader: BufferedShardReader, signal: threading.Event, count: int, out: list[Record]) -> None:
    """Take records from a started reader into ``out`` until it holds ``count`` (fails the test at the deadline);
    an error of the reader is raised by ``take_upto``."""
    deadline = time.monotonic() + TIMEOUT_S
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"took {len(out)} of {count} records in {TIMEOUT_S} s"
        signal.wait(min(remaining, 0.5))
        signal.clear()
        out.extend(reader.take_upto(10_000, 1 << 30))


@pytest.mark.parametrize("code, status", [(PTEE, 400), ("InternalFailure", 500)])
def test_retried_errors_wait_the_backoff_before_the_next_call(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint,
                                                               code: str, status: int) -> None:
    """Three throttles (or server errors) in a row cost at least three of the backoff's smallest delays: the
    reader does not hammer the shard with immediate retries."""
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    placed = kinesis_backend.put(stream, [f"r{i}".encode() for i in range(5)])
    shard = placed[0][0]
    proxy.inject("GetRecords", code, status=status, times=3)
    signal = threading.Event()
    reader = BufferedShardReader(_getter(through, stream, shard), max_records=1000, max_bytes=1 << 20,
                                 empty_backoff_s=0.2, on_data=signal.set)
    out: list[Record] = []
    started = time.monotonic()
    reader.start()
    try:
        _take(reader, signal, 5, out)
        elapsed = time.monotonic() - started
    finally:
        reader.close()
    assert [r.key.sequence for r in out] == [int(seq) for _, seq in placed]
    assert proxy.injected == {f"GetRecords:{code}": 3}
    assert reader.retried_errors == 3
    minimum = 3 * GET_RECORDS_RETRY.initial_s  # each delay of the backoff is at least initial_s
    assert elapsed >= minimum, f"3 retried {code} took {elapsed:.3f} s: retried without waiting {minimum:g} s"


def test_a_successful_read_resets_the_backoff(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    """With max_retries=3: two throttles, a successful read, two more throttles. The failures do not add up over
    the reader's life: it does not give up, and every record arrives."""
    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    placed = kinesis_backend.put(stream, [f"r{i}".encode() for i in range(10)])
    shard = placed[0][0]
    signal = threading.Event()
    # 5 records a call into a buffer of 5: after a successful read the reader waits for room, making no call,
    # so the next faults can be injected exactly between that read and the next call
    reader = BufferedShardReader(_getter(through, stream, shard, max_records=5), max_records=5, max_bytes=1 << 20,
                                 empty_backoff_s=0.2, on_data=signal.set, max_retries=3)
    proxy.inject("GetRecords", PTEE, times=2)
    out: list[Record] = []
    reader.start()
    try:
        assert wait_until(lambda: reader.buffered == 5, TIMEOUT_S), "the first 5 records never arrived"
        assert proxy.injected == {f"GetRecords:{PTEE}": 2} and proxy.pending() == 0
        calls = proxy.calls["GetRecords"]
        assert calls == 3  # two throttles, one success; then the full buffer holds the reader back
        proxy.inject("GetRecords", PTEE, times=2)
        _take(reader, signal, 10, out)  # raises the reader's error if it gave up
    finally:
        reader.close()
    assert [r.key.sequence for r in out] == [int(seq) for _, seq in placed]
    assert proxy.injected == {f"GetRecords:{PTEE}": 4}
    assert reader.retried_errors == 4
    assert reader.take_upto(10, 1 << 30) == []  # no error stored


def test_a_paced_getter_retries_throttles_after_its_backoff_and_gives_up_after_its_limit(
        fault_proxy: Proxied, kinesis_backend: KinesisEndpoint) -> None:
    """The loop of the Spark tasks: two throttles are retried after the backoff and the records arrive; three in a
    row with a limit of two retries raise the throttle."""
    from kinesis_spout.errors import KinesisError
    from kinesis_spout.kinesis.retrieval.polling import PacedGetter

    proxy, through = fault_proxy
    stream = kinesis_backend.create_stream()
    placed = kinesis_backend.put(stream, [f"r{i}".encode() for i in range(5)])
    shard = placed[0][0]
    proxy.inject("GetRecords", PTEE, status=400, times=2)
    paced = PacedGetter(_getter(through, stream, shard), interval_s=0.2, max_retries=2)
    started = time.monotonic()
    result = paced.fetch()
    assert time.monotonic() - started >= 2 * GET_RECORDS_RETRY.initial_s
    assert [r.key.sequence for r in result.records] == [int(seq) for _, seq in placed]
    proxy.inject("GetRecords", PTEE, status=400, times=3)
    paced = PacedGetter(_getter(through, stream, shard), interval_s=0.2, max_retries=2)
    with pytest.raises(KinesisError, match="throttled"):
        paced.fetch()
    assert proxy.injected == {f"GetRecords:{PTEE}": 5}
