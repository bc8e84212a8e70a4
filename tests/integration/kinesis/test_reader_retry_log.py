"""Retried read errors are logged at DEBUG until a run of them is long enough to matter: a few 500s or throttles in
a row (moto answers 500 now and then under load; Kinesis throttles a busy shard) print no WARNING, and a longer
run prints one WARNING naming how many calls failed in a row. Faults injected for real by FaultProxy."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kinesis_spout.kinesis.client import make_client
from kinesis_spout.kinesis.retrieval.polling import ShardGetter
from kinesis_spout.kinesis.retrieval.read_retries import QUIET_RETRIES
from kinesis_spout.kinesis.retrieval.reader import BufferedShardReader
from kinesis_spout.positions import TRIM_HORIZON
from kinesis_spout.records import Record
from kinesis_spout.testing.faults import FaultProxy
from kinesis_spout.testing.kinesis import KinesisEndpoint

Proxied = tuple[FaultProxy, KinesisEndpoint]


def read_through_faults(proxy: FaultProxy, through: KinesisEndpoint, backend: KinesisEndpoint, failures: int,
                        caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Read 5 records of a fresh stream through ``failures`` GetRecords 500s in a row; the reader's log records."""
    stream = backend.create_stream()
    placed = backend.put(stream, [f"r{i}".encode() for i in range(5)])
    proxy.inject("GetRecords", "InternalFailure", status=500, times=failures)
    signal = threading.Event()
    client = make_client(through.region, through.endpoint_url, read_timeout_s=10.0)
    reader = BufferedShardReader(ShardGetter(client, stream, placed[0][0], TRIM_HORIZON), max_records=1000,
                                 max_bytes=1 << 20, empty_backoff_s=0.2, on_data=signal.set)
    out: list[Record] = []
    deadline = time.monotonic() + 60.0
    caplog.set_level(logging.DEBUG, logger="kinesis_spout.kinesis")
    reader.start()
    try:
        while len(out) < 5:
            assert time.monotonic() < deadline, f"took {len(out)} of 5 records in 60 s"
            signal.wait(0.5)
            signal.clear()
            out.extend(reader.take_upto(10_000, 1 << 30))
    finally:
        reader.close()
    assert proxy.injected == {"GetRecords:InternalFailure": failures}
    return [r for r in caplog.records if r.name.startswith("kinesis_spout.kinesis") and "retrying" in r.getMessage()]


def test_a_few_retried_errors_in_a_row_are_logged_at_debug_only(fault_proxy: Proxied, kinesis_backend: KinesisEndpoint,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    proxy, through = fault_proxy
    retries = read_through_faults(proxy, through, kinesis_backend, QUIET_RETRIES, caplog)
    assert [r.levelname for r in retries] == ["DEBUG"] * QUIET_RETRIES, [r.getMessage() for r in retries]


def test_a_longer_run_of_retried_errors_is_one_warning_with_its_count(fault_proxy: Proxied,
                                                                      kinesis_backend: KinesisEndpoint,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    proxy, through = fault_proxy
    retries = read_through_faults(proxy, through, kinesis_backend, QUIET_RETRIES + 2, caplog)
    warnings = [r.getMessage() for r in retries if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"{QUIET_RETRIES + 1} failed calls in a row" in warnings[0], warnings[0]
