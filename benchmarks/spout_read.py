"""One measured read of a stream through KinesisSpout, acking every record, with checkpoints in a real ZooKeeper."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow.compute as pc

from benchmarks.loops import ReadResult, ShortRead
from benchmarks.stats import Stopwatch
from kinesis_spout import InitialPosition, KinesisSpout, SpoutConfig, ZooKeeperCheckpointStore
from kinesis_spout.checkpoint.base import Checkpoint, CheckpointStore


class CountingStore:
    """A :class:`CheckpointStore` that counts the writes it passes on to the store it wraps.

    Who calls: the spout's checkpoint writer thread (``save``); the benchmark reads ``writes`` and ``last``
    (the last checkpoint written per shard). Everything else is handed through unchanged.
    """

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner
        self.writes = 0
        self.last: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()

    def open(self) -> None:
        self.inner.open()

    def load(self, shard_id: str) -> Checkpoint | None:
        return self.inner.load(shard_id)

    def save(self, checkpoint: Checkpoint) -> None:
        self.inner.save(checkpoint)
        with self._lock:
            self.writes += 1
            self.last[checkpoint.shard_id] = checkpoint

    def list(self) -> dict[str, Checkpoint]:
        return self.inner.list()

    def delete(self, shard_id: str) -> None:
        self.inner.delete(shard_id)

    def close(self) -> None:
        self.inner.close()


def spout_config(stream: str, app: str, zookeeper: str, prefix: str, endpoint_url: str, *, limit: int,
                 checkpoint_interval_s: float) -> SpoutConfig:
    """The configuration of every measured spout: TRIM_HORIZON, ``limit`` records per GetRecords, the given
    checkpoint interval; everything else at its default."""
    return SpoutConfig(stream_name=stream, app_name=app, zookeeper=zookeeper, zookeeper_prefix=prefix,
                       endpoint_url=endpoint_url, region="us-east-1", initial_position=InitialPosition.TRIM_HORIZON,
                       max_records_per_call=limit, checkpoint_interval_s=checkpoint_interval_s)


def read_with_spout(config: SpoutConfig, expected: int, timeout_s: float, *, client: Any = None,
                    last_sequence: dict[str, str] | None = None, batch: int = 1000, sink_s: float = 0.0,
                    pace_per_s: float = 0.0, batch_acks: bool = False, columns: bool = False) -> ReadResult:
    """Read ``expected`` records through a new spout, acking each one as soon as it is emitted (``batch_acks``:
    acking each batch whole with ``batch.ack()`` once its records were looked at; ``columns``: taking columnar
    batches with ``next_columns()``, their data looked at as an Arrow column, each acked whole).

    The clock runs from ``open()`` (ZooKeeper connection, shard listing, checkpoint reads) to the last ack; the
    close that flushes the final checkpoints is timed apart (``extra["close_s"]``), and so is ``open()`` within
    the run (``extra["open_s"]``). ``client`` is the boto3 Kinesis client the spout uses (made before the clock
    starts, as the loop's is); by default the spout makes its own in ``open()``. ``extra`` also holds the
    ZooKeeper writes made while reading (``zk_writes_during_read``) and in all (``zk_writes``), and, when
    ``last_sequence`` is given, whether every shard's last stored checkpoint is its last record.
    The consumer takes up to ``batch`` tuples at a time; with ``sink_s`` > 0 it hands each batch to a sink that
    takes that long (a sleep, which lets other threads run as a network call would) before acking it; with
    ``pace_per_s`` > 0 the sink takes as long as needed to process no more than that many records per second
    (a steady consumer).
    Raises :class:`ShortRead` when ``timeout_s`` passes first.
    """
    store = CountingStore(ZooKeeperCheckpointStore.from_config(config))
    spout = KinesisSpout(config, checkpoint_store=store, client=client)
    count = nbytes = 0
    watch = Stopwatch().start()
    deadline = time.monotonic() + timeout_s
    try:
        spout.open()
        open_s = watch.elapsed()
        while count < expected:
            if time.monotonic() > deadline:
                raise ShortRead(f"spout read {count} of {expected} records of {config.stream_name!r} in "
                                f"{timeout_s:g} s")
            if columns:
                taken = spout.next_columns(max_records=batch, timeout_s=0.5)
                if taken:
                    nbytes += pc.sum(pc.binary_length(taken.to_arrow().column("data"))).as_py()
                    taken.ack()
                count += len(taken)
                continue
            tuples = spout.next_batch(max_records=batch, timeout_s=0.5)
            if sink_s and tuples:
                time.sleep(sink_s)
            if pace_per_s and tuples:
                ahead = (count + len(tuples)) / pace_per_s - watch.elapsed()
                if ahead > 0:
                    time.sleep(ahead)
            if batch_acks:
                for tup in tuples:
                    nbytes += len(tup.record.data)
                tuples.ack()
            else:
                for tup in tuples:
                    nbytes += len(tup.record.data)
                    spout.ack(tup.message_id)
            count += len(tuples)
        watch.stop()
        writes_during_read = store.writes
    finally:
        closed_at = time.perf_counter()
        spout.close()
        close_s = time.perf_counter() - closed_at
    extra: dict[str, Any] = {"open_s": round(open_s, 4), "zk_writes_during_read": writes_during_read,
                             "zk_writes": store.writes, "close_s": round(close_s, 4)}
    if last_sequence is not None:
        extra["checkpoints_at_end"] = all(
            store.last.get(sid) is not None and store.last[sid].sequence_number == seq
            for sid, seq in last_sequence.items())
    return ReadResult(count, nbytes, watch.wall_s, watch.cpu_s, extra=extra)
