"""Helpers of the tests of acks and fails of one emission (a retry's attempt): a spout on a stream with ZooKeeper,
one batch of an exact size, the next retry of a record at an expected attempt, the stored checkpoints, and what is
in flight."""

from __future__ import annotations

import time
from typing import Any

from kinesis_spout import KinesisSpout, SpoutBatch
from kinesis_spout.testing import stored_checkpoints
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import TIMEOUT_S, make_config


def open_spout(endpoint: KinesisEndpoint, zookeeper: Any, stream: str, app: str, **extra: Any) -> KinesisSpout:
    """An open spout of app ``app`` reading ``stream`` (see ``make_config``), its checkpoints in the fixture's
    ZooKeeper; ``extra`` sets other settings."""
    return KinesisSpout(make_config(endpoint, stream, app_name=app, zookeeper=zookeeper.hosts,
                                    zookeeper_prefix=zookeeper.prefix, **extra)).open()


def take(spout: KinesisSpout, want: int) -> SpoutBatch:
    """One batch of exactly ``want`` tuples (bounded wait; nothing else may be ready)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        assert time.monotonic() < deadline, f"no batch of {want} tuples came"
        batch = spout.next_batch(max_records=want, timeout_s=0.5)
        if batch:
            assert len(batch) == want, f"a batch of {len(batch)} tuples came, {want} expected"
            return batch


def take_retry(spout: KinesisSpout, mid: str, attempt: int) -> SpoutBatch:
    """The next batch: the retry of ``mid`` alone, at ``attempt`` (it comes back after its backoff)."""
    batch = take(spout, 1)
    assert (batch[0].message_id, batch[0].attempt) == (mid, attempt)
    return batch


def checkpoints(spout: KinesisSpout) -> dict[str, Any]:
    assert spout.flush_checkpoints()
    return stored_checkpoints(spout.config)


def pending(spout: KinesisSpout) -> tuple[int, int]:
    """(records in flight, of which waiting for their retry) over the spout's shards."""
    figures = spout.metrics()
    return sum(m.inflight for m in figures), sum(m.retry_queue for m in figures)
