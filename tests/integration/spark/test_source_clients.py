"""Who owns the source's clients: a stream reader's own (the driver's, made on first use, never pickled, released by
``stop()``) and the worker process's cache (every task's reads, whatever reader copy Spark unpickled for it)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kinesis_spout.checkpoint.zookeeper import ZooKeeperCheckpointStore
from kinesis_spout.spark.source import WORKER_CLIENTS, KinesisSpoutDataSource
from kinesis_spout.testing.kinesis import KinesisEndpoint

from .support import message_ids, read_partition, source_options


class StoreSessions:
    """A spy on the ZooKeeper checkpoint store: which stores were opened and closed (by identity)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[int] = []
        self.closed: list[int] = []
        real_open, real_close = ZooKeeperCheckpointStore.open, ZooKeeperCheckpointStore.close

        def spy_open(store: ZooKeeperCheckpointStore) -> None:
            self.opened.append(id(store))
            real_open(store)

        def spy_close(store: ZooKeeperCheckpointStore) -> None:
            self.closed.append(id(store))
            real_close(store)

        monkeypatch.setattr(ZooKeeperCheckpointStore, "open", spy_open)
        monkeypatch.setattr(ZooKeeperCheckpointStore, "close", spy_close)


@pytest.mark.parametrize("mode", ["driver", "executors"])
def test_a_reader_in_use_pickles_without_its_clients_tasks_use_the_worker_cache_and_stop_releases_the_drivers(
        kinesalite: KinesisEndpoint, zookeeper: Any, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    stream = kinesalite.create_stream(shards=3)
    placed = kinesalite.put(stream, [f"c{i}".encode() for i in range(30)])
    # a partition per shard in both modes (both would otherwise read the three shards in one task)
    options = source_options(kinesalite, zookeeper, stream, readMode=mode, recordsPerPartition="1",
                             shardsPerTask="1")
    reader = KinesisSpoutDataSource(options).streamReader(None)
    worker_store = WORKER_CLIENTS.checkpoints(reader.config)  # this worker process's, opened before the spy
    assert WORKER_CLIENTS.checkpoints(reader.config) is worker_store
    sessions = StoreSessions(monkeypatch)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end != start and len(sessions.opened) == 1  # the driver's own store, made on first use
    parts = reader.partitions(start, end)
    assert len(parts) == 3
    # each task runs on a reader copy Spark unpickled for it: the live clients stayed on the driver, and every
    # copy reads with the worker process's clients (no session of its own, none left open behind it)
    ids = [mid for part in parts for mid in read_partition(pickle.loads(pickle.dumps(reader)), part)]
    assert sorted(ids) == sorted(message_ids(placed))
    assert len(sessions.opened) == 1, "a task opened a ZooKeeper session of its own instead of the worker's"
    reader.commit(end)
    reader.stop()
    reader.stop()
    assert sessions.closed == sessions.opened  # the driver's store, closed once
    assert worker_store.connected  # the worker process's clients outlive any reader
